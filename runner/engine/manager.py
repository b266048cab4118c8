"""The Manager owns the controllers of every watch, leadership, and the graceful stop.

Without leader election the controllers start at once. With it, the manager first waits
for the Lease; a standby runs nothing but the election. Losing the Lease stops every
controller at once and makes `run` return 1 (the Go operator exits then, too, so the
pod restarts as a fresh standby); a graceful stop releases the Lease for a quick handover.
A sharded replica first hands its keys off (`before_stop`), within the same grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from runner.ansible.backend import AnsibleBackend
from runner.engine.controller import Controller
from runner.engine.leader import LeaderElector
from runner.engine.reconciler import RunSettings
from runner.k8s.client import KubeClient
from runner.k8s.errors import APIError, Conflict, NotFound
from runner.observability.events import EventRecorder
from runner.observability.metrics import OperatorMetrics
from runner.structs import GVK, NamespacedName, bodies
from runner.structs.bodies import object_key
from runner.watches import Watch

log = logging.getLogger("ansible-operator.manager")


class Manager:
    """Starts one controller per watch; `run()` returns after `stop` is set."""

    def __init__(
        self,
        *,
        client: KubeClient,
        watches: Sequence[Watch],
        backend: AnsibleBackend,
        settings: RunSettings,
        namespaces: Sequence[str] | None,
        max_workers: int = 0,
        graceful_shutdown_timeout: float = 30.0,
        metrics: OperatorMetrics | None = None,
        events: EventRecorder | None = None,
        leader: LeaderElector | None = None,
    ) -> None:
        self._graceful = graceful_shutdown_timeout
        self._leader = leader
        self._started = False
        self._client = client
        self._backend = backend
        self._settings = settings
        self._namespaces = namespaces
        self._limit = asyncio.Semaphore(max_workers) if max_workers > 0 else None
        self._metrics = metrics
        self._events = events
        self.before_stop: Callable[[float], Awaitable[None]] | None = None
        """Awaited after the stop with the grace period, while the Lease is held and the
        controllers still run (a sharded replica hands its keys off)."""
        self.on_controller: Callable[[Controller], None] = lambda _controller: None
        """Called with every controller before it starts (the proxy shares its cache)."""
        self.on_controller_stopped: Callable[[Controller], None] = lambda _controller: None
        """Called with every controller a live reload stops, as it starts stopping."""
        self.controllers = [self._make(watch) for watch in watches]

    def _make(self, watch: Watch) -> Controller:
        return Controller(
            watch=watch,
            client=self._client,
            backend=self._backend,
            settings=self._settings,
            namespaces=self._namespaces,
            global_limit=self._limit,
            metrics=self._metrics,
            events=self._events,
        )

    def controller(self, gvk: GVK) -> Controller | None:
        return next((c for c in self.controllers if c.watch.gvk == gvk), None)

    async def add(self, watch: Watch) -> None:
        """Start reconciling a new watch (live reload)."""
        controller = self._make(watch)
        self.controllers.append(controller)
        if self._started:
            self.on_controller(controller)
            await controller.start()

    async def remove(self, gvk: GVK) -> None:
        """Stop reconciling `gvk`; runs in flight finish first. Its CRs stay as they are."""
        controller = self.controller(gvk)
        if controller is None:
            return
        self.controllers.remove(controller)
        self.on_controller_stopped(controller)
        await controller.stop(timeout=self._graceful)

    async def replace(self, watch: Watch) -> None:
        """Restart the controller of `watch.gvk` with new settings."""
        await self.remove(watch.gvk)
        await self.add(watch)

    async def release_finalizer(
        self, gvk: GVK, finalizer: str, *, only_deleting: bool
    ) -> list[NamespacedName]:
        """Remove `finalizer`, which no watch handles any more (live reload), from the CRs
        of `gvk`: nothing else would, and a CR being deleted would stay Terminating for
        ever. `only_deleting`: CRs not being deleted keep it (their watch was removed and
        may come back)."""
        released: list[NamespacedName] = []
        namespaces: Sequence[str | None] = self._namespaces or [None]
        for namespace in namespaces:
            try:
                items, _ = await self._client.list(gvk, namespace=namespace or None)
            except APIError as err:
                log.error("cannot release finalizer %s of %s: %s", finalizer, gvk.kind, err)
                continue
            for obj in items:
                deleting = bool(bodies.deletion_timestamp(obj))
                if (deleting or not only_deleting) and finalizer in bodies.finalizers(obj):
                    key = object_key(obj)
                    if await self._drop_finalizer(gvk, obj, finalizer):
                        released.append(key)
        if released:
            log.warning(
                "removed finalizer %s from %d %s%s, without running its role: no watch in "
                "watches.yaml handles it any more: %s",
                finalizer,
                len(released),
                gvk.kind,
                " being deleted" if only_deleting else "",
                ", ".join(str(key) for key in released),
            )
        return released

    async def _drop_finalizer(self, gvk: GVK, obj: dict[str, Any], finalizer: str) -> bool:
        key = object_key(obj)
        name, namespace = key.name, key.namespace or None
        for _ in range(5):
            finalizers = bodies.finalizers(obj)
            if finalizer not in finalizers:
                return False
            # The resourceVersion makes the patch fail on a concurrent change rather than
            # drop someone else's finalizer.
            kept = [f for f in finalizers if f != finalizer]
            body = {
                "metadata": {"finalizers": kept, "resourceVersion": bodies.resource_version(obj)}
            }
            try:
                await self._client.patch(gvk, name=name, namespace=namespace, body=body)
                return True
            except NotFound:
                return False
            except Conflict:
                try:
                    obj = await self._client.get(gvk, name=name, namespace=namespace)
                except NotFound:
                    return False
            except APIError as err:
                log.error("cannot remove finalizer %s from %s %s: %s", finalizer, name, gvk, err)
                return False
        return False

    def enqueue(self, gvk: GVK, key: NamespacedName) -> None:
        """Reconcile `key` of the primary kind `gvk` (a dependent of it changed)."""
        for controller in self.controllers:
            if controller.watch.gvk == gvk:
                controller.queue.add(key)

    async def start(self) -> None:
        self._started = True
        for controller in self.controllers:
            self.on_controller(controller)
            await controller.start()

    async def wait_synced(self) -> None:
        await asyncio.gather(*(c.wait_synced() for c in self.controllers))

    def ready(self) -> tuple[bool, str]:
        """For /readyz: synced (leader or no election), or a standby that reaches the API."""
        if self._leader is not None and not self._leader.is_leader:
            if self._leader.healthy:
                return True, ""
            if self._leader.member_of:
                return False, "joining the ring: the API server did not answer the last try"
            return False, "standby: the API server did not answer the last lease check"
        if not self._started:
            return False, "controllers not started"
        unsynced = [c.name for c in self.controllers if not c.informer.synced.is_set()]
        if unsynced:
            return False, "not synced: " + ", ".join(unsynced)
        return True, ""

    async def run(self, stop: asyncio.Event) -> int:
        """Serve until `stop` is set (0) or the Lease is lost (1)."""
        lost = asyncio.Event()
        holder: asyncio.Task[None] | None = None
        if self._leader is not None:
            if not await _first(self._leader.acquire(), stop.wait()):
                return 0  # stopped while standing by
            holder = asyncio.create_task(self._leader.hold(lost.set), name="lease-holder")
        await self.start()
        await _first(stop.wait(), lost.wait())
        loop = asyncio.get_running_loop()
        grace_ends = loop.time() + self._graceful
        if self.before_stop is not None and not lost.is_set():
            await _first(_awaited(self.before_stop(self._graceful)), lost.wait())
        if lost.is_set():
            await _cancel(holder)
            await self.shutdown(timeout=0)  # another replica leads now: stop at once
            return 1
        # The lease is renewed while runs in flight finish, so that no standby starts
        # reconciling the same CRs meanwhile (losing it cuts them off at once); then it
        # is handed over at once.
        await self.shutdown(timeout=max(0.0, grace_ends - loop.time()), cut_off=lost)
        await _cancel(holder)
        if self._leader is not None:
            await self._leader.release()
        return 0

    async def shutdown(
        self, *, timeout: float | None = None, cut_off: asyncio.Event | None = None
    ) -> None:
        """Stop every controller; runs in flight get `timeout` (the graceful period) to
        finish, or until `cut_off` is set."""
        grace = self._graceful if timeout is None else timeout
        log.info("stopping: waiting up to %.0f s for running reconciles", grace)
        await asyncio.gather(*(c.stop(timeout=grace, cut_off=cut_off) for c in self.controllers))
        log.info("stopped")


async def _awaited(awaitable: Awaitable[None]) -> None:
    await awaitable


async def _cancel(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _first(*waits: Coroutine[Any, Any, object]) -> bool:
    """Await several coroutines until one finishes; cancel the others. True when the
    first of them is among those that finished."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    first = tasks[0]
    if first in done and not first.cancelled():
        error = first.exception()
        if error is not None:
            raise error
    return first in done
