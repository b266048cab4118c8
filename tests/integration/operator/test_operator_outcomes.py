"""The Ansible operator's reconcile in process, on the engine: each run's result becomes
the status and the outcome it should (a failed task retried with backoff, a requeue,
a status the API rejects is terminal), a conflict on the finalizer patch is retried
quietly, and the watch's own settings (manageStatus, selector, periods, finalizer)
decide what is reconciled and when."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from support.operatortier import OperatorTier, Step, condition, failed, held, no_result, ok, until

from runner.engine.controller import Controller
from runner.k8s.apierrors import NotFound
from runner.k8s.client import KubeClient
from runner.operator import reconciler
from runner.structs import GVK
from runner.util.labelselector import parse_label_selector
from runner.watches.model import Finalizer

EVENT = GVK("", "v1", "Event")


def reconciled(controller: Controller, count: int) -> Any:
    """A probe: `controller` has finished `count` reconciles and holds no key."""
    return lambda: controller.reconciles >= count and controller.queue.processing == 0


def totals(tier: OperatorTier, controller: Controller) -> dict[str, float]:
    """controller_runtime_reconcile_total of `controller`, by result."""
    return {
        result: tier.metric(
            "controller_runtime_reconcile_total", controller=controller.name, result=result
        )
        for result in ("success", "error", "requeue_after")
    }


async def test_a_failed_run_is_retried_with_backoff_and_success_forgets_the_backoff(
    tier: OperatorTier,
) -> None:
    tier.backend.script("flaky", failed("not yet"), ok())
    controller = await tier.controller(reconcile_period=0)
    key = tier.key("flaky")
    await tier.create("flaky")

    await until(reconciled(controller, 1), message="the failed reconcile")
    assert controller.queue.num_requeues(key) == 1, "Retry: add_rate_limited"
    assert tier.metric("workqueue_retries_total", name=controller.name) == 1
    failure = condition(await tier.get("flaky"), "Failure")
    assert failure is not None and failure["message"] == "not yet"

    await until(reconciled(controller, 2), message="the retry")
    assert controller.queue.num_requeues(key) == 0, "Done: the backoff is forgotten"
    assert controller.queue.delayed == 0 and len(controller.queue) == 0, "nothing is pending"
    assert totals(tier, controller) == {"success": 1, "error": 1, "requeue_after": 0}
    successful = condition(await tier.get("flaky"), "Successful")
    assert successful is not None and successful["status"] == "True"


async def test_a_requeue_after_forgets_the_backoff_and_adds_the_key_after_the_delay(
    tier: OperatorTier,
) -> None:
    tier.backend.script("again", ok(requeue_after=0.2), ok(requeue_after=0.2))
    controller = await tier.controller(reconcile_period=0)
    await tier.create("again")

    await until(reconciled(controller, 1), message="the first reconcile")
    assert controller.queue.delayed == 1, "RequeueAfter: added after the delay"
    assert controller.queue.num_requeues(tier.key("again")) == 0
    await until(reconciled(controller, 3), message="two requeues, then done")
    assert tier.backend.runs("again") == 3
    assert controller.queue.delayed == 0
    assert totals(tier, controller) == {"success": 1, "error": 0, "requeue_after": 2}
    assert tier.metric("workqueue_retries_total", name=controller.name) == 0


async def test_the_reconcile_period_and_its_per_cr_annotation_requeue(tier: OperatorTier) -> None:
    controller = await tier.controller(reconcile_period=0.3)
    await tier.create(
        "slow", annotations={"ansible.sdk.operatorframework.io/reconcile-period": "1h"}
    )
    await tier.create("fast")
    await until(lambda: tier.backend.runs("fast") >= 3, message="fast runs every 0.3 s")
    assert tier.backend.runs("slow") == 1
    assert controller.queue.num_requeues(tier.key("fast")) == 0, "periods are no retries"


async def test_a_terminal_outcome_is_recorded_and_not_retried_until_the_cr_changes(
    tier: OperatorTier, tier_kinds: dict[str, GVK], caplog: pytest.LogCaptureFixture
) -> None:
    tier.gvk = tier_kinds["Strict"]  # its status schema rejects our conditions
    controller = await tier.controller(reconcile_period=0)
    key = tier.key("rejected")
    await tier.create("rejected", {"n": 1})

    await until(reconciled(controller, 1), message="the reconcile")
    assert controller.queue.num_requeues(key) == 0, "Terminal: forgotten, not rate limited"
    assert controller.queue.delayed == 0 and len(controller.queue) == 0
    assert tier.metric("workqueue_retries_total", name=controller.name) == 0
    terminal = "controller_runtime_terminal_reconcile_errors_total"
    assert tier.metric(terminal, controller=controller.name) == 1
    assert totals(tier, controller)["error"] == 1
    assert tier.backend.runs("rejected") == 0, "the Running condition was refused first"
    events, _ = await tier.client.list(EVENT, namespace=tier.namespace)
    warnings = [e for e in events if e.get("reason") == "ReconcileFailed"]
    assert warnings and "422" in warnings[0]["message"]
    assert not [r for r in caplog.records if r.exc_info], "no traceback for a known error"

    await tier.patch("rejected", {"spec": {"n": 2}})  # a new generation: looked at again
    await until(reconciled(controller, 2), message="the reconcile of the new generation")
    assert tier.metric(terminal, controller=controller.name) == 2


class Meddling:
    """A client through which somebody else writes the CR just before our first
    finalizer patch: the API server answers that patch with a real 409 Conflict."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self.meddled = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def patch(self, gvk: GVK, *, name: str, namespace: str | None, body: Any) -> Any:
        if "finalizers" in (body.get("metadata") or {}) and not self.meddled:
            self.meddled += 1
            await self._client.patch(
                gvk, name=name, namespace=namespace, body={"metadata": {"labels": {"m": "1"}}}
            )
        return await self._client.patch(gvk, name=name, namespace=namespace, body=body)


