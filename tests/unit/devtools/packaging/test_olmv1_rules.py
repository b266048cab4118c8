"""The `olm-v1` suite of `bundle validate`: each rule with a bundle broken in exactly
that way (reported by olm-v1, not by olm-v0), and the scaffold's bundles passing both."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.bundles import GUESTBOOK_CSV, REPO, edit_yaml

from runner.cli.main import main
from runner.devtools.packaging.findings import Finding
from runner.devtools.packaging.validate import SUITES, validate_bundle

Break = Callable[[Path], None]


def csv(change: Callable[[dict[str, Any]], None]) -> Break:
    return lambda bundle: edit_yaml(bundle / GUESTBOOK_CSV, change)


def install_spec(data: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = data["spec"]["install"]["spec"]
    return spec


def only_own_namespace(data: dict[str, Any]) -> None:
    for mode in data["spec"]["installModes"]:
        mode["supported"] = mode["type"] == "OwnNamespace"


def required_crd(data: dict[str, Any]) -> None:
    data["spec"]["customresourcedefinitions"]["required"] = [
        {"name": "backends.example.com", "version": "v1", "kind": "Backend"}
    ]


def condition_rbac(data: dict[str, Any]) -> None:
    install_spec(data)["clusterPermissions"][0]["rules"].append(
        {
            "apiGroups": ["operators.coreos.com"],
            "resources": ["operatorconditions"],
            "verbs": ["get", "update"],
        }
    )


def condition_env(data: dict[str, Any]) -> None:
    pod = install_spec(data)["deployments"][0]["spec"]["template"]["spec"]
    pod["containers"][0].setdefault("env", []).append(
        {"name": "OPERATOR_CONDITION_NAME", "value": "guestbook-operator.v0.0.1"}
    )


def write(relative: str, text: str) -> Break:
    def apply(bundle: Path) -> None:
        (bundle / relative).write_text(text)

    return apply


CASES: dict[str, tuple[Break, str, str]] = {
    "install mode AllNamespaces unsupported": (
        csv(only_own_namespace),
        "spec.installModes",
        "AllNamespaces mode only",
    ),
    "gvk dependency": (
        write(
            "metadata/dependencies.yaml",
            "dependencies:\n- type: olm.gvk\n  value: {group: example.com, kind: Backend, "
            "version: v1}\n",
        ),
        "dependencies[0].type",
        "olm.gvk: OLM v1 resolves no dependencies",
    ),
    "package dependency": (
        write(
            "metadata/dependencies.yaml",
            "dependencies:\n- type: olm.package\n  value: {packageName: etcd, "
            "version: '>=0.9.0'}\n",
        ),
        "dependencies[0].type",
        "olm.package: OLM v1 resolves no dependencies",
    ),
    "constraint property": (
        write(
            "metadata/properties.yaml",
            "properties:\n- type: olm.constraint\n  value: {failureMessage: x, "
            "cel: {rule: 'true'}}\n",
        ),
        "properties[0].type",
        "olm.constraint: OLM v1 resolves no dependencies",
    ),
    "required CRD in the CSV": (
        csv(required_crd),
        "spec.customresourcedefinitions.required[0]",
        "backends.example.com: a required API is a dependency",
    ),
    "OperatorCondition RBAC": (
        csv(condition_rbac),
        "spec.install.spec.clusterPermissions[0].rules",
        "grants access to operatorconditions",
    ),
    "OperatorCondition name in the environment": (
        csv(condition_env),
        "spec.install.spec.deployments[0].spec.template.spec.containers[0].env",
        "OPERATOR_CONDITION_NAME: OLM v1 sets no OperatorCondition name",
    ),
    "OperatorCondition manifest": (
        write(
            "manifests/condition.yaml",
            "apiVersion: operators.coreos.com/v2\nkind: OperatorCondition\n"
            "metadata: {name: guestbook-operator.v0.0.1}\n",
        ),
        "kind",
        "OLM v1 has no OperatorConditions",
    ),
}


def _v1_errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == "error"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_v1_rule_reports_its_break_and_v0_does_not(bundle_dir: Path, case: str) -> None:
    breaks, field, message = CASES[case]
    before = set(validate_bundle(bundle_dir, suite="olm-v1"))
    breaks(bundle_dir)
    v1 = [f for f in validate_bundle(bundle_dir, suite="olm-v1") if f not in before]
    assert any(f.level == "error" and field in f.field and message in f.message for f in v1), v1
    v0 = validate_bundle(bundle_dir, suite="olm-v0")
    assert not any(message in f.message for f in v0)


def test_an_object_shared_with_another_bundle_is_an_error(bundle_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-bundle"
    shutil.copytree(bundle_dir, other)
    findings = validate_bundle(bundle_dir, suite="olm-v1", others=[other])
    shared = [f for f in findings if "only one ClusterExtension" in f.message]
    messages = " ".join(f.message for f in shared)
    assert "CustomResourceDefinition guestbooks.web.example.com" in messages
    assert str(other) in messages
    assert all(f.level == "error" for f in shared)
    # The same bundle alone shares nothing.
    assert not [
        f
        for f in validate_bundle(bundle_dir, suite="olm-v1")
        if "only one ClusterExtension" in f.message
    ]


@pytest.mark.parametrize("suite", SUITES)
def test_the_scaffold_bundle_passes_both_suites(bundle_dir: Path, suite: str) -> None:
    assert _v1_errors(validate_bundle(bundle_dir, suite=suite)) == []


@pytest.mark.parametrize("suite", SUITES)
def test_the_committed_sample_bundle_passes_both_suites(suite: str) -> None:
    assert _v1_errors(validate_bundle(REPO / "bundle", project=REPO, suite=suite)) == []


def test_the_suite_is_selected_on_the_command_line(
    bundle_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv(only_own_namespace)(bundle_dir)
    assert main(["bundle", "validate", str(bundle_dir), "--suite", "olm-v0"]) == 0
    assert main(["bundle", "validate", str(bundle_dir), "--suite", "olm-v1"]) == 1
    assert "AllNamespaces mode only" in capsys.readouterr().out


def test_a_freshly_scaffolded_projects_bundle_passes_both_suites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "web-operator"
    project.mkdir()
    monkeypatch.chdir(project)
    assert main(["init", "--domain", "example.com"]) == 0
    argv = ["create", "api", "--group", "web", "--version", "v1", "--kind", "Site"]
    assert main([*argv, "--generate-role"]) == 0
    assert main(["bundle", "generate", "--version", "0.1.0"]) == 0
    for suite in SUITES:
        findings = validate_bundle(project / "bundle", project=project, suite=suite)
        assert _v1_errors(findings) == [], suite
