"""webhooks.yaml: what loads, and the one-line errors for what does not."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.webhooks.declarations import parse


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for role in ("check", "defaults", "convert"):
        (tmp_path / "roles" / role / "tasks").mkdir(parents=True)
    (tmp_path / "playbook.yml").write_text("- hosts: localhost\n")
    return tmp_path


def _parse(project: Path, text: str) -> tuple[object, ...]:
    return parse(
        textwrap.dedent(text),
        source="webhooks.yaml",
        environ={"HOME": "/nowhere"},
        base_dir=project,
    )


def test_a_full_declaration(project: Path) -> None:
    webhooks = _parse(
        project,
        """
        - group: cache.example.com
          version: v1alpha1
          kind: Memcached
          validating:
            role: check
            operations: [CREATE, UPDATE, DELETE]
            timeout: 5s
            vars: {limit: 3}
          mutating:
            playbook: playbook.yml
            failurePolicy: Ignore
            sideEffects: NoneOnDryRun
          conversion:
            role: convert
        """,
    )
    validating, mutating, conversion = webhooks
    assert validating.type == "validating"  # type: ignore[attr-defined]
    assert validating.role == project / "roles" / "check"  # type: ignore[attr-defined]
    assert validating.operations == ("CREATE", "UPDATE", "DELETE")  # type: ignore[attr-defined]
    assert validating.timeout == 5.0 and validating.timeout_seconds == 6  # type: ignore[attr-defined]
    assert validating.vars == {"limit": 3}  # type: ignore[attr-defined]
    assert validating.path == "/validate-cache-example-com-v1alpha1-memcached"  # type: ignore[attr-defined]
    assert validating.name == "vmemcached.cache.example.com"  # type: ignore[attr-defined]
    assert mutating.playbook == project / "playbook.yml"  # type: ignore[attr-defined]
    assert mutating.failure_policy == "Ignore"  # type: ignore[attr-defined]
    assert mutating.operations == ("CREATE", "UPDATE")  # type: ignore[attr-defined]
    assert mutating.path == "/mutate-cache-example-com-v1alpha1-memcached"  # type: ignore[attr-defined]
    assert conversion.path == "/convert"  # type: ignore[attr-defined]


def test_no_file_content_means_no_webhooks(project: Path) -> None:
    assert _parse(project, "") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "- {group: cache.example.com, version: v1alpha1, kind: Memcached}\n",
            "webhooks.yaml: entry 1 (cache.example.com/v1alpha1, Kind=Memcached): declares no "
            "webhook: set one of validating, mutating, conversion (line 1)",
            id="nothing-declared",
        ),
        pytest.param(
            "- group: cache.example.com\n  version: v1alpha1\n  kind: Memcached\n"
            "  validating:\n    role: chek\n",
            "webhooks.yaml: entry 1 (cache.example.com/v1alpha1, Kind=Memcached): "
            "validating.role: chek was not found (looked in",
            id="missing-role",
        ),
        pytest.param(
            "- group: cache.example.com\n  version: v1alpha1\n  kind: Memcached\n"
            "  validating:\n    role: check\n    failurePolicy: Deny\n",
            'validating.failurePolicy: expected one of Fail, Ignore, got string "Deny" (line 6)',
            id="bad-policy",
        ),
        pytest.param(
            "- group: cache.example.com\n  version: v1alpha1\n  kind: Memcached\n"
            "  mutating:\n    role: defaults\n    timeout: 45s\n",
            "mutating.timeout: must be between 1s and 29s, got '45s' (line 6)",
            id="timeout-too-long",
        ),
        pytest.param(
            "- group: cache.example.com\n  version: v1alpha1\n  kind: Memcached\n"
            "  validating:\n    role: check\n    operations: [CREATE, PATCH]\n",
            "validating.operations[1]: expected one of CREATE, UPDATE, DELETE, CONNECT, got "
            'string "PATCH" (line 6)',
            id="bad-operation",
        ),
        pytest.param(
            "- group: cache.example.com\n  version: v1alpha1\n  kind: Memcached\n"
            "  validating:\n    rol: check\n",
            "validating.rol: unknown key; did you mean 'role'?",
            id="unknown-key",
        ),
        pytest.param(
            "- group: cache\n  version: v1alpha1\n  kind: Memcached\n  validating: {role: check}\n",
            "group: expected a DNS subdomain with a dot (a CRD's group), got 'cache' (line 1)",
            id="bad-group",
        ),
        pytest.param(
            "- group: cache.example.com\n  version: v1alpha1\n  kind: Memcached\n"
            "  conversion: {role: convert}\n"
            "- group: cache.example.com\n  version: v1beta1\n  kind: Memcached\n"
            "  conversion: {role: convert}\n",
            "webhooks.yaml: entry 2 (cache.example.com/v1beta1, Kind=Memcached): conversion: a "
            "second conversion webhook for the same kind (first declared by entry 1) (line 8)",
            id="two-conversions",
        ),
        pytest.param(
            "- group: cache.example.com\n  version: v1alpha1\n  kind: Memcached\n"
            "  validating: {role: check, playbook: playbook.yml}\n",
            "validating: set one of role or playbook, not both (line 4)",
            id="role-and-playbook",
        ),
        pytest.param("{}\n", "webhooks.yaml: expected a list of webhook declarations", id="map"),
    ],
)
def test_mistakes_name_file_entry_key_and_value(project: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        _parse(project, text)
    assert message in str(err.value)
