"""Fixtures of the engine tier: the shared ones (tests/support/tier.py) and an `Engine`
(tests/support/engine.py) per test, in the test's namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from support.engine import Engine
from support.tier import client, namespace, tier_kinds

from runner.k8s.client import KubeClient
from runner.structs import GVK

__all__ = ["client", "engine", "namespace", "tier_kinds"]


@pytest.fixture
async def engine(
    client: KubeClient, tier_kinds: dict[str, GVK], namespace: str
) -> AsyncIterator[Engine]:
    """The generic engine against the test's namespace, with a scripted reconciler."""
    harness = Engine(client=client, gvk=tier_kinds["Probe"], namespace=namespace)
    try:
        yield harness
    finally:
        await harness.stop()
