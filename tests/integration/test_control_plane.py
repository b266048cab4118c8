"""The local control plane is a real Kubernetes: CRDs, status, GC, Deployments, Leases."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.dynamic.exceptions import NotFoundError
from support.kube import apply, documents, wait_for

from runner.devtools.cluster.components import components


def _raw(dyn: Any, path: str) -> Any:
    return dyn.request("GET", path).to_dict()


def test_version_is_stamped(api_client: Any) -> None:
    # OLM compares minKubeVersion with this; an unstamped build says v0.0.0.
    version = client.VersionApi(api_client).get_code().git_version
    assert version == components()["kube-apiserver"].version


def test_api_resources_include_deployments_and_leases(dyn: Any) -> None:
    apps = {r["name"] for r in _raw(dyn, "/apis/apps/v1")["resources"]}
    coordination = {r["name"] for r in _raw(dyn, "/apis/coordination.k8s.io/v1")["resources"]}
    assert "deployments" in apps
    assert "leases" in coordination


def test_custom_resource_lifecycle_and_status_subresource(
    memcached_crd: Any, namespace: str
) -> None:
    cr = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "sample"},
        "spec": {"size": 1},
    }
    created = memcached_crd.create(body=cr, namespace=namespace)
    assert created.metadata.generation == 1

    patched = memcached_crd.patch(
        name="sample",
        namespace=namespace,
        body={"spec": {"size": 3}},
        content_type="application/merge-patch+json",
    )
    assert patched.spec.size == 3
    assert patched.metadata.generation == 2

    # Status written through the main resource is dropped; through /status it is kept.
    memcached_crd.patch(
        name="sample",
        namespace=namespace,
        body={"status": {"nodes": ["ignored"]}},
        content_type="application/merge-patch+json",
    )
    assert not memcached_crd.get(name="sample", namespace=namespace).to_dict().get("status")
    memcached_crd.status.patch(
        name="sample",
        namespace=namespace,
        body={"status": {"nodes": ["a", "b"]}},
        content_type="application/merge-patch+json",
    )
    current = memcached_crd.get(name="sample", namespace=namespace)
    assert current.status.nodes == ["a", "b"]
    assert current.metadata.generation == 2, "a status write must not bump generation"

    memcached_crd.delete(name="sample", namespace=namespace)
    with pytest.raises(NotFoundError):
        memcached_crd.get(name="sample", namespace=namespace)


def test_owned_configmap_is_garbage_collected(
    memcached_crd: Any, api_client: Any, namespace: str
) -> None:
    owner = memcached_crd.create(
        body={
            "apiVersion": "cache.example.com/v1alpha1",
            "kind": "Memcached",
            "metadata": {"name": "owner"},
            "spec": {},
        },
        namespace=namespace,
    )
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map(
        namespace,
        {
            "metadata": {
                "name": "owned",
                "ownerReferences": [
                    {
                        "apiVersion": "cache.example.com/v1alpha1",
                        "kind": "Memcached",
                        "name": "owner",
                        "uid": owner.metadata.uid,
                    }
                ],
            },
            "data": {"k": "v"},
        },
    )
    memcached_crd.delete(name="owner", namespace=namespace)

    def gone() -> bool:
        try:
            core.read_namespaced_config_map("owned", namespace)
        except client.ApiException as err:
            return err.status == 404
        return False

    # The garbage collector notices new kinds (this CRD) at its 30 s discovery resync.
    wait_for(gone, timeout=90, message="owned ConfigMap garbage-collected")


def test_deployment_becomes_available_through_kwok(dyn: Any, namespace: str) -> None:
    deployment = documents(
        """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: memcached:1.6
"""
    )
    apply(dyn, deployment, namespace=namespace)
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    wait_for(
        lambda: (
            (deployments.get(name="web", namespace=namespace).status.availableReplicas or 0) == 2
        ),
        timeout=60,
        message="Deployment web has availableReplicas 2",
    )


def test_lease_can_be_created(api_client: Any, namespace: str) -> None:
    coordination = client.CoordinationV1Api(api_client)
    lease = coordination.create_namespaced_lease(
        namespace,
        {
            "metadata": {"name": "leader"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15},
        },
    )
    assert lease.spec.holder_identity == "me"
    read = coordination.read_namespaced_lease("leader", namespace)
    assert read.spec.lease_duration_seconds == 15
