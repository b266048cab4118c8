"""One controller per watch: informer events -> predicates -> work queue -> workers.

Workers take keys from the queue (a key is never processed twice at once), run the
reconciler inside the global concurrency limit, and apply its outcome to the queue as
controller-runtime does: Done -> forget the key's backoff; RequeueAfter -> forget and add
after the delay; Retry -> rate-limited requeue; Terminal -> forget, no requeue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from runner.ansible.backend import AnsibleBackend
from runner.engine.gate import ReloadGate
from runner.engine.outcome import Done, Outcome, RequeueAfter, Retry, Terminal, result_label
from runner.engine.predicates import selected, should_reconcile
from runner.engine.queue import WorkQueue
from runner.engine.reconciler import Reconciler, RunSettings
from runner.k8s.client import KubeClient
from runner.k8s.informer import DELETED, Informer
from runner.observability.events import EventRecorder
from runner.observability.metrics import ControllerMetrics, OperatorMetrics
from runner.structs import NamespacedName
from runner.structs.bodies import object_key
from runner.watches import Watch

log = logging.getLogger("ansible-operator.controller")


class Controller:
    """Watches one primary GVK and keeps its CRs reconciled."""

    def __init__(
        self,
        *,
        watch: Watch,
        client: KubeClient,
        backend: AnsibleBackend,
        settings: RunSettings,
        namespaces: Sequence[str] | None,
        global_limit: asyncio.Semaphore | None = None,
        metrics: OperatorMetrics | None = None,
        events: EventRecorder | None = None,
    ) -> None:
        self.watch = watch
        self.name = f"{watch.gvk.kind}-{watch.gvk.version}-controller".lower()
        self._workers = max(1, watch.max_concurrent_reconciles)
        self._operator_metrics = metrics
        self._metrics: ControllerMetrics | None = (
            metrics.controller(self.name, workers=self._workers) if metrics else None
        )
        self.queue: WorkQueue[NamespacedName] = WorkQueue(metrics=self._metrics)
        # Live reload holds new runs here while it checks an edit of the watch's files.
        self.gate = ReloadGate(self.name)
        # The selector is applied by the predicates (as the original does), so the
        # informer sees every object and notices labels that start to match.
        self.informer = Informer(
            client, watch.gvk, namespaces=namespaces, label_selector=None, on_event=self._on_event
        )
        self.reconciler = Reconciler(
            watch=watch,
            client=client,
            backend=backend,
            settings=settings,
            read=self.informer.get,
            events=events,
            gate=self.gate,
        )
        self._global_limit = global_limit
        self._tasks: list[asyncio.Task[None]] = []
        self.active = 0
        self.reconciles = 0
        self.admit: Callable[[NamespacedName], bool] = lambda _key: True
        """Asked right before each reconcile; False skips the key without forgetting or
        requeueing it (sharding: the key is being handed over to another replica)."""

    def _on_event(self, event: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        if self._operator_metrics is not None:
            if event == DELETED:
                self._operator_metrics.resource_deleted(self.watch.gvk, new)
            else:
                self._operator_metrics.resource_seen(self.watch.gvk, new)
        if should_reconcile(
            event,
            new,
            old,
            selector=self.watch.selector,
            watch_annotations=self.watch.watch_annotations_changes,
        ):
            self.queue.add(object_key(new))

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
        while True:
            key = await self.queue.get()
            try:
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
        except Exception as err:  # a bug; a broken CR must never stop the controller
            log.exception("reconcile of %s %s raised", self.watch.gvk.kind, key)
            outcome = Retry(f"{type(err).__name__}: {err}")
        finally:
            self.active -= 1
            self.reconciles += 1
            if self._metrics is not None:
                self._metrics.finished(
                    self.watch.gvk,
                    started,
                    result=result_label(outcome),
                    manages_status=self.watch.manage_status,
                    terminal=isinstance(outcome, Terminal),
                )
        return outcome

    def _apply(self, key: NamespacedName, outcome: Outcome) -> None:
        """controller-runtime's table: what the queue does with `key` after `outcome`."""
        match outcome:
            case Done() | Terminal():
                self.queue.forget(key)
            case RequeueAfter(delay=delay):
                self.queue.forget(key)
                self.queue.add_after(key, delay)
            case Retry(routine=routine):
                delay = self.queue.add_rate_limited(key)
                log.log(
                    logging.DEBUG if routine else logging.INFO,
                    "requeue %s %s in %.1f s after %s (retry %d)",
                    self.watch.gvk.kind,
                    key,
                    delay,
                    "a conflict" if routine else "error",
                    self.queue.num_requeues(key),
                )

    def enqueue_all(self) -> None:
        """Reconcile again every known CR the watch's selector selects (its role changed)."""
        for obj in self.informer.list():
            if selected(obj, self.watch.selector):
                self.queue.add(object_key(obj))

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
