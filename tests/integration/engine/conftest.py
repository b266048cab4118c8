"""Fixtures of the in-process engine tier: a kind of its own on the real API server, and
an `Engine` (tests/support/engine.py) per test, in the test's namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from support.engine import Engine
from support.operator import crd, install_crd

from runner.k8s.client import KubeClient
from runner.structs import GVK

GROUP = "engine.test.example.com"
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
def engine_kinds(dyn: Any) -> dict[str, GVK]:
    install_crd(dyn, crd(group=GROUP, kind=PROBE.kind))
    install_crd(dyn, strict_crd())
    return {"Probe": PROBE, "Strict": STRICT}


@pytest.fixture
async def client(kubeconfig: Path) -> AsyncIterator[KubeClient]:
    async with await KubeClient.connect(kubeconfig=str(kubeconfig)) as kube:
        yield kube


@pytest.fixture
async def engine(
    client: KubeClient, engine_kinds: dict[str, GVK], namespace: str
) -> AsyncIterator[Engine]:
    """The real engine against the test's namespace, with a scripted Ansible backend."""
    harness = Engine(client=client, gvk=engine_kinds["Probe"], namespace=namespace)
    try:
        yield harness
    finally:
        await harness.stop()
