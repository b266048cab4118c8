"""Fixtures both in-process tiers share (tests/integration/engine and .../operator): kinds
of their own on the real API server, a client, and a fresh namespace per test. Each
tier's conftest imports them and adds its harness fixture."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runner.k8s.client import KubeClient
from runner.structs import GVK
from support.operator import crd, install_crd

GROUP = "engine.test.example.com"
NAMESPACE = GVK("", "v1", "Namespace")
PROBE = GVK(GROUP, "v1alpha1", "Probe")
STRICT = GVK(GROUP, "v1alpha1", "Strict")


def strict_crd() -> dict[str, Any]:
    """A kind whose status schema rejects the operator's conditions (a list where the
    schema wants a string): every status write of a reconcile is Invalid (422)."""
    body = crd(group=GROUP, kind=STRICT.kind)
    body["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "status": {"type": "object", "properties": {"conditions": {"type": "string"}}}
        },
    }
    return body


@pytest.fixture(scope="session")
def tier_kinds(dyn: Any) -> dict[str, GVK]:
    install_crd(dyn, crd(group=GROUP, kind=PROBE.kind))
    install_crd(dyn, strict_crd())
    return {"Probe": PROBE, "Strict": STRICT}


@pytest.fixture
async def client(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    async with await KubeClient.connect(kubeconfig=str(kubeconfig)) as kube:
        yield kube


@pytest.fixture
async def namespace(
    request: pytest.FixtureRequest, client: KubeClient, tier_kinds: dict[str, GVK]
) -> AsyncIterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting), as the
    shared fixture does; only the tier's own kinds can hold finalizers here, so only
    those are released first (no discovery of every kind the cluster serves)."""
    stem = "".join(
        c for c in request.node.name.lower().replace("_", "-") if c.isalnum() or c == "-"
    )
    name = f"t-{stem[:40].strip('-')}-{uuid.uuid4().hex[:5]}"
    await client.create(
        NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    try:
        yield name
    finally:
        for gvk in tier_kinds.values():
            items, _ = await client.list(gvk, namespace=name)
            for obj in items:
                if (obj.get("metadata") or {}).get("finalizers"):
                    await client.patch(
                        gvk,
                        name=obj["metadata"]["name"],
                        namespace=name,
                        body={"metadata": {"finalizers": None}},
                    )
        await client.delete(NAMESPACE, name=name, namespace=None)
