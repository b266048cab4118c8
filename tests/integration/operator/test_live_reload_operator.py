"""Live reload beside the engine, in process: the gate holds and releases runs and the
reloader puts back the status of a run an edit interrupted; the proxy's cache and the
dependent watches follow a controller a reload restarted or removed; a role edit
reconciles again only the CRs its watch selects."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from functools import partial

import pytest
from support.operatortier import OperatorTier, condition, no_result, ok, until

from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import RunResult
from runner.engine.controller import Controller
from runner.engine.manager import Manager
from runner.operator.reload import restore_status
from runner.operator.reloadgate import ReloadGate
from runner.operator.run import share_informers
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.owner import (
    PRIMARY_RESOURCE_ANNOTATION,
    PRIMARY_RESOURCE_TYPE_ANNOTATION,
    group_kind,
)
from runner.structs import GVK, NamespacedName
from runner.util.labelselector import parse_label_selector

OWNER = GVK("owner.test.example.com", "v1", "Owner")


async def test_an_edit_holds_new_runs_and_an_interrupted_run_keeps_the_crs_status(
    tier: OperatorTier,
) -> None:
    controller = await tier.controller(reconcile_period=0)
    gate = controller.gate
    assert isinstance(gate, ReloadGate)
    gate.attach(partial(restore_status, tier.client, tier.watch()))  # as the reloader

    async def saved_under_the_run(request: RunRequest) -> RunResult:
        gate.note_edit()  # the role is saved while the run starts: it reads it half-way
        return await no_result("ERROR! We were unable to read the role")(request)

    tier.backend.script("one", ok(), saved_under_the_run, ok())
    await tier.create("one")
    await until(lambda: controller.reconciles == 1, message="the first reconcile")
    settled = (await tier.get("one"))["status"]["conditions"]

    await tier.patch("one", {"spec": {"size": 2}})
    await until(lambda: controller.reconciles == 2, message="the interrupted reconcile")
    assert (await tier.get("one"))["status"]["conditions"] == settled
    assert controller.queue.num_requeues(tier.key("one")) == 0, "no error counted"

    await tier.patch("one", {"spec": {"size": 3}})
    await until(lambda: controller.queue.processing == 1, message="a worker took the key")
    assert tier.backend.runs("one") == 2, "the gate holds it until the edit is checked"

    gate.checked()
    await until(lambda: controller.reconciles == 3, message="the run after the check")
    successful = condition(await tier.get("one"), "Successful")
    assert successful is not None and successful["status"] == "True"


@contextlib.asynccontextmanager
async def operator(tier: OperatorTier) -> AsyncIterator[tuple[Manager, InformerCache]]:
    """A manager of the test's kind and the proxy's cache, wired as `run` wires them."""
    cache = InformerCache(tier.client, namespaces=[tier.namespace])
    manager = Manager(controllers=[tier.builder().build(tier.watch())], graceful_shutdown_timeout=5)
    share_informers(manager, cache)
    try:
        await manager.start()
        await asyncio.wait_for(manager.wait_synced(), 30)
        yield manager, cache
    finally:
        await manager.shutdown(timeout=5)
        await cache.close()


async def reload(tier: OperatorTier, manager: Manager, change: str) -> None:
    """What a reload of watches.yaml does to the controller of the test's kind."""
    if change == "changed":
        watch = dataclasses.replace(tier.watch(), max_concurrent_reconciles=2)
        await manager.replace(tier.builder().build(watch))
    else:
        await manager.remove(tier.gvk)


@pytest.mark.parametrize("change", ["changed", "removed"])
async def test_the_proxy_cache_stops_reading_a_stopped_controller_s_informer(
    tier: OperatorTier, change: str
) -> None:
    def cached(cache: InformerCache, name: str) -> bool:
        informer = cache.ready(tier.gvk)
        return informer is not None and informer.get(tier.key(name)) is not None

    async with operator(tier) as (manager, cache):
        await tier.create("before")
        await until(lambda: cached(cache, "before"), message="the first CR in the cache")

        await reload(tier, manager, change)
        await tier.create("after")
        await until(
            lambda: cached(cache, "after"),
            message=f"the proxy cache to see a CR created after its watch was {change}",
        )


@pytest.mark.parametrize("change", ["changed", "removed"])
async def test_dependent_watches_of_a_primary_kind_survive_its_controller(
    tier: OperatorTier, change: str
) -> None:
    """CRs of a watched kind that another watch's role created: their changes still
    reconcile their owner after a reload restarted or removed the kind's controller."""
    enqueued: list[tuple[GVK, NamespacedName]] = []
    async with operator(tier) as (manager, cache):
        dependents = DependentWatches(cache, enqueue=lambda gvk, key: enqueued.append((gvk, key)))
        dependents.ensure(tier.gvk, OWNER, primary_namespaced=True)
        owner_type = group_kind(group=OWNER.group, kind=OWNER.kind)
        await tier.create(
            "owned",
            annotations={
                PRIMARY_RESOURCE_ANNOTATION: f"{tier.namespace}/boss",
                PRIMARY_RESOURCE_TYPE_ANNOTATION: owner_type,
            },
        )

        await reload(tier, manager, change)
        await asyncio.wait_for(cache.informer(tier.gvk).synced.wait(), 30)
        await tier.patch("owned", {"spec": {"size": 2}})
        await until(
            lambda: (OWNER, NamespacedName(tier.namespace, "boss")) in enqueued,
            message=f"the owner enqueued after its dependent's controller was {change}",
        )


async def test_a_role_edit_reconciles_again_only_the_crs_the_selector_selects(
    tier: OperatorTier,
) -> None:
    await tier.create("chosen", labels={"tier": "gated"})
    await tier.create("other", labels={"tier": "free"})
    await tier.create("plain")
    selector = parse_label_selector({"matchLabels": {"tier": "gated"}})
    controller = tier.builder().build(tier.watch(selector=selector))
    informer = asyncio.create_task(controller.informer.run())  # no workers: keys stay queued
    try:
        await asyncio.wait_for(controller.wait_synced(), 30)
        assert len(controller.informer) == 3
        assert await drain(controller) == {tier.key("chosen")}

        controller.enqueue_all()  # what the reloader does once an edit of the role is good

        assert await drain(controller) == {tier.key("chosen")}
    finally:
        controller.informer.stop()
        await asyncio.wait_for(informer, 10)


async def drain(controller: Controller) -> set[NamespacedName]:
    """The keys queued now, taken off the queue."""
    keys = set()
    while len(controller.queue):
        key = await controller.queue.get()
        controller.queue.done(key)
        keys.add(key)
    return keys
