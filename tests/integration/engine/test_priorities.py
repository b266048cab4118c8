"""Queue priorities with real resyncs: a few hundred objects re-run every period
(RequeueAfter, LOW) keep a backlog in the queue, and an object created or changed
meanwhile (HIGH) is reconciled before that backlog, unlike with one FIFO queue. And a
limiter that holds workers back keeps the keys queued, so the urgent one goes first."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

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


class EventClock:
    """A predicate that passes every event and notes, for the events of the objects
    it is asked about, how many reconciles had started when the event arrived: the
    exact point from which to count what ran before the object."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.seen: dict[tuple[str, int], int] = {}

    def __call__(self, _event: str, new: Mapping[str, Any], _old: Mapping[str, Any] | None) -> bool:
        meta = new["metadata"]
        self.seen.setdefault(
            (meta["name"], meta.get("generation", 0)), len(self._engine.reconciler.keys)
        )
        return True

    async def reconciles_before(self, name: str, generation: int = 1) -> int:
        """How many reconciles of other objects started after the event of `name` at
        `generation` before the next one of `name`."""
        engine = self._engine
        await until(lambda: (name, generation) in self.seen, message=f"the event of {name}")
        since = self.seen[(name, generation)]

        def started() -> list[str]:
            return [key.name for key in engine.reconciler.keys[since:]]

        await until(lambda: name in started(), timeout=30, message=f"{name} ran")
        return started().index(name)


async def test_new_and_changed_objects_go_before_a_resync_backlog(engine: Engine) -> None:
    await create_many(engine, KEYS)
    engine.reconciler.default = resync_forever
    clock = EventClock(engine)
    controller = await engine.controller(predicate=clock)
    queue = controller.queue
    await until(lambda: queue.depth(Priority.LOW) > KEYS // 2, message="a LOW backlog")
    assert queue.depth(Priority.HIGH) == 0, "the initial list and the resyncs are LOW"
    await until(lambda: engine.reconciler.runs("old-0") >= 2, message="a resync of old-0")

    await engine.create("fresh")
    assert await clock.reconciles_before("fresh") == 0, "created: next in line"

    await until(lambda: queue.depth(Priority.LOW) > KEYS // 2, message="a LOW backlog again")
    await engine.patch("old-7", {"spec": {"size": 3}})
    assert await clock.reconciles_before("old-7", 2) == 0, "changed: next in line"
    assert engine.metric("workqueue_depth", name=controller.name, priority="-100") > 0


async def test_without_priorities_a_new_object_waits_behind_the_backlog(engine: Engine) -> None:
    await create_many(engine, KEYS)
    engine.reconciler.default = resync_forever
    clock = EventClock(engine)
    controller = await engine.controller(prioritized=False, predicate=clock)
    await until(lambda: len(controller.queue) > KEYS // 2, message="a backlog")
    await engine.create("fresh")
    assert await clock.reconciles_before("fresh") > KEYS // 3, "FIFO: behind them"


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
    clock = EventClock(engine)
    controller = await engine.controller(workers=4, limiter=limiter, predicate=clock)
    await until(lambda: engine.reconciler.runs("old-0") >= 1, message="resyncs run")
    await asyncio.sleep(0.2)
    assert engine.reconciler.most_in_flight == 1, "the limiter admits one at a time"
    assert limiter.waiting >= 3, "the other workers wait for the limiter, keys queued"
    await engine.create("fresh")
    assert await clock.reconciles_before("fresh") <= 1, "the one admitted may be another"
    assert controller.queue.processing <= 1
