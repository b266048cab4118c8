"""The LeaderElector in process against a real Lease: whatever goes wrong while it holds
the Lease — a hung request, an error of any kind, the Lease found in another's hands —
it is told it lost the Lease by the renew deadline at the latest."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.engine import until
from support.tcpstall import StallingForwarder, stalling_kubeconfig

from runner.engine.leader import LeaderElector, LeaderSettings
from runner.k8s.client import KubeClient


@pytest.fixture
def stalling(kubeconfig: Path, tmp_path: Path) -> Iterator[tuple[StallingForwarder, Path]]:
    """A forwarder to the API server and a kubeconfig that goes through it."""
    with stalling_kubeconfig(kubeconfig, tmp_path) as stalled:
        yield stalled


class Failing:
    """A client whose requests fail with an error that is not an APIError when told."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.failing = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.failing:
                raise ValueError("unexpected answer")
            return await method(*args, **kwargs)

        return call


async def _hold_until_lost(
    elector: LeaderElector, *, then: Callable[[], None], after: float
) -> float:
    """Acquire, hold, call `then` `after` seconds into holding, and return the seconds
    from `hold` start to `on_lost`.

    `then` (the fault) is scheduled only once the Lease is held: a fault that began
    while acquiring would keep `acquire` retrying for ever."""
    await elector.acquire()
    lost = asyncio.Event()
    asyncio.get_running_loop().call_later(after, then)
    holder = asyncio.create_task(elector.hold(lost.set))
    started = time.monotonic()
    try:
        await asyncio.wait_for(lost.wait(), timeout=60)
    finally:
        holder.cancel()
    return time.monotonic() - started


async def test_a_hung_renewal_is_cut_off_at_the_renew_deadline(
    stalling: tuple[StallingForwarder, Path], namespace: str
) -> None:
    forwarder, path = stalling
    client = await KubeClient.connect(kubeconfig=str(path))
    settings = LeaderSettings(
        name="hung-renewal",
        namespace=namespace,
        lease_duration=6,
        renew_deadline=4,
        retry_period=0.5,
    )
    try:
        elector = LeaderElector(client, settings)
        seconds = await _hold_until_lost(elector, then=forwarder.stall, after=1.0)
    finally:
        forwarder.resume()
        await client.close()
    # Lost by the renew deadline after the last renewal (at most 1 s + 4 s), not when a
    # request to the stalled server finally times out (60 s).
    assert seconds < 1 + 4 + 1, f"lost the lease {seconds:.1f} s after holding began"
    assert not elector.is_leader


async def test_any_error_while_renewing_loses_the_lease(client: KubeClient, namespace: str) -> None:
    failing = Failing(client)
    settings = LeaderSettings(
        name="odd-error",
        namespace=namespace,
        lease_duration=3,
        renew_deadline=2,
        retry_period=0.2,
    )
    elector = LeaderElector(failing, settings)  # type: ignore[arg-type]
    seconds = await _hold_until_lost(
        elector, then=lambda: setattr(failing, "failing", True), after=0.5
    )
    assert seconds < 0.5 + 2 + 1
    assert not elector.is_leader


async def test_a_released_lease_goes_to_the_standby_at_its_next_retry(
    client: KubeClient, namespace: str
) -> None:
    def settings() -> LeaderSettings:
        return LeaderSettings(
            name="handover",
            namespace=namespace,
            lease_duration=15,
            renew_deadline=10,
            retry_period=0.2,
        )

    leader, standby = LeaderElector(client, settings()), LeaderElector(client, settings())
    await leader.acquire()
    waiting = asyncio.create_task(standby.acquire())
    try:
        await until(lambda: standby.holder == leader.identity, message="the standby waits")
        assert not standby.is_leader
        await leader.release()
        started = time.monotonic()
        await asyncio.wait_for(waiting, timeout=5)
    finally:
        waiting.cancel()
    assert standby.is_leader and not leader.is_leader
    # At the standby's next retry, not once the 15 s lease duration has run out.
    assert time.monotonic() - started < 2


async def test_a_vanished_leader_is_replaced_once_its_lease_has_expired(
    client: KubeClient, namespace: str
) -> None:
    def settings() -> LeaderSettings:
        return LeaderSettings(
            name="vanished",
            namespace=namespace,
            lease_duration=2,
            renew_deadline=1.5,
            retry_period=0.2,
        )

    leader, standby = LeaderElector(client, settings()), LeaderElector(client, settings())
    await leader.acquire()
    holding = asyncio.create_task(leader.hold(lambda: None))
    waiting = asyncio.create_task(standby.acquire())
    try:
        await until(lambda: standby.holder == leader.identity, message="the standby waits")
        # The leader's process dies (kill -9): it stops renewing and releases nothing.
        holding.cancel()
        vanished = time.monotonic()
        await asyncio.wait_for(waiting, timeout=10)
    finally:
        holding.cancel()
        waiting.cancel()
    took = time.monotonic() - vanished
    assert standby.is_leader
    # Not while the Lease could still be renewed (its last renewal was at most a retry
    # period before), and soon after it expired.
    assert 2 - 2 * 0.2 - 0.1 < took < 2 + 3, f"took over {took:.1f} s after the leader died"


async def test_a_ring_members_lease_keeps_its_annotations_and_is_deleted_on_release(
    client: KubeClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A sharding member's Lease: it carries what the member announces (it is leaving)
    across renewals, its logs speak of membership, and a graceful exit deletes it."""
    from runner.engine.leader import LEASE
    from runner.k8s.apierrors import NotFound

    settings = LeaderSettings(
        name="ring-m1",
        namespace=namespace,
        renew_deadline=10,
        retry_period=0.2,
        identity="m1",
        member_of="ring",
    )
    member = LeaderElector(client, settings)
    caplog.set_level("INFO", logger="ansible-operator.leader")
    await member.acquire()
    holder = asyncio.create_task(member.hold(lambda: None))
    try:
        assert await member.annotate({"example.com/leaving": "true"})
        first = await client.get(LEASE, name="ring-m1", namespace=namespace)
        await until(
            lambda: (
                member._lease is not None
                and member._lease["spec"]["renewTime"] != first["spec"]["renewTime"]
            ),
            message="a renewal after the annotation",
        )
        renewed = await client.get(LEASE, name="ring-m1", namespace=namespace)
        assert renewed["metadata"]["annotations"] == {"example.com/leaving": "true"}
    finally:
        holder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await holder
    await member.release()
    with pytest.raises(NotFound):
        await client.get(LEASE, name="ring-m1", namespace=namespace)
    text = "\n".join(caplog.messages)
    assert "joined the ring ring as member m1" in text and "left the ring ring" in text
    assert "leader" not in text
