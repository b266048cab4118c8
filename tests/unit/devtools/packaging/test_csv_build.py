"""The CSV built from the guestbook project: every derived field, and the options."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from support.bundles import options

from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging.csv import BundleOptions, build_csv
from runner.devtools.packaging.projectconfig import ProjectInputs
from runner.devtools.packaging.rbac import split_permissions
from runner.errors import ConfigError


def _get(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("apiVersion", "operators.coreos.com/v1alpha1", id="apiVersion"),
        pytest.param("metadata.name", "guestbook-operator.v1.2.3", id="name"),
        pytest.param("metadata.namespace", "placeholder", id="base-kept"),
        pytest.param("spec.version", "1.2.3", id="version"),
        pytest.param("spec.displayName", "Guestbook Operator", id="displayName"),
        pytest.param("spec.minKubeVersion", olm.DEFAULT_MIN_KUBE_VERSION, id="minKubeVersion"),
        pytest.param("spec.install.strategy", "deployment", id="strategy"),
        pytest.param(
            "spec.install.spec.deployments.0.name",
            "guestbook-operator-controller-manager",
            id="deployment-name",
        ),
        pytest.param(
            "spec.install.spec.deployments.0.label",
            {"control-plane": "controller-manager"},
            id="deployment-label",
        ),
        pytest.param(
            "spec.install.spec.deployments.0.spec.template.spec.containers.0.image",
            "example.com/guestbook-operator:0.0.1",
            id="image-from-kustomize",
        ),
        pytest.param(
            "spec.install.spec.deployments.0.spec.template.spec.containers.0.env.0",
            {
                "name": "WATCH_NAMESPACE",
                "valueFrom": {
                    "fieldRef": {"fieldPath": "metadata.annotations['olm.targetNamespaces']"}
                },
            },
            id="watch-namespace-from-operator-group",
        ),
        pytest.param(
            "spec.customresourcedefinitions.owned",
            [
                {
                    "name": "guestbooks.web.example.com",
                    "version": "v1",
                    "kind": "Guestbook",
                    "displayName": "Guest Book",
                    "description": "A guest book with a frontend and redis",
                }
            ],
            id="owned-served-versions-only",
        ),
        pytest.param(
            "spec.installModes",
            [dict(m) for m in olm.DEFAULT_INSTALL_MODES],
            id="default-install-modes",
        ),
        pytest.param(
            "spec.relatedImages",
            [
                {"image": "example.com/guestbook-operator:0.0.1", "name": "manager"},
                {"image": "docker.io/library/redis:7.2", "name": "redis"},
            ],
            id="relatedImages",
        ),
        pytest.param(
            "metadata.annotations.containerImage",
            "example.com/guestbook-operator:0.0.1",
            id="containerImage",
        ),
        pytest.param(
            f"metadata.annotations.{olm.BUILDER}", olm.BUILDER_VALUE, id="builder-annotation"
        ),
        pytest.param(
            f"metadata.annotations.{olm.PROJECT_LAYOUT}",
            "ansible.sdk.operatorframework.io/v1",
            id="layout-annotation",
        ),
    ],
)
def test_csv_field(inputs: ProjectInputs, path: str, expected: Any) -> None:
    csv = build_csv(inputs, options())
    if "." in path and path.startswith("metadata.annotations."):
        assert (
            csv["metadata"]["annotations"][path.removeprefix("metadata.annotations.")] == expected
        )
    else:
        assert _get(csv, path) == expected


def test_alm_examples_are_the_samples(inputs: ProjectInputs) -> None:
    csv = build_csv(inputs, options())
    text = csv["metadata"]["annotations"]["alm-examples"]
    assert json.loads(text) == [
        {
            "apiVersion": "web.example.com/v1",
            "kind": "Guestbook",
            "metadata": {"name": "guestbook-sample"},
            "spec": {"replicas": 2},
        }
    ]
    assert text.startswith('[\n  {\n    "apiVersion"')  # operator-sdk's indentation


def test_no_timestamps_and_deterministic(inputs: ProjectInputs) -> None:
    first, second = build_csv(inputs, options()), build_csv(inputs, options())
    assert first == second
    assert "createdAt" not in first["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("overrides", "path", "expected"),
    [
        pytest.param(
            {"replaces": "guestbook-operator.v1.0.0"},
            "spec.replaces",
            "guestbook-operator.v1.0.0",
            id="replaces",
        ),
        pytest.param(
            {"skip_range": ">=1.0.0 <1.2.3"},
            "metadata.annotations",
            ">=1.0.0 <1.2.3",
            id="skipRange",
        ),
        pytest.param(
            {"image": "quay.io/x/guestbook:v1.2.3"},
            "spec.install.spec.deployments.0.spec.template.spec.containers.0.image",
            "quay.io/x/guestbook:v1.2.3",
            id="image",
        ),
    ],
)
def test_options(
    inputs: ProjectInputs, overrides: dict[str, Any], path: str, expected: str
) -> None:
    csv = build_csv(inputs, options(**overrides))
    value = _get(csv, path)
    if path == "metadata.annotations":
        value = value[olm.SKIP_RANGE]
    assert value == expected
    if "image" in overrides:
        assert csv["metadata"]["annotations"]["containerImage"] == expected


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"version": "v1.2"}, "not a semantic version", id="version"),
        pytest.param({"package": "Guest_Book"}, "DNS-1123", id="package"),
        pytest.param({"channels": ("a", "")}, "empty channel", id="channels"),
        pytest.param({"default_channel": "beta"}, "not one of the channels", id="default"),
        pytest.param({"replaces": "guestbook-1.0"}, "NAME.vX.Y.Z", id="replaces"),
        pytest.param({"skip_range": "soon"}, "comparison", id="skip-range"),
    ],
)
def test_bad_options(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        options(**overrides)


def test_permissions_split(inputs: ProjectInputs) -> None:
    split = split_permissions(inputs)
    account = "guestbook-operator-controller-manager"
    assert [p["serviceAccountName"] for p in split.cluster_permissions] == [account]
    assert split.cluster_permissions[0]["rules"][2]["resources"] == [
        "guestbooks",
        "guestbooks/status",
        "guestbooks/finalizers",
    ]
    assert split.permissions == [
        {
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                }
            ],
            "serviceAccountName": account,
        }
    ]
    extras = sorted((o["kind"], o["metadata"]["name"]) for o in split.extras)
    assert extras == [
        ("ClusterRole", "guestbook-operator-guestbook-editor-role"),
        ("ClusterRole", "guestbook-operator-metrics-reader"),
        ("RoleBinding", "guestbook-operator-editors"),
    ]


def test_binding_with_other_subjects_stays_a_manifest(inputs: ProjectInputs) -> None:
    binding = dict(inputs.cluster_role_bindings[0])
    binding["subjects"] = [*binding["subjects"], {"kind": "User", "name": "alice"}]
    changed = dataclasses.replace(inputs, cluster_role_bindings=(binding,))
    split = split_permissions(changed)
    assert split.cluster_permissions  # still granted to the operator
    assert binding in split.extras  # and kept for alice


def test_no_deployment_is_an_error(inputs: ProjectInputs) -> None:
    with pytest.raises(ConfigError, match="no Deployment"):
        build_csv(dataclasses.replace(inputs, deployments=()), BundleOptions("1.0.0", "p"))
