"""Queue priorities with real resyncs: a few hundred objects re-run every period
(RequeueAfter, LOW) keep a backlog in the queue, and an object created or changed
meanwhile (HIGH) is reconciled before that backlog, unlike with one FIFO queue. And a
limiter that holds workers back keeps the keys queued, so the urgent one goes first."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from support.engine import Engine, until

from runner.engine.limiter import AdmissionLimiter
from runner.engine.outcome import Outcome, RequeueAfter
from runner.engine.queue import Priority
from runner.structs import NamespacedName

KEYS = 150
WORK = 0.01  # seconds a reconcile takes: one worker needs 1.5 s to get through all
PERIOD = 0.5  # each key comes back this long after its reconcile


async def resync_forever(_key: NamespacedName) -> Outcome:
    await asyncio.sleep(WORK)
    return RequeueAfter(PERIOD)


async def create_many(engine: Engine, count: int) -> None:
    for start in range(0, count, 25):
        await asyncio.gather(
            *(engine.create(f"old-{index}") for index in range(start, min(start + 25, count)))
        )


async def reconciles_before(engine: Engine, name: str, since: int) -> int:
    """How many reconciles of other objects started after the reconciler's `since`-th
    before the next one of `name`."""

    def started() -> list[str]:
        return [key.name for key in engine.reconciler.keys[since:]]

    await until(lambda: name in started(), timeout=30, message=f"{name} ran")
    return started().index(name)


async def test_new_and_changed_objects_go_before_a_resync_backlog(engine: Engine) -> None:
    await create_many(engine, KEYS)
    engine.reconciler.default = resync_forever
    controller = await engine.controller()
    queue = controller.queue
    await until(lambda: queue.depth(Priority.LOW) > KEYS // 2, message="a LOW backlog")
    assert queue.depth(Priority.HIGH) == 0, "the initial list and the resyncs are LOW"
    await until(lambda: engine.reconciler.runs("old-0") >= 2, message="a resync of old-0")

    since = len(engine.reconciler.keys)
    await engine.create("fresh")
    assert await reconciles_before(engine, "fresh", since) <= 2, "created: next in line"

    await until(lambda: queue.depth(Priority.LOW) > KEYS // 2, message="a LOW backlog again")
    since = len(engine.reconciler.keys)
    await engine.patch("old-7", {"spec": {"size": 3}})
    assert await reconciles_before(engine, "old-7", since) <= 2, "changed: next in line"
    assert engine.metric("workqueue_depth", name=controller.name, priority="-100") > 0


async def test_without_priorities_a_new_object_waits_behind_the_backlog(engine: Engine) -> None:
    await create_many(engine, KEYS)
    engine.reconciler.default = resync_forever
    controller = await engine.controller(prioritized=False)
    await until(lambda: len(controller.queue) > KEYS // 2, message="a backlog")
    since = len(engine.reconciler.keys)
    await engine.create("fresh")
    assert await reconciles_before(engine, "fresh", since) > KEYS // 3, "FIFO: behind them"


class OneAtATime:
    """An Admission that lets one reconcile run at a time (the limiter admits the first)."""

    def admits(self, _name: str, _running: Mapping[str, int]) -> bool:
        return False

    def why_not(self, name: str) -> str:
        return f"one at a time ({name})"


async def test_what_a_limiter_holds_back_stays_queued_in_priority_order(engine: Engine) -> None:
    await create_many(engine, 40)
    engine.reconciler.default = resync_forever
    limiter = AdmissionLimiter(OneAtATime(), recheck=0.05)
    controller = await engine.controller(workers=4, limiter=limiter)
    await until(lambda: engine.reconciler.runs("old-0") >= 1, message="resyncs run")
    await asyncio.sleep(0.2)
    assert engine.reconciler.most_in_flight == 1, "the limiter admits one at a time"
    assert limiter.waiting == 3, "the other workers wait for the limiter, keys queued"
    since = len(engine.reconciler.keys)
    await engine.create("fresh")
    assert await reconciles_before(engine, "fresh", since) <= 4
    assert controller.queue.processing <= 1
