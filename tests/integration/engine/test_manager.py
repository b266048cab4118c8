"""The Manager in process, with leader election on a real Lease: a standby reconciles
nothing, losing the Lease stops every reconcile at once, and a graceful stop lets
reconciles finish and hands the Lease over."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest
from support.engine import Engine, ScriptedReconciler, holds, until

from runner.engine.leader import LEASE, LeaderElector, LeaderSettings
from runner.engine.manager import Manager

LEASE_NAME = "engine-tier-lock"

MakeManager = Callable[..., tuple[Manager, LeaderElector]]


@pytest.fixture
async def managers(engine: Engine) -> AsyncIterator[MakeManager]:
    """Makes managers of the test's kind, each electing on the same Lease; those still
    running when the test ends are stopped."""
    made: list[Manager] = []

    def make(reconciler: ScriptedReconciler | None = None) -> tuple[Manager, LeaderElector]:
        elector = LeaderElector(
            engine.client,
            LeaderSettings(
                name=LEASE_NAME,
                namespace=engine.namespace,
                lease_duration=4,
                renew_deadline=3,
                retry_period=0.2,
            ),
        )
        manager = Manager(
            controllers=[engine.make_controller(reconciler=reconciler)],
            graceful_shutdown_timeout=10,
            leader=elector,
        )
        made.append(manager)
        return manager, elector

    yield make
    for manager in made:
        await manager.shutdown(timeout=0)


async def lease_holder(engine: Engine) -> str | None:
    lease = await engine.client.get(LEASE, name=LEASE_NAME, namespace=engine.namespace)
    return (lease.get("spec") or {}).get("holderIdentity") or None


async def test_losing_the_lease_stops_every_run_at_once(
    engine: Engine, managers: MakeManager
) -> None:
    manager, elector = managers()
    engine.reconciler.script("endless", holds(asyncio.Event()))
    run = asyncio.create_task(manager.run(asyncio.Event()))
    await until(lambda: elector.is_leader, message="the manager leads")
    await engine.create("endless")
    await until(lambda: engine.reconciler.in_flight == 1, message="a run in flight")

    # Another replica takes the Lease over (as after a partition): ours finds it there
    # at its next renewal.
    lease = await engine.client.get(LEASE, name=LEASE_NAME, namespace=engine.namespace)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    spec = {**lease["spec"], "holderIdentity": "another-replica", "renewTime": now}
    await engine.client.replace(LEASE, obj={**lease, "spec": spec})

    assert await asyncio.wait_for(run, timeout=5) == 1, "a lost Lease ends the run with 1"
    assert engine.reconciler.cancelled == ["endless"], "the reconcile in flight was stopped"
    assert engine.reconciler.in_flight == 0
    assert not elector.is_leader
    assert all(c.queue.shutting_down for c in manager.controllers), "no new work is taken"
    assert await lease_holder(engine) == "another-replica", "the new holder keeps it"


async def test_a_graceful_stop_lets_runs_finish_then_hands_the_lease_over(
    engine: Engine, managers: MakeManager
) -> None:
    leader, elector = managers()
    standby_reconciler = ScriptedReconciler()
    standby, standby_elector = managers(standby_reconciler)
    gate = asyncio.Event()
    engine.reconciler.script("work", holds(gate))
    stop = asyncio.Event()
    leading = asyncio.create_task(leader.run(stop))
    await until(lambda: elector.is_leader, message="the first manager leads")
    standby_stop = asyncio.Event()
    waiting = asyncio.create_task(standby.run(standby_stop))
    await until(
        lambda: standby_elector.holder == elector.identity, message="the standby saw the leader"
    )
    assert standby.ready() == (True, ""), "a standby that reaches the API server is ready"
    await engine.create("work")
    await until(lambda: engine.reconciler.in_flight == 1, message="the leader's run")
    assert standby_reconciler.keys == [], "a standby reconciles nothing"

    stop.set()
    await until(lambda: all(c.queue.shutting_down for c in leader.controllers), message="stopping")
    gate.set()  # the run in flight finishes within the graceful period
    assert await asyncio.wait_for(leading, timeout=10) == 0
    assert engine.reconciler.cancelled == []
    assert engine.reconciler.finished == ["work"]

    # Released, the Lease is the standby's at its next retry, not a lease duration later.
    # (Under the 4 s lease duration: an expired Lease would take at least that long.)
    await asyncio.wait_for(until(lambda: standby_elector.is_leader, message="handover"), 3.5)
    await until(lambda: standby_reconciler.runs("work") == 1, message="the new leader reconciles")
    assert await lease_holder(engine) == standby_elector.identity
    standby_stop.set()
    assert await asyncio.wait_for(waiting, timeout=10) == 0


async def test_without_election_the_manager_reconciles_at_once_and_stops_with_0(
    engine: Engine,
) -> None:
    manager = Manager(controllers=[engine.make_controller()])
    assert manager.ready() == (False, "controllers not started")
    stop = asyncio.Event()
    run = asyncio.create_task(manager.run(stop))
    await engine.create("plain")
    await until(lambda: engine.reconciler.runs("plain") == 1, message="a reconcile")
    await until(lambda: manager.ready() == (True, ""), message="ready once synced")
    stop.set()
    assert await asyncio.wait_for(run, timeout=10) == 0
    assert all(c.queue.shutting_down for c in manager.controllers)
