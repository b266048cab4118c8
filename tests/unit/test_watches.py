"""watches.yaml: keys, defaults, role look-up, environment overrides and every error."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from runner.errors import ConfigError
from runner.structs import GVK
from runner.util.labelselector import LabelSelector, LabelSelectorRequirement
from runner.watches.model import (
    DEFAULT_COLLECTIONS_PATH,
    KNOWN_KEYS,
    Finalizer,
    Watch,
    expand_env,
    load,
    parse,
    spec_template_warning,
)
from runner.watches.watchfields import env_suffix, role_candidates

MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
HEADER = "watches.yaml: entry 1 (cache.example.com/v1alpha1, Kind=Memcached): "
ENTRY = """\
- version: v1alpha1
  group: cache.example.com
  kind: Memcached
  role: memcached
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An operator project: roles/memcached and playbooks/site.yml."""
    (tmp_path / "roles" / "memcached" / "tasks").mkdir(parents=True)
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "site.yml").write_text("- hosts: localhost\n")
    return tmp_path


def parse_text(
    text: str, base_dir: Path, environ: dict[str, str] | None = None, **kwargs: Any
) -> tuple[Watch, ...]:
    return parse(
        textwrap.dedent(text),
        source="watches.yaml",
        environ={} if environ is None else environ,
        base_dir=base_dir,
        **kwargs,
    )


def parse_one(text: str, base_dir: Path, **kwargs: Any) -> Watch:
    (watch,) = parse_text(text, base_dir, **kwargs)
    return watch


def entry(extra: str = "") -> str:
    return ENTRY + textwrap.indent(textwrap.dedent(extra), "  ")


# --- defaults and keys -------------------------------------------------------------------


def test_minimal_entry_gets_every_default(project: Path) -> None:
    watch = parse_one(ENTRY, project)
    assert watch == Watch(
        gvk=MEMCACHED,
        playbook=None,
        role=project / "roles" / "memcached",
        vars={},
        reconcile_period=36000.0,
        manage_status=True,
        watch_dependent_resources=True,
        watch_cluster_scoped_resources=False,
        snake_case_parameters=True,
        watch_annotations_changes=False,
        mark_unsafe=False,
        max_runner_artifacts=20,
        blacklist=(),
        selector=None,
        finalizer=None,
        max_concurrent_reconciles=1,
        ansible_verbosity=2,
        reconcile_timeout=0.0,
        ignored_keys=(),
    )


@pytest.mark.parametrize(
    ("attribute", "default"),
    [
        pytest.param("vars", {}, id="vars"),
        pytest.param("reconcile_period", 36000.0, id="reconcilePeriod-10h"),
        pytest.param("manage_status", True, id="manageStatus"),
        pytest.param("watch_dependent_resources", True, id="watchDependentResources"),
        pytest.param("watch_cluster_scoped_resources", False, id="watchClusterScopedResources"),
        pytest.param("snake_case_parameters", True, id="snakeCaseParameters"),
        pytest.param("watch_annotations_changes", False, id="watchAnnotationsChanges"),
        pytest.param("mark_unsafe", False, id="markUnsafe"),
        pytest.param("max_runner_artifacts", 20, id="maxRunnerArtifacts"),
        pytest.param("blacklist", (), id="blacklist"),
        pytest.param("selector", None, id="selector"),
        pytest.param("finalizer", None, id="finalizer"),
        pytest.param("max_concurrent_reconciles", 1, id="maxConcurrentReconciles"),
        pytest.param("ansible_verbosity", 2, id="ansibleVerbosity"),
        pytest.param("reconcile_timeout", 0.0, id="reconcileTimeout-off"),
    ],
)
def test_defaults_match_the_spec(project: Path, attribute: str, default: object) -> None:
    assert getattr(parse_one(ENTRY, project), attribute) == default


def test_defaults_given_by_the_caller_are_used(project: Path) -> None:
    watch = parse_one(
        ENTRY,
        project,
        default_reconcile_period=60.0,
        default_max_concurrent_reconciles=8,
        default_ansible_verbosity=0,
    )
    assert (watch.reconcile_period, watch.max_concurrent_reconciles) == (60.0, 8)
    assert watch.ansible_verbosity == 0


def test_explicit_nulls_mean_defaults(project: Path) -> None:
    text = entry(
        """
        vars:
        reconcilePeriod:
        manageStatus:
        maxRunnerArtifacts:
        blacklist:
        finalizer:
        selector:
        """
    )
    assert parse_one(text, project) == parse_one(ENTRY, project)


@pytest.mark.parametrize(
    ("extra", "attribute", "expected"),
    [
        pytest.param("manageStatus: false", "manage_status", False, id="manageStatus"),
        pytest.param("manageStatus: False", "manage_status", False, id="manageStatus-capital"),
        pytest.param("manageStatus: no", "manage_status", False, id="manageStatus-yaml11-no"),
        pytest.param(
            "watchDependentResources: false", "watch_dependent_resources", False, id="watchDep"
        ),
        pytest.param(
            "watchClusterScopedResources: true",
            "watch_cluster_scoped_resources",
            True,
            id="watchClusterScopedResources",
        ),
        pytest.param(
            "snakeCaseParameters: false", "snake_case_parameters", False, id="snakeCaseParameters"
        ),
        pytest.param(
            "watchAnnotationsChanges: true",
            "watch_annotations_changes",
            True,
            id="watchAnnotationsChanges",
        ),
        pytest.param("markUnsafe: true", "mark_unsafe", True, id="markUnsafe"),
        pytest.param("maxRunnerArtifacts: 5", "max_runner_artifacts", 5, id="maxRunnerArtifacts"),
        pytest.param("maxRunnerArtifacts: 0", "max_runner_artifacts", 20, id="artifacts-0-default"),
        pytest.param("reconcilePeriod: 30s", "reconcile_period", 30.0, id="period-30s"),
        pytest.param("reconcilePeriod: 1m30s", "reconcile_period", 90.0, id="period-1m30s"),
        pytest.param("reconcilePeriod: 10h", "reconcile_period", 36000.0, id="period-10h"),
        pytest.param("reconcilePeriod: 1.5h", "reconcile_period", 5400.0, id="period-fraction"),
        pytest.param("reconcilePeriod: '0'", "reconcile_period", 36000.0, id="period-0-default"),
        pytest.param("reconcilePeriod: 0s", "reconcile_period", 36000.0, id="period-0s-default"),
        pytest.param("reconcilePeriod: -1s", "reconcile_period", -1.0, id="period-negative-kept"),
        pytest.param(
            "vars: {state: present, size: 3, nested: {a: [1, 2]}}",
            "vars",
            {"state": "present", "size": 3, "nested": {"a": [1, 2]}},
            id="vars",
        ),
        pytest.param(
            "vars: {when: 2024-01-01, 1: one, false: off}",
            "vars",
            {"when": "2024-01-01", "1": "one", "false": False},
            id="vars-as-go-json-saw-them",
        ),
        pytest.param(
            """
            blacklist:
            - {group: apps, version: v1, kind: Deployment}
            - {version: v1, kind: Secret}
            """,
            "blacklist",
            (GVK("apps", "v1", "Deployment"), GVK("", "v1", "Secret")),
            id="blacklist",
        ),
        pytest.param(
            """
            selector:
              matchLabels: {app: memcached}
              matchExpressions:
              - {key: tier, operator: In, values: [cache]}
            """,
            "selector",
            LabelSelector(
                match_labels={"app": "memcached"},
                match_expressions=(
                    LabelSelectorRequirement(key="tier", operator="In", values=("cache",)),
                ),
            ),
            id="selector",
        ),
        pytest.param("selector: {}", "selector", LabelSelector(), id="selector-empty"),
        pytest.param(
            "finalizer: {name: cache.example.com/finalizer, vars: {state: absent}}",
            "finalizer",
            Finalizer(name="cache.example.com/finalizer", vars={"state": "absent"}),
            id="finalizer-vars-only",
        ),
    ],
)
def test_every_key_is_read(project: Path, extra: str, attribute: str, expected: object) -> None:
    assert getattr(parse_one(entry(extra), project), attribute) == expected


def test_group_defaults_to_core(project: Path) -> None:
    text = "- {version: v1, kind: Secret, role: memcached}\n"
    assert parse_one(text, project).gvk == GVK("", "v1", "Secret")


def test_field_names_match_in_any_case_like_the_go_original(project: Path) -> None:
    text = """\
    - Version: v1alpha1
      GROUP: cache.example.com
      kind: Memcached
      Role: memcached
      reconcileperiod: 5s
      ManageStatus: false
      finalizer: {Name: f, Vars: {a: 1}}
    """
    watch = parse_one(text, project)
    assert watch.gvk == MEMCACHED
    assert (watch.reconcile_period, watch.manage_status) == (5.0, False)
    assert watch.finalizer == Finalizer(name="f", vars={"a": 1})


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param("maxWorkers: 5", id="maxWorkers"),
        pytest.param("ansibleVerbosity: 5", id="ansibleVerbosity"),
        pytest.param("maxConcurrentReconciles: 5", id="maxConcurrentReconciles"),
    ],
)
def test_keys_the_original_ignored_are_ignored_and_reported(project: Path, extra: str) -> None:
    watch = parse_one(entry(extra), project)
    assert watch.ignored_keys == (extra.split(":")[0],)
    assert (watch.max_concurrent_reconciles, watch.ansible_verbosity) == (1, 2)


def test_yaml_anchors_and_merge_keys_work(project: Path) -> None:
    text = """\
    - &base
      version: v1alpha1
      group: cache.example.com
      kind: Memcached
      role: memcached
      reconcilePeriod: 1m
    - <<: *base
      kind: Other
    """
    first, second = parse_text(text, project)
    assert second.gvk == GVK("cache.example.com", "v1alpha1", "Other")
    assert second.reconcile_period == first.reconcile_period == 60.0


def test_several_entries_keep_their_order(project: Path) -> None:
    text = ENTRY + "- {version: v1, kind: Secret, playbook: playbooks/site.yml}\n"
    assert [w.gvk.kind for w in parse_text(text, project)] == ["Memcached", "Secret"]


def test_empty_list_gives_no_watches(project: Path) -> None:
    assert parse_text("[]\n", project) == ()


def test_watch_is_frozen_and_hashable(project: Path) -> None:
    watch = parse_one(entry("vars: {a: 1}"), project)
    with pytest.raises(AttributeError):
        watch.kind = "x"  # type: ignore[attr-defined]
    assert {watch: 1}[watch] == 1


# --- playbook and role resolution ------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "relative"),
    [
        pytest.param("playbooks/site.yml", "playbooks/site.yml", id="relative-to-base-dir"),
        pytest.param("./playbooks/../playbooks/site.yml", "playbooks/site.yml", id="normalized"),
        pytest.param("{base}/playbooks/site.yml", "playbooks/site.yml", id="absolute"),
    ],
)
def test_playbook_is_made_absolute(project: Path, value: str, relative: str) -> None:
    text = f"- {{version: v1, kind: K, playbook: {value.format(base=project)}}}\n"
    watch = parse_one(text, project)
    assert watch.playbook == project / relative
    assert watch.playbook.is_absolute()
    assert watch.role is None


def test_playbook_wins_over_role_even_a_missing_one(project: Path) -> None:
    text = "- {version: v1, kind: K, playbook: playbooks/site.yml, role: not-there}\n"
    watch = parse_one(text, project)
    assert (watch.playbook, watch.role) == (project / "playbooks" / "site.yml", None)


@pytest.mark.parametrize(
    ("role", "dirs", "environ", "expected"),
    [
        pytest.param("{base}/elsewhere/r", ["elsewhere/r"], {}, "elsewhere/r", id="absolute"),
        pytest.param(
            "ns.coll.r",
            ["c2/ansible_collections/ns/coll/roles/r", "roles/ns.coll.r"],
            {"ANSIBLE_COLLECTIONS_PATH": "c1:c2"},
            "c2/ansible_collections/ns/coll/roles/r",
            id="fqcn-via-collections-path",
        ),
        pytest.param(
            "ns.coll.r",
            ["c1/ansible_collections/ns/coll/roles/r", "c2/ansible_collections/ns/coll/roles/r"],
            {"ANSIBLE_COLLECTIONS_PATH": "c1:c2"},
            "c1/ansible_collections/ns/coll/roles/r",
            id="fqcn-first-collections-entry-wins",
        ),
        pytest.param(
            "ns.coll.r",
            ["home/.ansible/collections/ansible_collections/ns/coll/roles/r"],
            {"HOME": "{base}/home"},
            "home/.ansible/collections/ansible_collections/ns/coll/roles/r",
            id="fqcn-default-collections-path-in-home",
        ),
        pytest.param(
            "ns.coll.r",
            ["rp/ns.coll.r", "roles/ns.coll.r"],
            {"ANSIBLE_COLLECTIONS_PATH": "c1", "ANSIBLE_ROLES_PATH": "rp"},
            "rp/ns.coll.r",
            id="fqcn-missing-falls-back-to-roles-path",
        ),
        pytest.param(
            "r", ["rp/r", "rp/roles/r"], {"ANSIBLE_ROLES_PATH": "rp"}, "rp/r", id="roles-path-E/r"
        ),
        pytest.param(
            "r",
            ["rp/roles/r", "roles/r"],
            {"ANSIBLE_ROLES_PATH": "rp"},
            "rp/roles/r",
            id="roles-path-E/roles/r",
        ),
        pytest.param(
            "r",
            ["rp2/r", "rp1/roles/r"],
            {"ANSIBLE_ROLES_PATH": "rp1:rp2"},
            "rp1/roles/r",
            id="earlier-roles-path-entry-wins",
        ),
        pytest.param(
            "r",
            ["rp/r", "roles/r"],
            {"ANSIBLE_ROLES_PATH": "{base}/rp"},
            "rp/r",
            id="roles-path-before-base-roles",
        ),
        pytest.param("r", ["roles/r", "r"], {}, "roles/r", id="base-dir-roles"),
        pytest.param("r", ["r"], {}, "r", id="base-dir-last-resort"),
        pytest.param("sub/r", ["roles/sub/r"], {}, "roles/sub/r", id="relative-path-name"),
    ],
)
def test_role_resolution_order(
    tmp_path: Path, role: str, dirs: list[str], environ: dict[str, str], expected: str
) -> None:
    for directory in dirs:
        (tmp_path / directory).mkdir(parents=True)
    environ = {key: value.format(base=tmp_path) for key, value in environ.items()}
    text = f"- {{version: v1, kind: K, role: {role.format(base=tmp_path)}}}\n"
    assert parse_one(text, tmp_path, environ=environ).role == tmp_path / expected


def test_explicit_search_paths_replace_the_environment(tmp_path: Path) -> None:
    (tmp_path / "given" / "r").mkdir(parents=True)
    (tmp_path / "fromenv" / "r").mkdir(parents=True)
    (tmp_path / "cols" / "ansible_collections" / "a" / "b" / "roles" / "c").mkdir(parents=True)
    environ = {"ANSIBLE_ROLES_PATH": "fromenv", "ANSIBLE_COLLECTIONS_PATH": "nothing"}
    text = "- {version: v1, kind: K, role: r}\n- {version: v1, kind: L, role: a.b.c}\n"
    first, second = parse_text(
        text, tmp_path, environ=environ, roles_path=["given"], collections_path=[tmp_path / "cols"]
    )
    assert first.role == tmp_path / "given" / "r"
    assert second.role == tmp_path / "cols/ansible_collections/a/b/roles/c"


def test_role_candidates_lists_every_place_in_order(tmp_path: Path) -> None:
    candidates = role_candidates(
        "ns.coll.r",
        base_dir=tmp_path,
        roles_path=[Path("/E1"), Path("/E2")],
        collections_path=[Path("/C1"), Path("/C2")],
    )
    assert candidates == (
        Path("/C1/ansible_collections/ns/coll/roles/r"),
        Path("/C2/ansible_collections/ns/coll/roles/r"),
        Path("/E1/ns.coll.r"),
        Path("/E1/roles/ns.coll.r"),
        Path("/E2/ns.coll.r"),
        Path("/E2/roles/ns.coll.r"),
        tmp_path / "roles" / "ns.coll.r",
        tmp_path / "ns.coll.r",
    )


@pytest.mark.parametrize(
    "name",
    [pytest.param("a.b", id="two-parts"), pytest.param("a.b.c.d", id="four-parts")],
)
def test_only_three_part_names_are_fqcns(tmp_path: Path, name: str) -> None:
    candidates = role_candidates(
        name, base_dir=tmp_path, roles_path=[], collections_path=[Path("/C")]
    )
    assert candidates == (tmp_path / "roles" / name, tmp_path / name)


def test_default_collections_path_is_the_originals() -> None:
    assert DEFAULT_COLLECTIONS_PATH == (
        "/usr/share/ansible/collections",
        "~/.ansible/collections",
    )


@pytest.mark.parametrize(
    ("finalizer", "attribute", "expected"),
    [
        pytest.param(
            "{name: f, role: memcached}", "role", "roles/memcached", id="role-resolved-like-main"
        ),
        pytest.param(
            "{name: f, playbook: playbooks/site.yml}",
            "playbook",
            "playbooks/site.yml",
            id="playbook-relative",
        ),
        pytest.param(
            "{name: f, playbook: playbooks/site.yml, role: missing}",
            "role",
            None,
            id="playbook-wins",
        ),
    ],
)
def test_finalizer_paths_are_resolved(
    project: Path, finalizer: str, attribute: str, expected: str | None
) -> None:
    watch = parse_one(entry(f"finalizer: {finalizer}"), project)
    assert watch.finalizer is not None
    assert watch.finalizer.name == "f"
    assert getattr(watch.finalizer, attribute) == (None if expected is None else project / expected)


# --- environment ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gvk", "suffix"),
    [
        pytest.param(MEMCACHED, "MEMCACHED_CACHE_EXAMPLE_COM", id="dots"),
        pytest.param(GVK("", "v1", "Secret"), "SECRET_", id="core-group"),
        pytest.param(GVK("my-app.example.com", "v1", "Db"), "DB_MY-APP_EXAMPLE_COM", id="dashes"),
    ],
)
def test_env_suffix(gvk: GVK, suffix: str) -> None:
    assert env_suffix(gvk) == suffix


MCR = "MAX_CONCURRENT_RECONCILES_MEMCACHED_CACHE_EXAMPLE_COM"
WORKER = "WORKER_MEMCACHED_CACHE_EXAMPLE_COM"
VERB = "ANSIBLE_VERBOSITY_MEMCACHED_CACHE_EXAMPLE_COM"


@pytest.mark.parametrize(
    ("environ", "workers", "verbosity"),
    [
        pytest.param({}, 3, 2, id="none-set"),
        pytest.param({MCR: "4"}, 4, 2, id="mcr"),
        pytest.param({WORKER: "5"}, 5, 2, id="worker-older-name"),
        pytest.param(
            {
                MCR: "6",
                WORKER: "5",
            },
            6,
            2,
            id="mcr-wins-over-worker",
        ),
        pytest.param(
            {
                MCR: "0",
                WORKER: "5",
            },
            3,
            2,
            id="mcr-zero-means-default",
        ),
        pytest.param({WORKER: "-2"}, 3, 2, id="negative-default"),
        pytest.param({MCR: ""}, 3, 2, id="empty"),
        pytest.param({"MAX_CONCURRENT_RECONCILES_OTHER_CACHE_EXAMPLE_COM": "9"}, 3, 2, id="other"),
        pytest.param({VERB: "0"}, 3, 0, id="verbosity-0"),
        pytest.param({VERB: "7"}, 3, 7, id="verbosity-7"),
        pytest.param({VERB: " 4 "}, 3, 4, id="spaces"),
        pytest.param({VERB: ""}, 3, 2, id="v-empty"),
    ],
)
def test_per_watch_environment_overrides(
    project: Path, environ: dict[str, str], workers: int, verbosity: int
) -> None:
    watch = parse_one(
        ENTRY,
        project,
        environ=environ,
        default_max_concurrent_reconciles=3,
        default_ansible_verbosity=2,
    )
    assert (watch.max_concurrent_reconciles, watch.ansible_verbosity) == (workers, verbosity)


TIMEOUT = "RECONCILE_TIMEOUT_MEMCACHED_CACHE_EXAMPLE_COM"


@pytest.mark.parametrize(
    ("environ", "default", "seconds"),
    [
        pytest.param({}, 0.0, 0.0, id="off-by-default"),
        pytest.param({}, 600.0, 600.0, id="flag-default"),
        pytest.param({TIMEOUT: "90s"}, 0.0, 90.0, id="watch-sets-one"),
        pytest.param({TIMEOUT: "1m30s"}, 600.0, 90.0, id="watch-wins-over-flag"),
        pytest.param({TIMEOUT: "0"}, 600.0, 0.0, id="zero-turns-it-off"),
        pytest.param({TIMEOUT: " "}, 600.0, 600.0, id="blank"),
        pytest.param({"RECONCILE_TIMEOUT_OTHER_CACHE_EXAMPLE_COM": "1s"}, 0.0, 0.0, id="other"),
    ],
)
def test_reconcile_timeout_per_watch(
    project: Path, environ: dict[str, str], default: float, seconds: float
) -> None:
    watch = parse_one(ENTRY, project, environ=environ, default_reconcile_timeout=default)
    assert watch.reconcile_timeout == seconds


def test_core_group_override_uses_trailing_underscore(project: Path) -> None:
    text = "- {version: v1, kind: Secret, role: memcached}\n"
    environ = {"MAX_CONCURRENT_RECONCILES_SECRET_": "7", "ANSIBLE_VERBOSITY_SECRET_": "1"}
    watch = parse_one(text, project, environ=environ)
    assert (watch.max_concurrent_reconciles, watch.ansible_verbosity) == (7, 1)


@pytest.mark.parametrize(
    ("text", "environ", "expected"),
    [
        pytest.param("${A}", {"A": "x"}, "x", id="braces"),
        pytest.param("$A", {"A": "x"}, "x", id="bare"),
        pytest.param("$A_B-c", {"A_B": "x"}, "x-c", id="bare-name-stops-at-dash"),
        pytest.param("${A}B", {"A": "x"}, "xB", id="braces-then-text"),
        pytest.param("${A}", {"A": ""}, "", id="set-but-empty"),
        pytest.param("${MISSING}", {}, "${MISSING}", id="unset-braces-kept"),
        pytest.param("$MISSING", {}, "${MISSING}", id="unset-bare-kept-as-braces"),
        pytest.param("cost: 5$", {}, "cost: 5$", id="trailing-dollar"),
        pytest.param("a $ b", {}, "a $ b", id="lone-dollar"),
        pytest.param("$1", {"1": "one"}, "one", id="special-digit"),
        pytest.param("$$", {}, "${$}", id="special-dollar-unset"),
        pytest.param("${}x", {}, "x", id="empty-braces-dropped"),
        pytest.param("${A", {"A": "x"}, "A", id="unterminated-brace-dropped"),
        pytest.param("${*}", {"*": "s"}, "s", id="special-in-braces"),
        pytest.param("no dollars", {}, "no dollars", id="unchanged"),
    ],
)
def test_expand_env_follows_the_original(text: str, environ: dict[str, str], expected: str) -> None:
    assert expand_env(text, environ) == expected


def test_environment_is_expanded_before_parsing(project: Path) -> None:
    text = """\
    - version: ${VERSION}
      group: cache.example.com
      kind: $KIND
      playbook: ${PLAYBOOK}
      vars: {token: "${NOT_SET}"}
    """
    environ = {"VERSION": "v1alpha1", "KIND": "Memcached", "PLAYBOOK": "playbooks/site.yml"}
    watch = parse_one(text, project, environ=environ)
    assert watch.gvk == MEMCACHED
    assert watch.playbook == project / "playbooks" / "site.yml"
    assert watch.vars == {"token": "${NOT_SET}"}


# --- errors ----------------------------------------------------------------------------------

VERBOSITY = "environment variable ANSIBLE_VERBOSITY_MEMCACHED_CACHE_EXAMPLE_COM: "
WORKERS = "environment variable MAX_CONCURRENT_RECONCILES_MEMCACHED_CACHE_EXAMPLE_COM: "
SELECTOR_0 = HEADER + "selector.matchExpressions[0]."


def case(name: str, text: str, *fragments: str, environ: dict[str, str] | None = None) -> Any:
    """One error case: every fragment must be in the message (`{base}` = the project)."""
    return pytest.param(text, environ or {}, list(fragments), id=name)


ERRORS = [
    case(
        "not-a-list",
        "{a: 1}\n",
        "watches.yaml: expected a list of watches, got mapping",
        "(line 1)",
    ),
    case("empty-file", "", "watches.yaml: is empty; expected a list of watches"),
    case("comment-only", "# only a comment\n", "watches.yaml: is empty"),
    case(
        "invalid-yaml",
        "- version: v1\n  kind: [a\n",
        "watches.yaml: invalid YAML at line 3, column 1:",
        "expected ',' or ']'",
    ),
    case("invalid-yaml-indent", "- a: 1\n - b\n", "watches.yaml: invalid YAML at line 2"),
    case(
        "two-documents",
        "- a\n---\n- b\n",
        "watches.yaml: invalid YAML",
        "expected a single document",
    ),
    case(
        "entry-not-mapping",
        "- just-a-string\n",
        'watches.yaml: entry 1: expected a mapping, got string "just-a-string" (line 1)',
    ),
    case(
        "second-entry-not-mapping",
        ENTRY + "- [1]\n",
        "watches.yaml: entry 2: expected a mapping, got list [1] (line 5)",
    ),
    case(
        "period-bare-int",
        entry("reconcilePeriod: 45"),
        HEADER + 'reconcilePeriod: expected a duration string such as "45s", got the number 45',
    ),
    case(
        "period-bare-float",
        entry("reconcilePeriod: 2.5"),
        HEADER + 'reconcilePeriod: expected a duration string such as "2.5s"',
    ),
    case(
        "key-given-twice",
        entry("Role: other"),
        HEADER + "Role: given twice (also as 'role') (line 5)",
    ),
    case(
        "bool-wrong-type",
        entry("manageStatus: yes please"),
        HEADER + 'manageStatus: expected true or false, got string "yes please" (line 5)',
    ),
    case(
        "bool-quoted",
        entry("markUnsafe: 'true'"),
        HEADER + 'markUnsafe: expected true or false, got string "true"',
    ),
    case(
        "bool-as-int",
        entry("watchDependentResources: 1"),
        HEADER + "watchDependentResources: expected true or false, got integer 1",
    ),
    case(
        "int-as-string",
        entry("maxRunnerArtifacts: '5'"),
        HEADER + 'maxRunnerArtifacts: expected a non-negative integer, got string "5" (line 5)',
    ),
    case(
        "int-negative",
        entry("maxRunnerArtifacts: -1"),
        HEADER + "maxRunnerArtifacts: expected a non-negative integer, got integer -1",
    ),
    case(
        "int-as-bool",
        entry("maxRunnerArtifacts: true"),
        HEADER + "maxRunnerArtifacts: expected a non-negative integer, got boolean true",
    ),
    case(
        "int-as-float",
        entry("maxRunnerArtifacts: 2.5"),
        HEADER + "maxRunnerArtifacts: expected a non-negative integer, got number 2.5",
    ),
    case(
        "string-as-int",
        "- {version: 1, kind: K, role: memcached}\n",
        "watches.yaml: entry 1 (/, Kind=K): version: expected a string, got integer 1 (line 1)",
    ),
    case(
        "playbook-as-list",
        entry("playbook: [a]"),
        HEADER + 'playbook: expected a string, got list ["a"]',
    ),
    case(
        "version-missing",
        "- {group: cache.example.com, kind: Memcached, role: memcached}\n",
        "watches.yaml: entry 1 (cache.example.com/, Kind=Memcached): version: invalid GVK: "
        "cache.example.com/, Kind=Memcached: version must not be empty (line 1)",
    ),
    case(
        "version-empty",
        "- {version: '', kind: Memcached, role: memcached}\n",
        "entry 1 (/, Kind=Memcached): version: invalid GVK: /, Kind=Memcached: "
        "version must not be empty",
    ),
    case(
        "kind-empty",
        "- {version: v1, kind: '', role: memcached}\n",
        "watches.yaml: entry 1 (/v1, Kind=): kind: invalid GVK: /v1, Kind=: kind must not be empty",
    ),
    case(
        "kind-empty-from-env",
        "- {version: v1, kind: '${KIND}', role: memcached}\n",
        "kind: invalid GVK: /v1, Kind=: kind must not be empty",
        environ={"KIND": ""},
    ),
    case(
        "duplicate-gvk",
        ENTRY + ENTRY,
        "watches.yaml: entry 2 (cache.example.com/v1alpha1, Kind=Memcached): duplicate GVK: "
        "cache.example.com/v1alpha1, Kind=Memcached (first defined by entry 1) (line 5)",
    ),
    case(
        "duplicate-reported-before-paths",
        ENTRY + ENTRY.replace("role: memcached", "role: missing"),
        "entry 2 (cache.example.com/v1alpha1, Kind=Memcached): duplicate GVK",
    ),
    case(
        "playbook-not-found",
        "- {version: v1alpha1, group: cache.example.com, kind: Memcached, "
        "playbook: playbooks/missing.yml}\n",
        HEADER + "playbook: playbooks/missing.yml was not found "
        "(looked for {base}/playbooks/missing.yml) (line 1)",
    ),
    case(
        "playbook-is-directory",
        "- {version: v1alpha1, group: cache.example.com, kind: Memcached, playbook: playbooks}\n",
        HEADER + "playbook: playbooks is not a file",
    ),
    case(
        "role-not-found",
        ENTRY.replace("role: memcached", "role: nosuch"),
        HEADER + "role: nosuch was not found (looked in /opt/roles/nosuch, "
        "/opt/roles/roles/nosuch, {base}/roles/nosuch, {base}/nosuch) (line 4)",
        environ={"ANSIBLE_ROLES_PATH": "/opt/roles"},
    ),
    case(
        "role-is-a-file",
        ENTRY.replace("role: memcached", "role: {base}/playbooks/site.yml"),
        HEADER + "role: {base}/playbooks/site.yml was not found",
    ),
    case(
        "neither-role-nor-playbook",
        "- {version: v1alpha1, group: cache.example.com, kind: Memcached}\n",
        HEADER + "must specify Role or Playbook (neither role nor playbook is set) (line 1)",
    ),
    case(
        "empty-role",
        ENTRY.replace("role: memcached", "role: ''"),
        HEADER + "must specify Role or Playbook",
    ),
    case(
        "bad-duration",
        entry("reconcilePeriod: 5 minutes"),
        HEADER + 'reconcilePeriod: invalid duration "5 minutes": '
        'unknown unit " minutes" in duration "5 minutes"',
        "(line 5)",
    ),
    case(
        "duration-quoted-number",
        entry("reconcilePeriod: '30'"),
        HEADER + 'reconcilePeriod: invalid duration "30": missing unit in duration "30"',
    ),
    case(
        "duration-bool",
        entry("reconcilePeriod: true"),
        HEADER + 'reconcilePeriod: expected a duration such as "30s", got boolean true',
    ),
    case(
        "duration-list",
        entry("reconcilePeriod: [1s]"),
        HEADER + 'reconcilePeriod: expected a duration such as "30s", got list ["1s"]',
    ),
    case(
        "duration-infinite",
        entry("reconcilePeriod: .inf"),
        HEADER + "reconcilePeriod: expected a duration",
        "got number Infinity",
    ),
    case(
        "selector-not-mapping",
        entry("selector: [a]"),
        HEADER + "selector: expected a mapping with matchLabels/matchExpressions, "
        'got list ["a"] (line 5)',
    ),
    case(
        "selector-bad-operator",
        entry("selector: {matchExpressions: [{key: a, operator: Within, values: [x]}]}"),
        SELECTOR_0 + 'operator: invalid operator string "Within" '
        "(valid operators: In, NotIn, Exists, DoesNotExist)",
    ),
    case(
        "selector-values-with-exists",
        entry(
            "selector:\n  matchExpressions:\n  - key: a\n    operator: Exists\n    values: [x]\n"
        ),
        SELECTOR_0 + 'values: operator Exists takes no values, got list ["x"] (line 9)',
    ),
    case(
        "selector-missing-key",
        entry("selector: {matchExpressions: [{operator: Exists}]}"),
        SELECTOR_0 + "key: is required",
    ),
    case(
        "selector-label-int",
        entry("selector: {matchLabels: {app: 1}}"),
        HEADER + "selector.matchLabels.app: label value must be a string, got integer 1",
    ),
    case(
        "selector-unknown-key",
        entry("selector: {matchLabel: {app: x}}"),
        HEADER + "selector.matchLabel: unknown key; did you mean 'matchLabels'?",
    ),
    case(
        "finalizer-without-name",
        entry("finalizer: {role: memcached}"),
        HEADER + 'finalizer.name: finalizer must have name, got mapping {"role": "memcached"}',
        "(line 5)",
    ),
    case(
        "finalizer-empty-name",
        entry("finalizer: {name: ''}"),
        HEADER + "finalizer.name: finalizer must have name",
    ),
    case(
        "finalizer-not-mapping",
        entry("finalizer: [a]"),
        HEADER + 'finalizer: expected a mapping with name, role|playbook, vars, got list ["a"]',
    ),
    case(
        "finalizer-role-not-found",
        entry("finalizer: {name: f, role: gone}"),
        HEADER + "finalizer.role: gone was not found (looked in",
        "(line 5)",
    ),
    case(
        "finalizer-playbook-not-found",
        entry("finalizer: {name: f, playbook: gone.yml, vars: {a: 1}}"),
        HEADER + "finalizer.playbook: gone.yml was not found (looked for {base}/gone.yml)",
    ),
    case(
        "finalizer-nothing-to-run",
        entry("finalizer: {name: f}"),
        HEADER + "finalizer: must specify Role or Playbook "
        "(or vars to run the watch's own with) for 'f'",
    ),
    case(
        "finalizer-vars-not-mapping",
        entry("finalizer: {name: f, vars: [a]}"),
        HEADER + 'finalizer.vars: expected a mapping, got list ["a"]',
    ),
    case(
        "finalizer-unknown-key",
        entry("finalizer: {name: f, roles: memcached}"),
        HEADER + "finalizer: must specify Role or Playbook",
        "finalizer.roles: unknown key, ignored (as the Go operator ignores it); "
        "did you mean 'role'?",
    ),
    case(
        "blacklist-not-list",
        entry("blacklist: {kind: Secret}"),
        HEADER + "blacklist: expected a list of {group, version, kind}, "
        'got mapping {"kind": "Secret"} (line 5)',
    ),
    case(
        "blacklist-entry-not-mapping",
        entry("blacklist: [Secret]"),
        HEADER + 'blacklist[0]: expected a mapping with group, version, kind, got string "Secret"',
    ),
    case(
        "blacklist-entry-without-kind",
        entry("blacklist:\n- {version: v1, kind: Secret}\n- {version: v1}\n"),
        HEADER + 'blacklist[1].kind: must not be empty in mapping {"version": "v1"} (line 7)',
    ),
    case(
        "blacklist-entry-without-version",
        entry("blacklist: [{kind: Secret}]"),
        HEADER + "blacklist[0].version: must not be empty",
    ),
    case(
        "blacklist-entry-unknown-key",
        entry("blacklist: [{version: v1, kinds: Secret}]"),
        HEADER + "blacklist[0].kind: must not be empty",
        "blacklist[0].kinds: unknown key, ignored (as the Go operator ignores it); "
        "did you mean 'kind'?",
    ),
    case(
        "blacklist-entry-wrong-type",
        entry("blacklist: [{version: v1, kind: 5}]"),
        HEADER + "blacklist[0].kind: expected a string, got integer 5",
    ),
    case(
        "vars-not-mapping",
        entry("vars: [a, b]"),
        HEADER + 'vars: expected a mapping, got list ["a", "b"] (line 5)',
    ),
    case(
        "vars-null-key",
        entry("vars: {~: x}"),
        HEADER + "vars: keys must be strings, got null",
    ),
    case(
        "vars-binary",
        entry("vars: {a: !!binary aGVsbG8=}"),
        HEADER + "vars.a: cannot be passed to Ansible as JSON",
    ),
    case(
        "verbosity-out-of-range",
        ENTRY,
        HEADER + VERBOSITY + "expected 0 to 7, got 8 (line 1)",
        environ={"ANSIBLE_VERBOSITY_MEMCACHED_CACHE_EXAMPLE_COM": "8"},
    ),
    case(
        "verbosity-negative",
        ENTRY,
        HEADER + VERBOSITY + "expected 0 to 7, got -1",
        environ={"ANSIBLE_VERBOSITY_MEMCACHED_CACHE_EXAMPLE_COM": "-1"},
    ),
    case(
        "verbosity-not-integer",
        ENTRY,
        HEADER + VERBOSITY + "expected an integer, got 'high'",
        environ={"ANSIBLE_VERBOSITY_MEMCACHED_CACHE_EXAMPLE_COM": "high"},
    ),
    case(
        "reconcile-timeout-not-a-duration",
        ENTRY,
        HEADER + "environment variable RECONCILE_TIMEOUT_MEMCACHED_CACHE_EXAMPLE_COM: ",
        'invalid duration "soon"',
        environ={"RECONCILE_TIMEOUT_MEMCACHED_CACHE_EXAMPLE_COM": "soon"},
    ),
    case(
        "reconcile-timeout-negative",
        ENTRY,
        "expected a duration of 0 or more, got '-5s'",
        environ={"RECONCILE_TIMEOUT_MEMCACHED_CACHE_EXAMPLE_COM": "-5s"},
    ),
    case(
        "workers-not-integer",
        ENTRY,
        HEADER + WORKERS + "expected an integer, got '4.5'",
        environ={"MAX_CONCURRENT_RECONCILES_MEMCACHED_CACHE_EXAMPLE_COM": "4.5"},
    ),
    case(
        "worker-not-integer",
        ENTRY,
        HEADER + "environment variable WORKER_MEMCACHED_CACHE_EXAMPLE_COM: "
        "expected an integer, got 'many'",
        environ={"WORKER_MEMCACHED_CACHE_EXAMPLE_COM": "many"},
    ),
]


@pytest.mark.parametrize(("text", "environ", "fragments"), ERRORS)
def test_invalid_watches_give_one_precise_message(
    project: Path, text: str, environ: dict[str, str], fragments: list[str]
) -> None:
    text = text.replace("{base}", str(project))
    with pytest.raises(ConfigError) as caught:
        parse(text, source="watches.yaml", environ=environ, base_dir=project)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment.replace("{base}", str(project)) in message
    assert "\n" not in message


def test_error_names_the_source_it_is_given(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config/watches\.yaml: entry 1 \("):
        parse(entry("kind: 1"), source="config/watches.yaml", environ={}, base_dir=project)


def test_known_keys_are_the_spec_table() -> None:
    assert set(KNOWN_KEYS) == {
        "group",
        "version",
        "kind",
        "playbook",
        "role",
        "vars",
        "reconcilePeriod",
        "manageStatus",
        "watchDependentResources",
        "watchClusterScopedResources",
        "snakeCaseParameters",
        "watchAnnotationsChanges",
        "markUnsafe",
        "maxRunnerArtifacts",
        "blacklist",
        "selector",
        "finalizer",
    }


def test_parse_needs_an_absolute_base_dir() -> None:
    with pytest.raises(ValueError, match="base_dir must be absolute"):
        parse(ENTRY, source="watches.yaml", environ={}, base_dir=Path("relative"))


# --- load ------------------------------------------------------------------------------------


def test_load_reads_relative_to_cwd_and_resolves_there(project: Path) -> None:
    (project / "config").mkdir()
    (project / "config" / "watches.yaml").write_text(entry("reconcilePeriod: ${PERIOD}"))
    (watch,) = load(
        "config/watches.yaml",
        environ={"PERIOD": "2m"},
        cwd=project,
        default_max_concurrent_reconciles=4,
    )
    assert watch.role == project / "roles" / "memcached"
    assert (watch.reconcile_period, watch.max_concurrent_reconciles) == (120.0, 4)


def test_load_names_the_file_in_errors(project: Path) -> None:
    (project / "watches.yaml").write_text(entry("reconcilePeriod: soon"))
    with pytest.raises(ConfigError, match=r'^watches\.yaml: entry 1 .*invalid duration "soon"'):
        load("watches.yaml", environ={}, cwd=project)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^nope\.yaml: watches file not found"):
        load("nope.yaml", environ={}, cwd=tmp_path)


def test_load_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "watches.yaml").write_bytes(b"- kind: \xff\n")
    with pytest.raises(ConfigError, match=r"^watches\.yaml: cannot read the watches file"):
        load("watches.yaml", environ={}, cwd=tmp_path)


def test_load_passes_search_paths_and_defaults(tmp_path: Path) -> None:
    (tmp_path / "shared" / "r").mkdir(parents=True)
    (tmp_path / "watches.yaml").write_text("- {version: v1, kind: K, role: r}\n")
    (watch,) = load(
        tmp_path / "watches.yaml",
        environ={"ANSIBLE_ROLES_PATH": "elsewhere"},
        cwd=tmp_path,
        roles_path=[tmp_path / "shared"],
        collections_path=[],
        default_reconcile_period=30.0,
        default_ansible_verbosity=5,
    )
    assert watch.role == tmp_path / "shared" / "r"
    assert (watch.reconcile_period, watch.ansible_verbosity) == (30.0, 5)


def test_a_watch_that_renders_spec_values_gets_a_warning(project: Path) -> None:
    rendering = parse_one(entry(), project)
    warning = spec_template_warning(rendering)
    assert warning is not None
    assert "cache.example.com/v1alpha1, Kind=Memcached" in warning  # which watch
    assert "run commands as the operator" in warning  # why
    assert "markUnsafe: true" in warning  # how to turn it off
    assert spec_template_warning(parse_one(entry("markUnsafe: true"), project)) is None