async def test_a_conflict_on_the_finalizer_patch_is_retried_quietly(
    tier: OperatorTier, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="ansible-operator")
    finalizer = "tier.test.example.com/cleanup"
    meddling = Meddling(tier.client)
    tier.client = meddling  # type: ignore[assignment]
    controller = await tier.controller(reconcile_period=0, finalizer=Finalizer(name=finalizer))
    await tier.create("raced")

    await until(
        lambda: tier.backend.finished == ["raced"] and controller.queue.processing == 0,
        message="the conflict, then the retry that runs",
    )
    assert meddling.meddled == 1
    assert controller.reconciles >= 2, "the conflicting reconcile was retried"
    obj = await tier.get("raced")
    assert obj["metadata"]["finalizers"] == [finalizer]
    assert obj["metadata"]["labels"] == {"m": "1"}, "the other writer's change is kept"
    assert tier.backend.runs("raced") == 1, "the run waited for the finalizer"
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert not loud, [r.getMessage() for r in loud]
    quiet = [r.getMessage() for r in caplog.records if "409" in r.getMessage()]
    assert quiet and "retried" in quiet[0]


async def test_events_for_a_key_being_reconciled_coalesce_into_one_more_run(
    tier: OperatorTier,
) -> None:
    gate = asyncio.Event()
    tier.backend.script("busy", held(gate))
    controller = await tier.controller(reconcile_period=0)
    key = tier.key("busy")
    await tier.create("busy", {"n": 0})
    await until(lambda: tier.backend.in_flight == 1, message="the first run started")

    for n in range(1, 6):
        await tier.patch("busy", {"spec": {"n": n}})

    def seen_by_informer() -> bool:
        cached = controller.informer.get(key)
        return cached is not None and cached["metadata"]["generation"] == 6

    await until(seen_by_informer, message="the informer saw every update")
    gate.set()
    await until(reconciled(controller, 2), message="one more run after the busy one")
    assert tier.backend.runs("busy") == 2, "five updates during a run: one run more"
    assert tier.backend.requests[-1].extravars["n"] == 5, "the run after sees the latest"
    assert len(controller.queue) == 0 and controller.queue.delayed == 0


