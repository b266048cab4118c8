"""One controller per primary kind: informer events -> predicate -> work queue -> workers.

Workers take keys from the queue (a key is never processed twice at once), call the
reconciler inside the global concurrency limit, and apply its outcome to the queue as
controller-runtime does: Done -> forget the key's backoff; RequeueAfter -> forget and add
after the delay; Retry -> rate-limited requeue; Terminal -> forget, no requeue.

The controller knows nothing of what a reconcile is: it is given an informer, a
`Reconciler` (`outcome.py`), and the predicate deciding which events are worth one.

Priorities (`prioritized`, on by default; see `queue.py`): an event passed by the
predicate is queued at `predicates.priority_of`'s priority (LOW for the informer's initial
list, HIGH for an object created, changed or deleted); `Manager.enqueue` (a dependent
changed) adds HIGH; a RequeueAfter (the reconcile period, a role's requeue_after) is LOW;
a Retry keeps the priority its key was handed out with; `enqueue_all` is LOW.

A `ConcurrencyLimiter` (memory, in the Ansible operator) is awaited before a worker takes
a key: while it holds the workers back the keys stay in the queue, in priority order,
so that the next one admitted is the most urgent one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, assert_never

from runner.engine.outcome import (
    Done,
    Outcome,
    Reconciler,
    RequeueAfter,
    Retry,
    Terminal,
    result_label,
)
from runner.engine.predicates import priority_of
from runner.engine.queue import Priority, QueueShutDown, WorkQueue
from runner.k8s.informer import DELETED, Informer
from runner.observability.metrics import ControllerMetrics
from runner.structs import GVK, NamespacedName
from runner.structs.bodies import KubeObject, object_key

log = logging.getLogger("ansible-operator.controller")

EventPredicate = Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], bool]
"""Whether an informer event (type, new object, old object) deserves a reconcile."""

ObjectFilter = Callable[[Mapping[str, Any]], bool]
"""Whether an object is one the controller reconciles at all (its selector)."""


class Gate(Protocol):
    """Held before each reconcile, outside the concurrency limit (live reload closes it
    while the files a reconcile reads are being edited)."""

    async def wait(self) -> None: ...


class ConcurrencyLimiter(Protocol):
    """Decides whether one more reconcile may start now (beyond the worker count and the
    global limit): `slot(name)` waits until a reconcile of controller `name` may start
    and is held while it runs. It must always let at least one reconcile run."""

    def slot(self, name: str) -> AbstractAsyncContextManager[object]: ...


class Controller:
    """Watches one primary GVK and keeps its objects reconciled."""

    def __init__(
        self,
        *,
        name: str,
        gvk: GVK,
        informer: Informer,
        reconciler: Reconciler,
        workers: int = 1,
        predicate: EventPredicate | None = None,
        selects: ObjectFilter | None = None,
        gate: Gate | None = None,
        global_limit: asyncio.Semaphore | None = None,
        metrics: ControllerMetrics | None = None,
        prioritized: bool = True,
        limiter: ConcurrencyLimiter | None = None,
    ) -> None:
        self.name = name
        self.gvk = gvk
        self._workers = max(1, workers)
        self._metrics = metrics
        self.queue: WorkQueue[NamespacedName] = WorkQueue(metrics=metrics, prioritized=prioritized)
        self._limiter = limiter
        self.gate = gate
        self.informer = informer
        informer.add_handler(self._on_event)
        self.reconciler = reconciler
        self._predicate = predicate
        self._selects = selects
        self._global_limit = global_limit
        self._tasks: list[asyncio.Task[None]] = []
        self.active = 0
        self.reconciles = 0
        self.admit: Callable[[NamespacedName], bool] = lambda _key: True
        """Asked right before each reconcile; False skips the key without forgetting or
        requeueing it (sharding: the key is being handed over to another replica)."""

    def _on_event(self, event: str, new: KubeObject, old: KubeObject | None) -> None:
        if event == DELETED:
            # Gone (or out of this replica's selection): its resync is moot.
            self.queue.cancel_after(object_key(new))
        if self._metrics is not None:
            if event == DELETED:
                self._metrics.resource_deleted(new)
            else:
                self._metrics.resource_seen(new)
        if self._predicate is None or self._predicate(event, new, old):
            initial = not self.informer.synced.is_set()
            key = object_key(new)
            self.queue.add(key, priority_of(event, new, old, initial_list=initial))
            log.debug("queued %s %s (%s)", self.gvk.kind, key, event)

    async def start(self) -> None:
        self._tasks.append(asyncio.create_task(self.informer.run(), name=f"{self.name}-informer"))
        for index in range(self._workers):
            self._tasks.append(
                asyncio.create_task(self._worker(), name=f"{self.name}-worker-{index}")
            )
        log.info("started %s with %d workers", self.name, self._workers)

    async def wait_synced(self) -> None:
        await self.informer.synced.wait()

    async def _worker(self) -> None:
        if self._limiter is not None:
            await self._limited_worker(self._limiter)
            return
        while True:
            key = await self.queue.get()
            await self._process(key)

    async def _limited_worker(self, limiter: ConcurrencyLimiter) -> None:
        """Wait for a key, then for the limiter, and only then take the key that is first
        in line: what waits for the limiter stays queued (and can still be raised)."""
        while True:
            await self.queue.wait_ready()
            async with limiter.slot(self.name):
                if self.queue.shutting_down:
                    raise QueueShutDown()
                if not len(self.queue):
                    continue  # another worker took it meanwhile
                key = await self.queue.get()
                await self._process(key)

    async def _process(self, key: NamespacedName) -> None:
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self._global_limit is None:
                outcome = await self._admitted(key)
            else:
                async with self._global_limit:
                    outcome = await self._admitted(key)
            if outcome is not None:
                self._apply(key, outcome)
        finally:
            self.queue.done(key)

    async def _admitted(self, key: NamespacedName) -> Outcome | None:
        return await self._reconcile(key) if self.admit(key) else None

    async def _reconcile(self, key: NamespacedName) -> Outcome:
        self.active += 1
        started = self._metrics.started() if self._metrics else 0.0
        outcome: Outcome = Retry("cancelled")
        try:
            outcome = await self.reconciler.reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a bug; a broken object must never stop the controller
            log.exception("reconcile of %s %s raised", self.gvk.kind, key)
            outcome = Retry(f"{type(err).__name__}: {err}")
        finally:
            self.active -= 1
            self.reconciles += 1
            if self._metrics is not None:
                self._metrics.finished(
                    started, result=result_label(outcome), terminal=isinstance(outcome, Terminal)
                )
        return outcome

    def _apply(self, key: NamespacedName, outcome: Outcome) -> None:
        """controller-runtime's table: what the queue does with `key` after `outcome`."""
        match outcome:
            case Done() | Terminal():
                self.queue.forget(key)
                if self.informer.get(key) is None:
                    # gone: a requeue its last run asked for, racing the deletion, is moot
                    self.queue.cancel_after(key)
            case RequeueAfter(delay=delay):
                self.queue.forget(key)
                self.queue.add_after(key, delay, Priority.LOW)
            case Retry(routine=routine):
                delay = self.queue.add_rate_limited(key)
                log.log(
                    logging.DEBUG if routine else logging.INFO,
                    "requeue %s %s in %.1f s after %s (retry %d)",
                    self.gvk.kind,
                    key,
                    delay,
                    "a conflict" if routine else "error",
                    self.queue.num_requeues(key),
                )
            case _:
                assert_never(outcome)

    def enqueue_all(self) -> None:
        """Reconcile again every known object the controller selects (its logic changed),
        at LOW priority: like a resync, it brings no news about any one object."""
        for obj in self.informer.list():
            if self._selects is None or self._selects(obj):
                self.queue.add(object_key(obj), Priority.LOW)

    async def stop(self, *, timeout: float, cut_off: asyncio.Event | None = None) -> None:
        """Stop taking work; let reconciles in flight finish for up to `timeout` s (or
        until `cut_off` is set), then cancel them and wait until their runs are stopped."""
        self.informer.stop()
        self.queue.shutdown()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.active and loop.time() < deadline:
            if cut_off is not None and cut_off.is_set():
                break
            await asyncio.sleep(0.05)
        if self.active:
            log.warning("%s: %d reconciles cut off after %.0f s", self.name, self.active, timeout)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
