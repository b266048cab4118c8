"""The generic Controller in process, with a scripted reconciler: each outcome does to the
work queue what controller-runtime does, events for a busy key coalesce, a bug in one
reconcile is retried while the others go on, and the predicate, the gate and the global
limit decide what runs and when. No Ansible anywhere."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest
from support.engine import Engine, holds, raises, returns, until

from runner.engine.controller import Controller
from runner.engine.outcome import Done, RequeueAfter, Retry, Terminal
from runner.structs import bodies


def reconciled(controller: Controller, count: int) -> Any:
    """A probe: `controller` has finished `count` reconciles and holds no key."""
    return lambda: controller.reconciles >= count and controller.queue.processing == 0


def totals(engine: Engine, controller: Controller) -> dict[str, float]:
    """controller_runtime_reconcile_total of `controller`, by result."""
    return {
        result: engine.metric(
            "controller_runtime_reconcile_total", controller=controller.name, result=result
        )
        for result in ("success", "error", "requeue_after")
    }


async def test_a_retry_backs_off_and_done_forgets_the_backoff(engine: Engine) -> None:
    engine.reconciler.script("flaky", returns(Retry("not yet")), returns(Done()))
    controller = await engine.controller()
    key = engine.key("flaky")
    await engine.create("flaky")

    await until(reconciled(controller, 1), message="the failed reconcile")
    assert controller.queue.num_requeues(key) == 1, "Retry: add_rate_limited"
    assert engine.metric("workqueue_retries_total", name=controller.name) == 1

    await until(reconciled(controller, 2), message="the retry")
    assert controller.queue.num_requeues(key) == 0, "Done: the backoff is forgotten"
    assert controller.queue.delayed == 0 and len(controller.queue) == 0, "nothing is pending"
    assert totals(engine, controller) == {"success": 1, "error": 1, "requeue_after": 0}


async def test_requeue_after_forgets_the_backoff_and_adds_the_key_after_the_delay(
    engine: Engine,
) -> None:
    again = returns(RequeueAfter(0.2))
    engine.reconciler.script("again", returns(Retry("first")), again, again)
    controller = await engine.controller()
    await engine.create("again")

    await until(reconciled(controller, 2), message="the retry, then a requeue")
    assert controller.queue.delayed == 1, "RequeueAfter: added after the delay"
    assert controller.queue.num_requeues(engine.key("again")) == 0, "and the backoff forgotten"
    await until(reconciled(controller, 4), message="two requeues, then done")
    assert engine.reconciler.runs("again") == 4
    assert controller.queue.delayed == 0
    assert totals(engine, controller) == {"success": 1, "error": 1, "requeue_after": 2}


async def test_a_deleted_object_drops_its_pending_resync(engine: Engine) -> None:
    engine.reconciler.script("resynced", returns(RequeueAfter(3600)))
    controller = await engine.controller()
    await engine.create("resynced")
    await until(reconciled(controller, 1), message="the first reconcile")
    assert controller.queue.delayed == 1, "its resync waits an hour"

    await engine.delete("resynced")
    await until(reconciled(controller, 2), message="the reconcile of the deletion")
    assert controller.queue.delayed == 0, "nothing is kept for a name that is gone"


async def test_a_resync_asked_for_by_a_run_the_deletion_overtook_is_dropped(
    engine: Engine,
) -> None:
    gate = asyncio.Event()
    engine.reconciler.script("racing", holds(gate, then=RequeueAfter(3600)))
    controller = await engine.controller()
    key = engine.key("racing")
    await engine.create("racing")
    await until(lambda: engine.reconciler.in_flight == 1, message="the run in progress")
    await engine.delete("racing")
    await until(lambda: controller.informer.get(key) is None, message="the deletion seen")

    gate.set()  # the run ends asking for its resync; the dirty key runs once more: Done
    await until(reconciled(controller, 2), message="the reconcile after the deletion")
    assert controller.queue.delayed == 0


async def test_terminal_is_counted_and_not_retried_until_the_object_changes(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    engine.reconciler.script("rejected", returns(Terminal("422: the API refuses it")))
    controller = await engine.controller()
    await engine.create("rejected", {"n": 1})

    await until(reconciled(controller, 1), message="the reconcile")
    assert controller.queue.num_requeues(engine.key("rejected")) == 0, "forgotten"
    assert controller.queue.delayed == 0 and len(controller.queue) == 0
    terminal = "controller_runtime_terminal_reconcile_errors_total"
    assert engine.metric(terminal, controller=controller.name) == 1
    assert totals(engine, controller)["error"] == 1
    assert not [r for r in caplog.records if r.exc_info], "no traceback for an outcome"

    await engine.patch("rejected", {"spec": {"n": 2}})  # a new event: looked at again
    await until(reconciled(controller, 2), message="the reconcile after the change")
    assert engine.reconciler.runs("rejected") == 2


async def test_events_for_a_key_being_reconciled_coalesce_into_one_more_reconcile(
    engine: Engine,
) -> None:
    gate = asyncio.Event()
    engine.reconciler.script("busy", holds(gate))
    controller = await engine.controller()
    key = engine.key("busy")
    await engine.create("busy", {"n": 0})
    await until(lambda: engine.reconciler.in_flight == 1, message="the first reconcile")

    for n in range(1, 6):
        await engine.patch("busy", {"spec": {"n": n}})

    def seen_by_informer() -> bool:
        cached = controller.informer.get(key)
        return cached is not None and cached["metadata"]["generation"] == 6

    await until(seen_by_informer, message="the informer saw every update")
    gate.set()
    await until(reconciled(controller, 2), message="one more reconcile after the busy one")
    assert engine.reconciler.runs("busy") == 2, "five updates during a reconcile: one more"
    assert len(controller.queue) == 0 and controller.queue.delayed == 0


async def test_a_bug_in_one_reconcile_is_retried_and_the_others_go_on(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="ansible-operator.controller")
    engine.reconciler.script("broken", raises(RuntimeError("a bug")))
    controller = await engine.controller(workers=2)
    for name in ("broken", "fine"):
        await engine.create(name)

    await until(reconciled(controller, 3), message="the bug's retry and the good object")
    assert engine.reconciler.runs("broken") == 2 and engine.reconciler.runs("fine") == 1
    assert engine.metric("workqueue_retries_total", name=controller.name) == 1
    logged = [r for r in caplog.records if r.exc_info]
    assert len(logged) == 1 and "a bug" in str(logged[0].exc_info[1]), "logged with traceback"


def labelled_team_a(obj: Mapping[str, Any]) -> bool:
    return bodies.labels(obj).get("team") == "a"


async def test_the_predicate_decides_what_is_queued_and_enqueue_all_what_it_selects(
    engine: Engine,
) -> None:
    def predicate(_event: str, new: Mapping[str, Any], _old: Mapping[str, Any] | None) -> bool:
        return labelled_team_a(new)

    controller = await engine.controller(predicate=predicate, selects=labelled_team_a)
    await engine.create("other", labels={"team": "b"})
    await engine.create("chosen", labels={"team": "a"})
    await until(reconciled(controller, 1), message="the selected object")
    assert engine.reconciler.runs("other") == 0

    controller.enqueue_all()
    await until(reconciled(controller, 2), message="everything selected, again")
    assert (engine.reconciler.runs("chosen"), engine.reconciler.runs("other")) == (2, 0)


async def test_the_global_limit_bounds_reconciles_across_workers(engine: Engine) -> None:
    gate = asyncio.Event()
    engine.reconciler.default = holds(gate)
    controller = await engine.controller(workers=3, global_limit=asyncio.Semaphore(1))
    for index in range(3):
        await engine.create(f"o-{index}")
    await until(lambda: controller.queue.processing == 3, message="three workers took keys")
    await asyncio.sleep(0.2)
    assert engine.reconciler.in_flight == 1, "one reconcile at a time under a limit of 1"
    gate.set()
    await until(reconciled(controller, 3), message="all three, one after another")
    assert engine.reconciler.most_in_flight == 1


class Gate:
    """A gate the test opens: reconciles wait for it, outside the limit."""

    def __init__(self) -> None:
        self.open = asyncio.Event()

    async def wait(self) -> None:
        await self.open.wait()


async def test_a_closed_gate_holds_reconciles_until_it_opens(engine: Engine) -> None:
    gate = Gate()
    controller = engine.make_controller()
    controller.gate = gate
    await engine.started(controller)
    await engine.create("held")
    await until(lambda: controller.queue.processing == 1, message="a worker took the key")
    await asyncio.sleep(0.2)
    assert engine.reconciler.runs("held") == 0, "held at the gate"
    gate.open.set()
    await until(reconciled(controller, 1), message="the reconcile once the gate opened")