async def test_manage_status_false_writes_no_status(tier: OperatorTier) -> None:
    controller = await tier.controller(manage_status=False, reconcile_period=0)
    await tier.create("quiet")
    await until(reconciled(controller, 1), message="one reconcile")
    assert tier.backend.runs("quiet") == 1
    assert not (await tier.get("quiet")).get("status")


async def test_the_selector_leaves_unlabelled_crs_alone_until_their_labels_match(
    tier: OperatorTier,
) -> None:
    selector = parse_label_selector({"matchLabels": {"team": "a"}})
    controller = await tier.controller(selector=selector, reconcile_period=0)
    await tier.create("other", labels={"team": "b"})
    await tier.create("labelled", labels={"team": "a"})
    await until(reconciled(controller, 1), message="the labelled CR")
    assert tier.backend.runs("labelled") == 1
    assert tier.backend.runs("other") == 0
    assert condition(await tier.get("other"), "Running") is None

    await tier.patch("other", {"metadata": {"labels": {"team": "a"}}})
    await until(reconciled(controller, 2), message="the CR whose labels now match")
    assert tier.backend.runs("other") == 1


@pytest.mark.parametrize("finalizer", [False, True], ids=["no-finalizer", "finalizer"])
async def test_a_cr_deleted_while_its_run_is_in_flight(
    tier: OperatorTier, monkeypatch: pytest.MonkeyPatch, finalizer: bool
) -> None:
    # A CR found deleted after its run is looked at again this soon (5 s in the operator).
    monkeypatch.setattr(reconciler, "DELETED_DURING_RUN_DELAY", 0.2)
    name = "tier.test.example.com/cleanup"
    gate = asyncio.Event()
    tier.backend.script("victim", held(gate))
    controller = await tier.controller(
        reconcile_period=0,
        finalizer=Finalizer(name=name, vars={"cleaning": True}) if finalizer else None,
    )
    await tier.create("victim")
    await until(lambda: tier.backend.in_flight == 1, message="the run started")
    await tier.delete("victim")
    gate.set()

    await until(lambda: tier.key("victim") in tier.backend.forgotten, message="forgotten")
    with pytest.raises(NotFound):
        await tier.get("victim")
    assert tier.metric("workqueue_retries_total", name=controller.name) == 0, "no error"
    runs = [request.extravars.get("cleaning") for request in tier.backend.requests]
    assert runs == ([None, True] if finalizer else [None]), "the finalizer's run, once"


def raising(error: Exception) -> Step:
    """A run that fails in a way nobody planned for (a bug)."""

    async def step(_request: Any) -> Any:
        raise error

    return step


async def test_a_bug_in_one_reconcile_is_retried_and_the_others_go_on(
    tier: OperatorTier, caplog: pytest.LogCaptureFixture
) -> None:
    tier.backend.script("broken", raising(RuntimeError("a bug")))
    tier.backend.script("missing", no_result("role: /scripted/role was not found"))
    controller = await tier.controller(reconcile_period=0, max_concurrent_reconciles=2)
    for name in ("broken", "missing", "fine"):
        await tier.create(name)

    await until(reconciled(controller, 5), message="the two retries and the good CR")
    assert tier.backend.runs("broken") == tier.backend.runs("missing") == 2
    assert tier.metric("workqueue_retries_total", name=controller.name) == 2
    for name in ("broken", "missing", "fine"):
        found = condition(await tier.get(name), "Successful")
        assert found is not None and found["status"] == "True", name
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1 and "broken" in tracebacks[0], "only the bug has a traceback"
