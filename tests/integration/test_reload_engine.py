"""What a live reload's changes to the controllers do beside them, in process against the
real API server: the proxy's cache and the dependent watches follow a restarted or
removed controller, and a role edit reconciles again only the CRs its watch selects."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from support.fake_api import RecordingBackend
from support.operator import crd, install_crd

from runner.engine.controller import Controller
from runner.engine.manager import Manager
from runner.engine.reconciler import RunSettings
from runner.k8s.client import KubeClient
from runner.labelselector import parse_label_selector
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.owner import (
    PRIMARY_RESOURCE_ANNOTATION,
    PRIMARY_RESOURCE_TYPE_ANNOTATION,
    group_kind,
)
from runner.run import share_informers
from runner.structs import GVK, NamespacedName
from runner.watches import Watch

GROUP = "gate.test.example.com"
KIND = GVK(GROUP, "v1alpha1", "Gated")
OWNER = GVK("owner.test.example.com", "v1", "Owner")


@pytest.fixture(scope="module")
def gated(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=GROUP, kind=KIND.kind))


def cr(name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": KIND.api_version,
        "kind": KIND.kind,
        "metadata": {"name": name, **metadata},
        "spec": {},
    }


async def eventually(probe: Callable[[], Any], *, what: str, timeout: float = 15) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not probe():
        if loop.time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def operator(
    kube: KubeClient, namespace: str, watch: Watch
) -> AsyncIterator[tuple[Manager, InformerCache]]:
    """The manager of `watch` and the proxy's cache, wired as `run` wires them."""
    cache = InformerCache(kube, namespaces=[namespace])
    manager = Manager(
        client=kube,
        watches=[watch],
        backend=RecordingBackend(),  # type: ignore[arg-type]
        settings=RunSettings(),
        namespaces=[namespace],
        graceful_shutdown_timeout=5,
    )
    share_informers(manager, cache)
    try:
        await manager.start()
        await asyncio.wait_for(manager.wait_synced(), 60)
        yield manager, cache
    finally:
        await manager.shutdown(timeout=5)
        await cache.close()


async def reload(manager: Manager, change: str, watch: Watch) -> None:
    """What a reload of watches.yaml does to the controller of `watch`."""
    if change == "changed":
        await manager.replace(dataclasses.replace(watch, max_concurrent_reconciles=2))
    else:
        await manager.remove(watch.gvk)


@pytest.mark.parametrize("change", ["changed", "removed"])
async def test_the_proxy_cache_stops_reading_a_stopped_controller_s_informer(
    kube: KubeClient, gated: Any, namespace: str, change: str
) -> None:
    watch = Watch(gvk=KIND, role=Path("/roles/r"))

    def cached(cache: InformerCache, name: str) -> bool:
        informer = cache.ready(KIND)
        return informer is not None and informer.get(NamespacedName(namespace, name)) is not None

    async with operator(kube, namespace, watch) as (manager, cache):
        await kube.create(KIND, cr("before"), namespace=namespace)
        await eventually(lambda: cached(cache, "before"), what="the first CR in the cache")

        await reload(manager, change, watch)
        await kube.create(KIND, cr("after"), namespace=namespace)
        await eventually(
            lambda: cached(cache, "after"),
            what=f"the proxy cache to see a CR created after its watch was {change}",
        )


@pytest.mark.parametrize("change", ["changed", "removed"])
async def test_dependent_watches_of_a_primary_kind_survive_its_controller(
    kube: KubeClient, gated: Any, namespace: str, change: str
) -> None:
    """CRs of a watched kind that another watch's role created: their changes still
    reconcile their owner after a reload restarted or removed the kind's controller."""
    watch = Watch(gvk=KIND, role=Path("/roles/r"))
    owned = cr(
        "owned",
        annotations={
            PRIMARY_RESOURCE_ANNOTATION: f"{namespace}/boss",
            PRIMARY_RESOURCE_TYPE_ANNOTATION: group_kind(group=OWNER.group, kind=OWNER.kind),
        },
    )
    enqueued: list[tuple[GVK, NamespacedName]] = []
    async with operator(kube, namespace, watch) as (manager, cache):
        dependents = DependentWatches(cache, enqueue=lambda gvk, key: enqueued.append((gvk, key)))
        dependents.ensure(KIND, OWNER, primary_namespaced=True)
        await kube.create(KIND, owned, namespace=namespace)

        await reload(manager, change, watch)
        synced = cache.informer(KIND).synced
        await asyncio.wait_for(synced.wait(), 30)
        await kube.patch(KIND, name="owned", namespace=namespace, body={"spec": {"size": 2}})
        await eventually(
            lambda: (OWNER, NamespacedName(namespace, "boss")) in enqueued,
            what=f"the owner enqueued after its dependent's controller was {change}",
        )


async def test_a_role_edit_reconciles_only_the_crs_the_selector_selects(
    kube: KubeClient, gated: Any, namespace: str
) -> None:
    watch = Watch(
        gvk=KIND,
        role=Path("/roles/r"),
        selector=parse_label_selector({"matchLabels": {"tier": "gated"}}),
    )
    await kube.create(KIND, cr("chosen", labels={"tier": "gated"}), namespace=namespace)
    await kube.create(KIND, cr("other", labels={"tier": "free"}), namespace=namespace)
    await kube.create(KIND, cr("plain"), namespace=namespace)
    controller = Controller(
        watch=watch,
        client=kube,
        backend=RecordingBackend(),  # type: ignore[arg-type]
        settings=RunSettings(),
        namespaces=[namespace],
    )
    informer = asyncio.create_task(controller.informer.run())  # no workers: keys stay queued
    try:
        await asyncio.wait_for(controller.wait_synced(), 30)
        assert len(controller.informer) == 3
        assert await drain(controller) == {NamespacedName(namespace, "chosen")}

        controller.enqueue_all()  # what the reloader does once an edit of the role is good

        assert await drain(controller) == {NamespacedName(namespace, "chosen")}
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
