"""The memcached sample operator end to end on the real cluster: create, scale, delete."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic.exceptions import NotFoundError
from support.kube import apply, condition, documents, wait_for
from support.operator import REPO, OperatorProcess

SAMPLE = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"


@pytest.fixture
def operator(
    kubeconfig: Path, tmp_path: Path, namespace: str, memcached_crd: Any
) -> Iterator[OperatorProcess]:
    proc = OperatorProcess(
        REPO,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": namespace},
    )
    try:
        yield proc
    finally:
        proc.stop()
        print(proc.log()[-5000:])


def _get(resource: Any, name: str, namespace: str) -> Any:
    try:
        return resource.get(name=name, namespace=namespace)
    except NotFoundError:
        return None


def test_create_scale_delete(
    dyn: Any, memcached_crd: Any, operator: OperatorProcess, namespace: str
) -> None:
    apply(dyn, SAMPLE, namespace=namespace)
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    services = dyn.resources.get(api_version="v1", kind="Service")
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")

    wait_for(
        lambda: (
            (getattr(_get(deployments, "memcached-sample", namespace), "status", None) or {}).get(
                "availableReplicas"
            )
            == 3
        ),
        timeout=90,
        message="Deployment memcached-sample has 3 available replicas",
    )

    def successful() -> dict[str, Any] | None:
        cond = condition(
            memcached_crd.get(name="memcached-sample", namespace=namespace), "Successful"
        )
        return cond if cond and cond["status"] == "True" else None

    wait_for(successful, timeout=60, message="memcached-sample Successful")
    assert _get(services, "memcached-sample", namespace) is not None
    cr = memcached_crd.get(name="memcached-sample", namespace=namespace).to_dict()
    running = next(c for c in cr["status"]["conditions"] if c["type"] == "Running")
    assert running["reason"] == "Successful"
    assert running["ansibleResult"]["failures"] == 0
    assert running["ansibleResult"]["ok"] >= 3
    assert "cache.example.com/finalizer" in cr["metadata"]["finalizers"]

    memcached_crd.patch(
        name="memcached-sample",
        namespace=namespace,
        body={"spec": {"size": 1}},
        content_type="application/merge-patch+json",
    )
    wait_for(
        lambda: _get(deployments, "memcached-sample", namespace).spec.replicas == 1,
        timeout=60,
        message="Deployment follows size 1",
    )

    assert _get(configmaps, "memcached-sample-marker", namespace) is not None
    memcached_crd.delete(name="memcached-sample", namespace=namespace)
    wait_for(
        lambda: _get(memcached_crd, "memcached-sample", namespace) is None,
        timeout=60,
        message="CR deleted",
    )
    assert _get(configmaps, "memcached-sample-marker", namespace) is None, (
        "the finalizer role did not run"
    )
    assert _get(deployments, "memcached-sample", namespace) is None
    assert operator.running()


def test_dependents_are_owned_watched_and_garbage_collected(
    dyn: Any, memcached_crd: Any, operator: OperatorProcess, namespace: str
) -> None:
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    services = dyn.resources.get(api_version="v1", kind="Service")
    body = {**documents(SAMPLE)[0], "spec": {"size": 1}}
    cr = memcached_crd.create(body=body, namespace=namespace).to_dict()
    name = cr["metadata"]["name"]

    def successful() -> bool:
        found = condition(memcached_crd.get(name=name, namespace=namespace), "Successful")
        return bool(found and found["status"] == "True")

    wait_for(successful, timeout=60, message=f"{name} Successful")
    owner = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "name": name,
        "uid": cr["metadata"]["uid"],
    }
    for resource in (deployments, services):
        obj = resource.get(name=name, namespace=namespace).to_dict()
        assert obj["metadata"]["ownerReferences"] == [owner], resource.kind

    # A dependent deleted by hand comes back: its deletion reconciles the owner.
    first_uid = deployments.get(name=name, namespace=namespace).metadata.uid
    deployments.delete(name=name, namespace=namespace)
    recreated = wait_for(
        lambda: (
            (_get(deployments, name, namespace) or None)
            and _get(deployments, name, namespace).metadata.uid != first_uid
        ),
        timeout=30,
        message="Deployment re-created after deletion",
    )
    assert recreated

    # A hand edit is reverted by the reconcile it triggers.
    deployments.patch(
        name=name,
        namespace=namespace,
        body={"spec": {"replicas": 4}},
        content_type="application/merge-patch+json",
    )
    wait_for(
        lambda: _get(deployments, name, namespace).spec.replicas == 1,
        timeout=30,
        message="hand-edited replicas reverted to size 1",
    )

    # Without the operator (so no finalizer run), garbage collection removes dependents.
    operator.stop()
    memcached_crd.patch(
        name=name,
        namespace=namespace,
        body={"metadata": {"finalizers": []}},
        content_type="application/merge-patch+json",
    )
    memcached_crd.delete(name=name, namespace=namespace)
    # The garbage collector may only learn the CRD's kind at its 30 s discovery resync.
    wait_for(
        lambda: (
            _get(deployments, name, namespace) is None and _get(services, name, namespace) is None
        ),
        timeout=90,
        message="Deployment and Service garbage-collected with their CR",
    )
