"""The RBAC check: which kinds the roles and watches.yaml use, and whether the CSV's rules
allow the verbs; literal uses are errors, templated or guessed ones warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.bundles import GUESTBOOK_CSV, edit_yaml

from runner.devtools.packaging import rbaccheck
from runner.devtools.packaging.validate import validate_bundle


def test_scan_finds_literal_uses(guestbook: Path) -> None:
    uses = {
        (u.file, u.group, u.kind, u.subresource, u.verbs) for u in rbaccheck.scan_project(guestbook)
    }
    tasks = "roles/guestbook/tasks/main.yml"
    assert uses == {
        (tasks, "apps", "Deployment", "", rbaccheck.PRESENT_VERBS),
        (tasks, "", "Service", "", rbaccheck.PRESENT_VERBS),  # from files/redis-service.yaml
        (tasks, "", "ConfigMap", "", rbaccheck.ABSENT_VERBS),
        (tasks, "web.example.com", "Guestbook", "status", rbaccheck.STATUS_VERBS),
        ("watches.yaml", "web.example.com", "Guestbook", "", rbaccheck.WATCHED_VERBS),
        ("watches.yaml", "web.example.com", "Guestbook", "status", rbaccheck.STATUS_VERBS),
    }


def _write_tasks(project: Path, text: str) -> None:
    (project / "roles" / "guestbook" / "tasks" / "main.yml").write_text(text)


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [
        pytest.param(
            "- kubernetes.core.k8s_info: {kind: Secret}\n",
            [("", "Secret", rbaccheck.READ_VERBS, False)],
            id="info-core-default-v1",
        ),
        pytest.param(
            "- block:\n  - k8s: {api_version: batch/v1, kind: Job, state: present}\n",
            [("batch", "Job", rbaccheck.PRESENT_VERBS, False)],
            id="inside-block",
        ),
        pytest.param(
            "- kubernetes.core.k8s:\n    definition: \"{{ lookup('template', 'x.j2') }}\"\n",
            [("", "", rbaccheck.PRESENT_VERBS, True)],
            id="templated-definition",
        ),
        pytest.param(
            "- kubernetes.core.k8s: {api_version: v1, kind: '{{ k }}'}\n",
            [("", "{{ k }}", rbaccheck.PRESENT_VERBS, True)],
            id="templated-kind",
        ),
        pytest.param(
            "- kubernetes.core.k8s:\n    state: '{{ state }}'\n"
            "    definition: {apiVersion: v1, kind: Secret}\n",
            [("", "Secret", ("get", "list", "watch", "create", "patch|update", "delete"), False)],
            id="templated-state-needs-both",
        ),
        pytest.param(
            "- include_tasks: more.yml\n", [("", "Pod", rbaccheck.READ_VERBS, False)], id="include"
        ),
        pytest.param("- debug: {msg: hi}\n", [], id="no-k8s"),
    ],
)
def test_task_shapes(guestbook: Path, tasks: str, expected: list[Any]) -> None:
    _write_tasks(guestbook, tasks)
    (guestbook / "roles" / "guestbook" / "tasks" / "more.yml").write_text(
        "- k8s_info: {kind: Pod}\n"
    )
    files = {"roles/guestbook/tasks/main.yml"}
    if "include" in tasks:
        files.add("roles/guestbook/tasks/more.yml")
    uses = [
        (u.group, u.kind, u.verbs, u.templated)
        for u in rbaccheck.scan_project(guestbook)
        if u.file in files
    ]
    assert uses == expected


RULES = [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]}]


@pytest.mark.parametrize(
    ("use", "level", "message"),
    [
        pytest.param(
            rbaccheck.ApiUse("t.yml", "task", "apps", "Deployment", ("get", "create")),
            "error",
            "does not allow create",
            id="missing-verb",
        ),
        pytest.param(
            rbaccheck.ApiUse("t.yml", "task", "", "Secret", ("get",)),
            "error",
            "core/Secret (secrets)",
            id="missing-resource",
        ),
        pytest.param(
            rbaccheck.ApiUse("t.yml", "task", "x.io", "Policy", ("get",)),
            "warning",
            "plural guessed",
            id="unknown-plural",
        ),
        pytest.param(
            rbaccheck.ApiUse("t.yml", "task", "", "", ("get",), templated=True),
            "warning",
            "templated",
            id="templated",
        ),
    ],
)
def test_check_uses(use: rbaccheck.ApiUse, level: str, message: str) -> None:
    (finding,) = rbaccheck.check_uses([use], RULES, {})
    assert (finding.level, finding.file, finding.field) == (level, "t.yml", "task")
    assert message in finding.message


@pytest.mark.parametrize(
    ("rule", "allowed"),
    [
        pytest.param(
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, True, id="wildcards"
        ),
        pytest.param(
            {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]},
            True,
            id="exact",
        ),
        pytest.param(
            {
                "apiGroups": ["apps"],
                "resources": ["deployments"],
                "resourceNames": ["a"],
                "verbs": ["*"],
            },
            False,
            id="resource-names-do-not-count",
        ),
        pytest.param(
            {"apiGroups": [""], "resources": ["deployments"], "verbs": ["*"]}, False, id="group"
        ),
    ],
)
def test_rule_matching(rule: dict[str, Any], allowed: bool) -> None:
    use = rbaccheck.ApiUse("t.yml", "task", "apps", "Deployment", ("create",))
    assert (rbaccheck.check_uses([use], [rule], {}) == []) is allowed


@pytest.mark.parametrize(
    ("kind", "plural"),
    [("Policy", "policies"), ("Gateway", "gateways"), ("Ingress", "ingresses"), ("Box", "boxes")],
)
def test_guess_plural(kind: str, plural: str) -> None:
    assert rbaccheck.guess_plural(kind) == plural


def test_missing_rbac_fails_the_bundle(bundle_dir: Path, guestbook: Path) -> None:
    def drop_deployments(csv: dict[str, Any]) -> None:
        rules = csv["spec"]["install"]["spec"]["clusterPermissions"][0]["rules"]
        rules[:] = [r for r in rules if r["apiGroups"] != ["apps"]]

    edit_yaml(bundle_dir / GUESTBOOK_CSV, drop_deployments)
    errors = [f for f in validate_bundle(bundle_dir, project=guestbook) if f.level == "error"]
    assert [(f.file, f.field) for f in errors] == [
        ("roles/guestbook/tasks/main.yml", "Frontend deployment")
    ]
    assert "apps/Deployment (deployments)" in errors[0].message
