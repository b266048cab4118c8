"""Fixtures of the operator tier: the shared ones (tests/support/tier.py) and an
`OperatorTier` (tests/support/operatortier.py) per test, in the test's namespace."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from support.operatortier import OperatorTier
from support.tier import client, namespace, tier_kinds

from runner.k8s.client import KubeClient
from runner.structs import GVK

__all__ = ["client", "namespace", "tier", "tier_kinds"]


@pytest.fixture
async def tier(
    client: KubeClient, tier_kinds: dict[str, GVK], namespace: str
) -> AsyncIterator[OperatorTier]:
    """The Ansible operator's controllers against the test's namespace, with a scripted
    Ansible backend."""
    harness = OperatorTier(client=client, gvk=tier_kinds["Probe"], namespace=namespace)
    try:
        yield harness
    finally:
        await harness.stop()
