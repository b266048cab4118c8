"""What a role sees and what follows its run, where the Go operator (v1.42.0) sets the
rule: the CR handed to the role is the one the Running write returned, a finalizer run
that asks for a requeue keeps the finalizer, a requeue of 0 is none, a bad requeue
period is retried rather than dropped, a CR kept by another finalizer shows the
finalizer run's success, and a CR gone before the Running write runs nothing.

Each is also compared with the Go operator itself by the differential suite
(tests/differential); these are the quick, scripted checks of the same rules."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from support.operatortier import OperatorTier, condition, ok, until

from runner.engine.controller import Controller
from runner.k8s.apierrors import NotFound
from runner.k8s.client import KubeClient
from runner.structs import GVK
from runner.watches.extravars import cr_var_name
from runner.watches.model import Finalizer

FINALIZER = "tier.test.example.com/cleanup"


def idle(controller: Controller, count: int) -> Any:
    """A probe: `controller` has finished `count` reconciles and holds no key."""
    return lambda: controller.reconciles >= count and controller.queue.processing == 0


def seen(tier: OperatorTier, run: int) -> dict[str, Any]:
    """The whole CR the `run`-th run (from 0) got as `_<group>_<kind>`."""
    extravars = tier.backend.requests[run].extravars
    return dict(extravars[cr_var_name(tier.gvk.group, tier.gvk.kind)])


def of_type(cr: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    return condition(cr, kind)


async def test_the_role_sees_its_cr_as_the_running_write_returned_it(
    tier: OperatorTier,
) -> None:
    controller = await tier.controller(reconcile_period=0)
    created = await tier.create("seen", {"size": 1})
    await until(idle(controller, 1), message="the first run")

    first = seen(tier, 0)
    running = of_type(first, "Running")
    assert running is not None, "a first run sees the Running condition (Go: markRunning)"
    assert (running["status"], running["reason"]) == ("True", "Running")
    assert first["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    assert "managedFields" not in first["metadata"], "stripped, as the informer's copies"

    after_first = await tier.get("seen")
    await tier.patch("seen", {"spec": {"size": 2}})
    await until(idle(controller, 2), message="the run of the new spec")
    second = seen(tier, 1)
    assert second["spec"] == {"size": 2}
    running = of_type(second, "Running")
    successful = of_type(second, "Successful")
    assert running is not None and running["reason"] == "Running"
    assert successful is not None and successful["status"] == "False", (
        "as on the Go operator, the previous success is not what a run sees"
    )
    assert second["metadata"]["resourceVersion"] not in (
        after_first["metadata"]["resourceVersion"],
        None,
    )


async def test_without_managed_status_the_role_sees_the_cr_as_read(tier: OperatorTier) -> None:
    controller = await tier.controller(reconcile_period=0, manage_status=False)
    await tier.create("plain")
    await until(idle(controller, 1), message="the run")
    assert "status" not in seen(tier, 0)


async def test_a_finalizer_run_that_asks_for_a_requeue_keeps_the_finalizer(
    tier: OperatorTier,
) -> None:
    tier.backend.script("slow-cleanup", ok(), ok(requeue_after=0.3), ok())
    controller = await tier.controller(
        reconcile_period=0, finalizer=Finalizer(name=FINALIZER, vars={"cleaning": True})
    )
    await tier.create("slow-cleanup")
    await until(idle(controller, 1), message="the first run")
    await tier.delete("slow-cleanup")

    await until(lambda: tier.backend.runs("slow-cleanup") == 2, message="the finalizer run")
    await until(lambda: controller.queue.delayed == 1, message="its requeue")
    kept = await tier.get("slow-cleanup")
    assert kept["metadata"]["finalizers"] == [FINALIZER], "clean-up not finished: kept"
    successful = of_type(kept, "Successful")
    assert successful is not None and successful["status"] == "True"

    await until(lambda: tier.key("slow-cleanup") in tier.backend.forgotten, message="gone")
    cleaning = [request.extravars.get("cleaning") for request in tier.backend.requests]
    assert cleaning == [None, True, True], "the finalizer ran again, then let the CR go"


async def test_a_requeue_after_of_zero_is_no_requeue(tier: OperatorTier) -> None:
    tier.backend.script("once", ok(requeue_after=0))
    controller = await tier.controller(reconcile_period=0)
    await tier.create("once")
    await until(idle(controller, 1), message="the run")
    await asyncio.sleep(0.5)
    assert tier.backend.runs("once") == 1, "not requeued at once (a hot loop), not at all"
    assert controller.queue.delayed == 0 and len(controller.queue) == 0


async def test_a_bad_requeue_period_fails_the_cr_and_is_retried(tier: OperatorTier) -> None:
    bad = "invalid requeue_after period '30': missing unit in duration '30'"
    tier.backend.script("bad-period", ok(requeue_error=bad), ok())
    controller = await tier.controller(reconcile_period=0)
    await tier.create("bad-period")

    await until(idle(controller, 1), message="the run with the bad period")
    assert controller.queue.num_requeues(tier.key("bad-period")) == 1, "retried with backoff"
    failure = of_type(await tier.get("bad-period"), "Failure")
    assert failure is not None and failure["status"] == "True"
    assert failure["message"] == bad
    await until(idle(controller, 2), message="the retry")
    successful = of_type(await tier.get("bad-period"), "Successful")
    assert successful is not None and successful["status"] == "True"


async def test_a_cr_kept_by_another_finalizer_shows_the_finalizer_runs_success(
    tier: OperatorTier,
) -> None:
    other = "elsewhere.example.com/keep"
    controller = await tier.controller(reconcile_period=0, finalizer=Finalizer(name=FINALIZER))
    await tier.create("kept", finalizers=[other])
    await until(idle(controller, 1), message="the first run")
    await tier.delete("kept")

    await until(lambda: tier.backend.runs("kept") == 2, message="the finalizer run")
    await until(idle(controller, 2), message="its end")

    async def ours_removed() -> dict[str, Any] | None:
        obj = await tier.get("kept")
        return obj if obj["metadata"]["finalizers"] == [other] else None

    obj = await ours_removed()
    assert obj is not None, "ours removed, the other kept"
    running = of_type(obj, "Running")
    successful = of_type(obj, "Successful")
    assert running is not None and running["reason"] == "Successful", running
    assert successful is not None and successful["status"] == "True"


class DeletingBeforeTheRunningWrite:
    """A client through which the CR is deleted just before the first status write."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self.deleted = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def replace_status(self, gvk: GVK, *, obj: Mapping[str, Any]) -> Any:
        if not self.deleted:
            self.deleted += 1
            meta = obj["metadata"]
            await self._client.delete(gvk, name=meta["name"], namespace=meta["namespace"])
        return await self._client.replace_status(gvk, obj=obj)


async def test_a_cr_gone_before_the_running_write_runs_nothing(tier: OperatorTier) -> None:
    meddling = DeletingBeforeTheRunningWrite(tier.client)
    tier.client = meddling  # type: ignore[assignment]
    controller = await tier.controller(reconcile_period=0)
    await tier.create("vanishing")

    await until(lambda: meddling.deleted == 1, message="deleted under the reconcile")
    await until(idle(controller, 1), message="the reconcile")
    try:
        await tier.get("vanishing")
    except NotFound:
        pass
    else:
        raise AssertionError("the CR should be gone")
    assert tier.backend.runs("vanishing") == 0, "no run for a CR that is gone"
    assert tier.metric("workqueue_retries_total", name=controller.name) == 0
