"""Which updates of a dependent object re-run its owner."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runner.proxy.changes import dependent_update_matters, without_noise

BASE: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "memcached-sample",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "100",
        "generation": 1,
        "labels": {"app": "memcached"},
        "annotations": {"deployment.kubernetes.io/revision": "1"},
        "ownerReferences": [{"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached"}],
        "managedFields": [
            {
                "manager": "ansible-operator",
                "operation": "Update",
                "apiVersion": "apps/v1",
                "time": "2024-01-01T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}}},
            }
        ],
    },
    "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "m", "args": ["-m"]}]}}},
    "status": {"replicas": 1, "readyReplicas": 0},
}


def changed(edit: str, value: Any) -> dict[str, Any]:
    """BASE with one dotted path set (`-` as the value deletes it)."""
    obj = copy.deepcopy(BASE)
    *parents, last = edit.split(".")
    target: Any = obj
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if value == "-":
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return obj


def status_manager_entry() -> dict[str, Any]:
    return {
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "apps/v1",
        "time": "2024-01-01T00:00:05Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:readyReplicas": {}}},
        "subresource": "status",
    }


@pytest.mark.parametrize(
    ("new", "matters"),
    [
        # --- ignored ----------------------------------------------------------------------
        pytest.param(copy.deepcopy(BASE), False, id="identical"),
        pytest.param(changed("status.readyReplicas", 1), False, id="status-field"),
        pytest.param(changed("status", {}), False, id="status-emptied"),
        pytest.param(changed("status", "-"), False, id="status-removed"),
        pytest.param(changed("metadata.resourceVersion", "101"), False, id="resource-version"),
        pytest.param(changed("metadata.resourceVersion", "-"), False, id="resource-version-gone"),
        pytest.param(
            changed("metadata.managedFields.0.time", "2024-01-01T00:00:09Z"),
            False,
            id="managed-fields-time",
        ),
        pytest.param(
            changed(
                "metadata.managedFields",
                [*BASE["metadata"]["managedFields"], status_manager_entry()],
            ),
            False,
            id="managed-fields-new-status-manager",
        ),
        pytest.param(changed("metadata.managedFields", "-"), False, id="managed-fields-stripped"),
        # --- changes ----------------------------------------------------------------------
        pytest.param(changed("spec.replicas", 3), True, id="spec"),
        pytest.param(
            changed("spec.template.spec.containers.0.args", ["-m", "64"]), True, id="deep-spec"
        ),
        pytest.param(changed("spec.replicas", "-"), True, id="spec-field-removed"),
        pytest.param(changed("spec.paused", False), True, id="spec-field-added"),
        pytest.param(changed("metadata.generation", 2), True, id="generation"),
        pytest.param(changed("metadata.labels", {"app": "other"}), True, id="labels"),
        pytest.param(
            changed("metadata.annotations", {"deployment.kubernetes.io/revision": "2"}),
            True,
            id="annotations",
        ),
        pytest.param(changed("metadata.ownerReferences", []), True, id="owner-references"),
        pytest.param(
            changed("metadata.deletionTimestamp", "2024-01-01T00:01:00Z"), True, id="deleting"
        ),
        pytest.param(changed("metadata.finalizers", ["x"]), True, id="finalizers"),
        pytest.param(changed("data", {"k": "v"}), True, id="new-top-level-field"),
        pytest.param(changed("metadata", "-"), True, id="metadata-removed"),
        # --- JSON types are compared strictly ---------------------------------------------
        pytest.param(changed("spec.replicas", True), True, id="integer-to-boolean"),
        pytest.param(changed("spec.replicas", 1.0), True, id="integer-to-float"),
        pytest.param(changed("spec.replicas", "1"), True, id="integer-to-string"),
        pytest.param(changed("spec.replicas", None), True, id="integer-to-null"),
        pytest.param(
            changed("spec.template.spec.containers", ({"name": "m", "args": ["-m"]},)),
            False,
            id="tuple-equals-list",
        ),
        pytest.param(
            changed("spec.template.spec.containers", [{"name": "m", "args": ["-m"]}, {}]),
            True,
            id="list-longer",
        ),
        pytest.param(changed("spec.template.spec.containers", {}), True, id="list-to-mapping"),
    ],
)
def test_dependent_update_matters(new: dict[str, Any], matters: bool) -> None:
    before_old, before_new = copy.deepcopy(BASE), copy.deepcopy(new)
    assert dependent_update_matters(BASE, new) is matters
    assert dependent_update_matters(new, BASE) is matters  # symmetric
    assert before_old == BASE
    assert new == before_new


def test_booleans_are_not_integers_at_any_depth() -> None:
    assert dependent_update_matters({"spec": {"a": [1]}}, {"spec": {"a": [True]}})
    assert dependent_update_matters({"spec": {"a": 0}}, {"spec": {"a": False}})
    assert not dependent_update_matters({"spec": {"a": [True]}}, {"spec": {"a": [True]}})


def test_minimal_objects() -> None:
    assert not dependent_update_matters({}, {})
    assert not dependent_update_matters({"status": {"a": 1}}, {})
    assert dependent_update_matters({}, {"metadata": {}})
    assert not dependent_update_matters(
        {"metadata": {"resourceVersion": "1"}}, {"metadata": {"resourceVersion": "2"}}
    )
    assert dependent_update_matters({"metadata": None}, {"metadata": {}})


def test_without_noise() -> None:
    stripped = without_noise(BASE)
    assert "status" not in stripped
    assert "resourceVersion" not in stripped["metadata"]
    assert "managedFields" not in stripped["metadata"]
    assert stripped["metadata"]["generation"] == 1
    assert stripped["spec"] == BASE["spec"]
    assert "status" in BASE and "resourceVersion" in BASE["metadata"]  # input kept
