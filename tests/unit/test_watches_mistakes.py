"""watches.yaml mistakes, each with its exact message.

The rule: where the Go operator refuses a file, loading fails with one line of the same
meaning; where it accepts one (and silently does something the author probably did not
mean), the file loads and the watch carries one warning naming file, entry, key and line,
which `run` logs once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from runner.errors import ConfigError
from runner.watches.model import parse

HEAD = "- version: v1\n  group: web.example.com\n  kind: Site\n"
ROLE_ENTRY = HEAD + "  role: site\n"
ERROR = "error"
WARNING = "warning"


def mistake(
    name: str, text: str, kind: str, message: str, environ: dict[str, str] | None = None
) -> Any:
    return pytest.param(text, kind, message, environ or {}, id=name)


MISTAKES = [
    mistake(
        "empty-file",
        "",
        ERROR,
        "watches.yaml: is empty; expected a list of watches",
    ),
    mistake(
        "not-a-list",
        "group: web.example.com\n",
        ERROR,
        'watches.yaml: expected a list of watches, got mapping {"group": '
        '"web.example.com"} (line 1)',
    ),
    mistake(
        "invalid-yaml",
        "- version: v1\n  kind: [Site\n",
        ERROR,
        "watches.yaml: invalid YAML at line 3, column 1: while parsing a flow "
        "sequence; expected ',' or ']', but got '<stream end>'",
    ),
    mistake(
        "entry-not-a-mapping",
        "- web.example.com/v1/Site\n",
        ERROR,
        'watches.yaml: entry 1: expected a mapping, got string "web.example.com/v1/Site" (line 1)',
    ),
    mistake(
        "version-missing",
        "- group: web.example.com\n  kind: Site\n  role: site\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/, Kind=Site): version: invalid GVK: "
        "web.example.com/, Kind=Site: version must not be empty (line 1)",
    ),
    mistake(
        "kind-empty",
        "- version: v1\n  group: web.example.com\n  kind: ''\n  role: site\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=): kind: invalid GVK: "
        "web.example.com/v1, Kind=: kind must not be empty (line 3)",
    ),
    mistake(
        "duplicate-gvk",
        ROLE_ENTRY + ROLE_ENTRY,
        ERROR,
        "watches.yaml: entry 2 (web.example.com/v1, Kind=Site): duplicate GVK: "
        "web.example.com/v1, Kind=Site (first defined by entry 1) (line 5)",
    ),
    mistake(
        "neither-role-nor-playbook",
        HEAD,
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): must specify Role "
        "or Playbook (neither role nor playbook is set) (line 1)",
    ),
    mistake(
        "role-not-found",
        HEAD + "  role: website\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): role: website was "
        "not found (looked in {base}/roles/website, {base}/website) (line 4)",
    ),
    mistake(
        "playbook-not-found",
        HEAD + "  playbook: playbooks/web.yml\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): playbook: "
        "playbooks/web.yml was not found (looked for {base}/playbooks/web.yml) "
        "(line 4)",
    ),
    mistake(
        "playbook-is-a-directory",
        HEAD + "  playbook: playbooks\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): playbook: playbooks "
        "is not a file (looked for {base}/playbooks) (line 4)",
    ),
    mistake(
        "period-bare-number",
        ROLE_ENTRY + "  reconcilePeriod: 30\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): reconcilePeriod: "
        'expected a duration string such as "30s", got the number 30 (a bare number '
        "has no unit) (line 5)",
    ),
    mistake(
        "period-bare-zero",
        ROLE_ENTRY + "  reconcilePeriod: 0\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): reconcilePeriod: "
        'expected a duration string such as "0s", got the number 0 (a bare number '
        "has no unit) (line 5)",
    ),
    mistake(
        "period-no-unit",
        ROLE_ENTRY + "  reconcilePeriod: '30'\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): reconcilePeriod: "
        'invalid duration "30": missing unit in duration "30" (units: ns, us, µs, '
        "ms, s, m, h) (line 5)",
    ),
    mistake(
        "period-words",
        ROLE_ENTRY + "  reconcilePeriod: 5 minutes\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): reconcilePeriod: "
        'invalid duration "5 minutes": unknown unit " minutes" in duration "5 '
        'minutes" (units: ns, us, µs, ms, s, m, h) (line 5)',
    ),
    mistake(
        "bool-typo",
        ROLE_ENTRY + "  manageStatus: flase\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): manageStatus: "
        'expected true or false, got string "flase" (line 5)',
    ),
    mistake(
        "vars-a-list",
        ROLE_ENTRY + "  vars: [a, b]\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): vars: expected a "
        'mapping, got list ["a", "b"] (line 5)',
    ),
    mistake(
        "finalizer-without-name",
        ROLE_ENTRY + "  finalizer: {role: site}\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): finalizer.name: "
        'finalizer must have name, got mapping {"role": "site"} (line 5)',
    ),
    mistake(
        "finalizer-not-a-mapping",
        ROLE_ENTRY + "  finalizer: cleanup\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): finalizer: expected "
        'a mapping with name, role|playbook, vars, got string "cleanup" (line 5)',
    ),
    mistake(
        "finalizer-runs-nothing",
        ROLE_ENTRY + "  finalizer: {name: web.example.com/cleanup}\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): finalizer: must "
        "specify Role or Playbook (or vars to run the watch's own with) for "
        "'web.example.com/cleanup' (line 5)",
    ),
    mistake(
        "finalizer-misspelt-key",
        ROLE_ENTRY + "  finalizer: {name: f, roles: site}\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): finalizer: must "
        "specify Role or Playbook (or vars to run the watch's own with) for 'f'; "
        "finalizer.roles: unknown key, ignored (as the Go operator ignores it); did "
        "you mean 'role'? (line 5)",
    ),
    mistake(
        "blacklist-not-a-list",
        ROLE_ENTRY + "  blacklist: Secret\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): blacklist: expected "
        'a list of {group, version, kind}, got string "Secret" (line 5)',
    ),
    mistake(
        "blacklist-without-kind",
        ROLE_ENTRY + "  blacklist: [{version: v1}]\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): blacklist[0].kind: "
        'must not be empty in mapping {"version": "v1"} (line 5)',
    ),
    mistake(
        "selector-bad-operator",
        ROLE_ENTRY + "  selector:\n    matchExpressions: [{key: a, operator: Is}]\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): "
        'selector.matchExpressions[0].operator: invalid operator string "Is" (valid '
        "operators: In, NotIn, Exists, DoesNotExist) (line 6)",
    ),
    mistake(
        "role-variable-empty",
        HEAD + "  role: ${ROLE}\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): must specify Role "
        "or Playbook (neither role nor playbook is set); ${ROLE} expanded to "
        "nothing (the variable is set but empty) on line 4 (line 1)",
        environ={"ROLE": ""},
    ),
    mistake(
        "role-variable-unset",
        HEAD + "  role: ${ROLE}\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): role: ${ROLE} was "
        "not found (looked in {base}/roles/${ROLE}, {base}/${ROLE}); ${ROLE} is not "
        "set, so the text ${ROLE} was kept (as the Go operator keeps it) on line 4 "
        "(line 4)",
    ),
    mistake(
        "version-variable-empty",
        "- version: $VERSION\n  kind: Site\n  role: site\n",
        ERROR,
        "watches.yaml: entry 1 (/, Kind=Site): version: invalid GVK: /, Kind=Site: "
        "version must not be empty; ${VERSION} expanded to nothing (the variable is "
        "set but empty) on line 1 (line 1)",
        environ={"VERSION": ""},
    ),
    mistake(
        "max-runner-artifacts-negative",
        ROLE_ENTRY + "  maxRunnerArtifacts: -1\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): maxRunnerArtifacts: "
        "expected a non-negative integer, got integer -1 (line 5)",
    ),
    mistake(
        "group-a-number",
        "- version: v1\n  group: 5\n  kind: Site\n  role: site\n",
        ERROR,
        "watches.yaml: entry 1 (/v1, Kind=Site): group: expected a string, got integer 5 (line 2)",
    ),
    mistake(
        "key-given-twice",
        ROLE_ENTRY + "  Role: site\n",
        ERROR,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): Role: given twice "
        "(also as 'role') (line 5)",
    ),
    mistake(
        "role-and-playbook",
        ROLE_ENTRY + "  playbook: playbooks/site.yml\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): role: site is "
        "ignored: playbook is set too, and the playbook runs (as with the Go "
        "operator); remove one of the two (line 4)",
    ),
    mistake(
        "finalizer-role-and-playbook",
        ROLE_ENTRY
        + "  finalizer:\n    name: f\n    role: site\n    playbook: playbooks/site.yml\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): finalizer.role: "
        "site is ignored: playbook is set too, and the playbook runs (as with the "
        "Go operator); remove one of the two (line 7)",
    ),
    mistake(
        "max-concurrent-negative",
        ROLE_ENTRY + "  maxConcurrentReconciles: -3\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): "
        "maxConcurrentReconciles: integer -3 is ignored: watches.yaml cannot set it "
        "(the Go operator ignores it too); use --max-concurrent-reconciles or "
        "MAX_CONCURRENT_RECONCILES_SITE_WEB_EXAMPLE_COM (line 5)",
    ),
    mistake(
        "max-concurrent-text",
        ROLE_ENTRY + "  maxConcurrentReconciles: lots\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): "
        'maxConcurrentReconciles: string "lots" is ignored: watches.yaml cannot set '
        "it (the Go operator ignores it too); use --max-concurrent-reconciles or "
        "MAX_CONCURRENT_RECONCILES_SITE_WEB_EXAMPLE_COM (line 5)",
    ),
    mistake(
        "max-workers",
        ROLE_ENTRY + "  maxWorkers: 4\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): maxWorkers: integer "
        "4 is ignored: watches.yaml cannot set it (the Go operator ignores it too); "
        "use --max-concurrent-reconciles or "
        "MAX_CONCURRENT_RECONCILES_SITE_WEB_EXAMPLE_COM (line 5)",
    ),
    mistake(
        "verbosity-99",
        ROLE_ENTRY + "  ansibleVerbosity: 99\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): ansibleVerbosity: "
        "integer 99 is ignored: watches.yaml cannot set it (the Go operator ignores "
        "it too); use --ansible-verbosity or ANSIBLE_VERBOSITY_SITE_WEB_EXAMPLE_COM "
        "(line 5)",
    ),
    mistake(
        "group-not-dns",
        "- version: v1\n  group: Web_Example\n  kind: Site\n  role: site\n",
        WARNING,
        'watches.yaml: entry 1 (Web_Example/v1, Kind=Site): group: "Web_Example" is '
        "not a valid API group (a DNS subdomain: lower-case letters, digits, '-' "
        "and '.'): no CustomResourceDefinition can serve it, so this watch will "
        "find nothing to reconcile (line 2)",
    ),
    mistake(
        "version-upper-case",
        "- version: V1\n  group: web.example.com\n  kind: Site\n  role: site\n",
        WARNING,
        'watches.yaml: entry 1 (web.example.com/V1, Kind=Site): version: "V1" is '
        "not a valid API version (lower-case letters, digits and '-'): no "
        "CustomResourceDefinition can serve it, so this watch will find nothing to "
        "reconcile (line 1)",
    ),
    mistake(
        "period-negative",
        ROLE_ENTRY + "  reconcilePeriod: -5s\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): reconcilePeriod: "
        '"-5s" is negative: resources are then never reconciled periodically (as '
        'with the Go operator); leave it out or write "0" for the '
        "--reconcile-period default (line 5)",
    ),
    mistake(
        "unknown-key-close",
        ROLE_ENTRY + "  reconcilePeriodd: 5s\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): reconcilePeriodd: "
        "unknown key, ignored (as the Go operator ignores it); did you mean "
        "'reconcilePeriod'? (line 5)",
    ),
    mistake(
        "unknown-key-far",
        ROLE_ENTRY + "  replicas: 3\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): replicas: unknown "
        "key, ignored (as the Go operator ignores it); known keys: group, version, "
        "kind, playbook, role, vars, reconcilePeriod, manageStatus, "
        "watchDependentResources, watchClusterScopedResources, snakeCaseParameters, "
        "watchAnnotationsChanges, markUnsafe, maxRunnerArtifacts, blacklist, "
        "selector, finalizer (line 5)",
    ),
    mistake(
        "blacklist-misspelt-key",
        ROLE_ENTRY + "  blacklist: [{version: v1, kind: Secret, grup: ''}]\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): blacklist[0].grup: "
        "unknown key, ignored (as the Go operator ignores it); did you mean "
        "'group'? (line 5)",
    ),
    mistake(
        "vars-variable-empty",
        ROLE_ENTRY + "  vars:\n    message: ${MESSAGE}\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): vars.message: "
        "${MESSAGE} expanded to nothing (the variable is set but empty) (line 6)",
        environ={"MESSAGE": ""},
    ),
    mistake(
        "vars-variable-unset",
        ROLE_ENTRY + "  vars:\n    message: ${MESSAGE}\n",
        WARNING,
        "watches.yaml: entry 1 (web.example.com/v1, Kind=Site): vars.message: "
        "${MESSAGE} is not set, so the text ${MESSAGE} was kept (as the Go operator "
        "keeps it) (line 6)",
    ),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "roles" / "site" / "tasks").mkdir(parents=True)
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "site.yml").write_text("- hosts: localhost\n")
    return tmp_path


def test_the_table_is_large_enough() -> None:
    assert len(MISTAKES) >= 30


@pytest.mark.parametrize(("text", "kind", "message", "environ"), MISTAKES)
def test_mistake_gives_its_exact_message(
    project: Path, text: str, kind: str, message: str, environ: dict[str, str]
) -> None:
    expected = message.replace("{base}", str(project))
    if kind == ERROR:
        with pytest.raises(ConfigError) as caught:
            parse(text, source="watches.yaml", environ=environ, base_dir=project)
        assert str(caught.value) == expected
    else:
        watches = parse(text, source="watches.yaml", environ=environ, base_dir=project)
        assert [message for watch in watches for message in watch.warnings] == [expected]


def test_a_clean_entry_has_no_warnings(project: Path) -> None:
    (watch,) = parse(ROLE_ENTRY, source="watches.yaml", environ={}, base_dir=project)
    assert watch.warnings == ()


def test_role_and_playbook_runs_the_playbook(project: Path) -> None:
    text = ROLE_ENTRY + "  playbook: playbooks/site.yml\n"
    (watch,) = parse(text, source="watches.yaml", environ={}, base_dir=project)
    assert (watch.playbook, watch.role) == (project / "playbooks" / "site.yml", None)


def test_ignored_and_unknown_keys_are_listed(project: Path) -> None:
    text = ROLE_ENTRY + "  maxWorkers: 4\n  replicas: 3\n"
    (watch,) = parse(text, source="watches.yaml", environ={}, base_dir=project)
    assert watch.ignored_keys == ("maxWorkers", "replicas")
    assert len(watch.warnings) == 2


def test_a_comment_with_a_dollar_is_not_a_warning(project: Path) -> None:
    text = "# costs $PRICE\n" + ROLE_ENTRY
    (watch,) = parse(text, source="watches.yaml", environ={}, base_dir=project)
    assert watch.warnings == ()


def test_run_logs_each_warning_once(
    project: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`run` loads the file again on a live reload; the warning is not repeated."""
    import argparse

    from runner.operator import run as run_mod

    (project / "watches.yaml").write_text(ROLE_ENTRY + "  ansibleVerbosity: 99\n")
    monkeypatch.chdir(project)
    loads: list[Any] = []

    async def fake_serve(*_args: Any, load_watches: Any, **_kwargs: Any) -> int:
        loads.append(load_watches())  # what a reload does
        return 0

    monkeypatch.setattr(run_mod, "_serve", fake_serve)
    monkeypatch.setattr(run_mod.logs, "configure", lambda **_kwargs: None)
    monkeypatch.setattr(run_mod, "locate_kubeconfig", lambda *_args: None)
    monkeypatch.setattr(run_mod, "prepare_environment", lambda *_args: None)
    from runner.cli.main import build_parser
    from runner.cli.runsettings import settings_from

    args: argparse.Namespace = build_parser().parse_args(["run"])
    with caplog.at_level(logging.WARNING, logger="ansible-operator"):
        assert run_mod.run(settings_from(args, {})) == 0
    warnings = [r.getMessage() for r in caplog.records if "ansibleVerbosity" in r.getMessage()]
    assert len(loads) == 1
    assert warnings == [
        "./watches.yaml: entry 1 (web.example.com/v1, Kind=Site): ansibleVerbosity: integer 99 "
        "is ignored: watches.yaml cannot set it (the Go operator ignores it too); use "
        "--ansible-verbosity or ANSIBLE_VERBOSITY_SITE_WEB_EXAMPLE_COM (line 5)"
    ]
