"""The Manager runs the controllers, owns leadership and the graceful stop.

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

from runner.engine.controller import Controller
from runner.engine.leader import LeaderElector
from runner.engine.queue import Priority
from runner.structs import GVK, NamespacedName

log = logging.getLogger("ansible-operator.manager")


class Manager:
    """Runs the controllers it is given; `run()` returns after `stop` is set."""

    def __init__(
        self,
        *,
        controllers: Sequence[Controller],
        graceful_shutdown_timeout: float = 30.0,
        leader: LeaderElector | None = None,
    ) -> None:
        self._graceful = graceful_shutdown_timeout
        self._leader = leader
        self._started = False
        self.before_stop: Callable[[float], Awaitable[None]] | None = None
        """Awaited after the stop with the grace period, while the Lease is held and the
        controllers still run (a sharded replica hands its keys off)."""
        self.on_controller: Callable[[Controller], None] = lambda _controller: None
        """Called with every controller before it starts (the proxy shares its cache)."""
        self.on_controller_stopped: Callable[[Controller], None] = lambda _controller: None
        """Called with every controller a live reload stops, as it starts stopping."""
        self.controllers = list(controllers)

    def controller(self, gvk: GVK) -> Controller | None:
        return next((c for c in self.controllers if c.gvk == gvk), None)

    async def add(self, controller: Controller) -> None:
        """Start running a new controller (live reload)."""
        self.controllers.append(controller)
        if self._started:
            self.on_controller(controller)
            await controller.start()

    async def remove(self, gvk: GVK) -> None:
        """Stop the controller of `gvk`; reconciles in flight finish first."""
        controller = self.controller(gvk)
        if controller is None:
            return
        self.controllers.remove(controller)
        self.on_controller_stopped(controller)
        await controller.stop(timeout=self._graceful)

    async def replace(self, controller: Controller) -> None:
        """Stop the controller of `controller.gvk` and start `controller` in its place."""
        await self.remove(controller.gvk)
        await self.add(controller)

    def enqueue(self, gvk: GVK, key: NamespacedName) -> None:
        """Reconcile `key` of the primary kind `gvk` (a dependent of it changed: news, so
        at HIGH priority)."""
        for controller in self.controllers:
            if controller.gvk == gvk:
                controller.queue.add(key, Priority.HIGH)

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
