"""The pure parts of `ansible-operator olm`: install modes, objects, OLM's verdicts,
service-account kubeconfigs."""

from __future__ import annotations

from typing import Any

import pytest

from runner.devtools.olm import installmode, report, tokens
from runner.devtools.olm import olmobjects as model
from runner.errors import ConfigError


def _csv(*modes: str, phase: str = "", reason: str = "", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "memcached-operator.v0.1.0"},
        "spec": {
            "installModes": [{"type": t, "supported": t in modes} for t in installmode.TYPES],
            "install": {
                "spec": {
                    "deployments": [
                        {"spec": {"template": {"spec": {"serviceAccountName": "manager"}}}},
                        {"spec": {"template": {"spec": {}}}},
                    ]
                }
            },
        },
        "status": {"phase": phase, "reason": reason, **status},
    }


@pytest.mark.parametrize(
    ("text", "mode", "targets"),
    [
        ("AllNamespaces", installmode.InstallMode("AllNamespaces"), None),
        ("OwnNamespace", installmode.InstallMode("OwnNamespace"), ["here"]),
        ("SingleNamespace=a", installmode.InstallMode("SingleNamespace", ("a",)), ["a"]),
        ("MultiNamespace=a, b", installmode.InstallMode("MultiNamespace", ("a", "b")), ["a", "b"]),
    ],
)
def test_install_modes_parse(
    text: str, mode: installmode.InstallMode, targets: list[str] | None
) -> None:
    assert installmode.parse(text) == mode
    assert mode.targets("here") == targets


@pytest.mark.parametrize(
    "text",
    ["Everywhere", "OwnNamespace=x", "SingleNamespace", "SingleNamespace=a,b", "MultiNamespace"],
)
def test_bad_install_modes_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="--install-mode"):
        installmode.parse(text)


def test_default_install_mode_is_all_namespaces_then_own() -> None:
    assert installmode.choose(_csv(*installmode.TYPES), None).type == "AllNamespaces"
    assert installmode.choose(_csv("OwnNamespace"), None).type == "OwnNamespace"
    with pytest.raises(ConfigError, match="supported: SingleNamespace"):
        installmode.choose(_csv("SingleNamespace"), None)
    with pytest.raises(ConfigError, match="does not support install mode AllNamespaces"):
        installmode.choose(_csv("OwnNamespace"), "AllNamespaces")


def test_an_existing_operator_group_must_fit() -> None:
    all_namespaces = model.operator_group("og", "ns", None)
    own = model.operator_group("og", "ns", ["ns"])
    assert installmode.matches(all_namespaces, None)
    assert not installmode.matches(all_namespaces, ["ns"])
    assert installmode.matches(own, ["ns"])
    assert not installmode.matches(own, None)
    assert not installmode.matches({"spec": {"selector": {"matchLabels": {"a": "b"}}}}, None)


def test_catalog_source_points_at_an_address() -> None:
    source = model.catalog_source("p-catalog", "ns", address="127.0.0.1:5000", display_name="p")
    assert source["spec"]["sourceType"] == "grpc"
    assert source["spec"]["address"] == "127.0.0.1:5000"
    assert "image" not in source["spec"]
    assert source["metadata"]["labels"][model.MANAGED_BY_LABEL] == model.MANAGED_BY


def test_subscription() -> None:
    sub = model.subscription(
        "p-sub",
        "ns",
        package="p",
        channel="alpha",
        source="p-catalog",
        approval="Manual",
        starting_csv="p.v0.1.0",
    )
    assert sub["spec"] == {
        "name": "p",
        "channel": "alpha",
        "source": "p-catalog",
        "sourceNamespace": "ns",
        "installPlanApproval": "Manual",
        "startingCSV": "p.v0.1.0",
    }


def test_names_are_dns_labels() -> None:
    assert model.catalog_source_name("Memcached_Operator") == "memcached-operator-catalog"
    assert len(model.subscription_name("x" * 80)) <= 63


def test_deployment_service_accounts() -> None:
    assert model.deployment_service_accounts(_csv()) == ["manager", "default"]


def test_a_failed_csv_is_final() -> None:
    csv = _csv(phase="Failed", reason="InstallCheckFailed", message="install timeout")
    found = report.problem(None, None, csv)
    assert found == report.Problem(
        "CSV memcached-operator.v0.1.0 phase Failed: InstallCheckFailed: install timeout",
        final=True,
    )


def test_a_csv_failed_for_lost_requirements_is_given_time_to_recover() -> None:
    csv = _csv(phase="Failed", reason="RequirementsNotMet", message="requirements no longer met")
    found = report.problem(None, None, csv)
    assert found == report.Problem(
        "CSV memcached-operator.v0.1.0 phase Failed: "
        "RequirementsNotMet: requirements no longer met",
        final=False,
    )


def test_unmet_requirements_name_what_is_missing() -> None:
    csv = _csv(
        phase="Pending",
        reason="RequirementsNotMet",
        message="one or more requirements couldn't be found",
        requirementStatus=[
            {"kind": "CustomResourceDefinition", "name": "memcacheds.cache.example.com",
             "status": "NotPresent", "message": "CRD is not present"},
            {"kind": "ServiceAccount", "name": "manager", "status": "Present"},
        ],
    )  # fmt: skip
    found = report.problem(None, None, csv)
    assert found is not None and not found.final
    assert "RequirementsNotMet" in found.text
    assert "memcacheds.cache.example.com NotPresent: CRD is not present" in found.text
    lines = report.csv_lines(csv)
    assert lines[0].startswith("CSV memcached-operator.v0.1.0: phase Pending (RequirementsNotMet")
    assert any("NotPresent" in line for line in lines)
    assert not any("ServiceAccount" in line for line in lines)


def test_a_failed_install_plan_gives_its_reason() -> None:
    plan = {
        "metadata": {"name": "install-abc"},
        "spec": {"approval": "Automatic", "approved": True, "clusterServiceVersionNames": ["x"]},
        "status": {
            "phase": "Failed",
            "conditions": [
                {"type": "Installed", "status": "False", "reason": "InstallComponentFailed",
                 "message": "error creating csv"},
            ],
        },
    }  # fmt: skip
    found = report.problem(None, plan, None)
    assert found is not None and found.final
    assert "InstallComponentFailed: error creating csv" in found.text
    assert report.install_plan_lines(plan)[0] == (
        "InstallPlan install-abc: phase Failed (Automatic, approved) for x"
    )


def test_subscription_conditions_report_problems() -> None:
    sub = {
        "metadata": {"name": "p-sub"},
        "spec": {"name": "p", "channel": "alpha"},
        "status": {
            "state": "UpgradePending",
            "conditions": [
                {"type": "CatalogSourcesUnhealthy", "status": "False", "reason": "AllHealthy"},
                {"type": "ResolutionFailed", "status": "True",
                 "reason": "ConstraintsNotSatisfiable",
                 "message": "no operators found in channel alpha"},
            ],
        },
    }  # fmt: skip
    found = report.problem(sub, None, None)
    assert found is not None and not found.final
    assert "ResolutionFailed: ConstraintsNotSatisfiable: no operators found" in found.text
    lines = report.subscription_lines(sub)
    assert "state UpgradePending" in lines[0]
    assert not any("CatalogSourcesUnhealthy" in line for line in lines)


def test_a_succeeded_csv_has_no_problem() -> None:
    csv = _csv(
        phase="Succeeded",
        reason="InstallSucceeded",
        conditions=[
            {"phase": "Pending", "reason": "RequirementsUnknown"},
            {"phase": "InstallReady", "reason": "AllRequirementsMet"},
            {"phase": "Succeeded", "reason": "InstallSucceeded"},
        ],
    )
    assert report.problem(None, None, csv) is None
    assert (
        "Pending/RequirementsUnknown -> InstallReady/AllRequirementsMet" in report.csv_lines(csv)[1]
    )


def test_waiting_for_approval() -> None:
    plan = {"spec": {"approved": False}, "status": {"phase": "RequiresApproval"}}
    assert report.waiting_for_approval(None, plan)
    assert not report.waiting_for_approval(None, {**plan, "spec": {"approved": True}})
    assert not report.waiting_for_approval(None, None)


def test_service_account_kubeconfig_keeps_the_cluster_only() -> None:
    admin = {
        "clusters": [
            {"name": "other", "cluster": {"server": "https://elsewhere"}},
            {"name": "local", "cluster": {"server": "https://127.0.0.1:6443",
                                          "certificate-authority-data": "Q0E="}},
        ],
        "users": [{"name": "admin", "user": {"token": "admin-secret"}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "admin"}}],
        "current-context": "local",
    }  # fmt: skip
    config = tokens.service_account_kubeconfig(
        admin, namespace="ns", service_account="manager", token="sa-token"
    )
    assert config["clusters"] == [
        {
            "name": "cluster",
            "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0E="},
        }
    ]
    assert config["users"] == [{"name": "ns-manager", "user": {"token": "sa-token"}}]
    assert "admin-secret" not in repr(config)
    assert config["contexts"][0]["context"]["namespace"] == "ns"


def test_service_account_kubeconfig_needs_a_current_context() -> None:
    with pytest.raises(ConfigError, match="current context"):
        tokens.service_account_kubeconfig({}, namespace="n", service_account="s", token="t")


def test_a_failed_resolution_is_given_longer_to_settle() -> None:
    sub = {
        "metadata": {"name": "memcached-operator"},
        "status": {
            "conditions": [
                {
                    "type": "ResolutionFailed",
                    "status": "True",
                    "reason": "ConstraintsNotSatisfiable",
                    "message": "v0.1.0 exists and is not referenced by a subscription",
                }
            ]
        },
    }
    found = report.problem(sub, None, None)
    assert found is not None and not found.final
    assert found.settle_seconds == report.RESOLUTION_SETTLE_SECONDS
