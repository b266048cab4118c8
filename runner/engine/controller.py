"""One controller per watch: informer events -> predicates -> work queue -> workers.

Workers take keys from the queue (a key is never processed twice at once), run the
reconciler inside the global concurrency limit, and apply controller-runtime's table:
error -> rate-limited requeue (a requeue-after is ignored); requeue_after -> forget and
add after the delay; success -> forget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runner.ansible.backend import AnsibleBackend
from runner.engine.predicates import should_reconcile
from runner.engine.queue import WorkQueue
from runner.engine.reconciler import Outcome, Reconciler, RunSettings
from runner.k8s.client import KubeClient
from runner.k8s.errors import Conflict, Unavailable
from runner.k8s.informer import DELETED, Informer
from runner.observability.events import EventRecorder
from runner.observability.metrics import ControllerMetrics, OperatorMetrics
from runner.structs import NamespacedName
from runner.watches import Watch

log = logging.getLogger("ansible-operator.controller")


def object_key(obj: Mapping[str, Any]) -> NamespacedName:
    meta = obj.get("metadata") or {}
    return NamespacedName(namespace=str(meta.get("namespace") or ""), name=str(meta["name"]))


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
            edits=lambda: self.edits,
        )
        self._global_limit = global_limit
        self._tasks: list[asyncio.Task[None]] = []
        self._running = asyncio.Event()
        self._running.set()
        self.active = 0
        self.reconciles = 0
        self.edits = 0  # edits of the role/playbook files seen by live reload
        self._checking = False  # an edit is waiting for the reloader's check
        self._paused: str | None = None  # why runs are held (a broken file)
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

    def note_edit(self) -> None:
        """A file the runs read just changed (live reload): hold new runs until the
        reloader has checked it (`checked`), and let runs in flight know (the reconciler
        compares `edits` before and after a run)."""
        self.edits += 1
        self._checking = True
        self._running.clear()

    def checked(self) -> None:
        """The reloader has checked the edits noted so far; `pause` may follow."""
        self._checking = False
        if self._paused is None:
            self._running.set()

    def pause(self, reason: str) -> None:
        """Hold new reconciles (runs in flight finish) until `resume`: a role being edited
        is broken, and running it would only turn every CR to Failure."""
        if self._paused is None:
            log.warning("%s: reconciles paused: %s", self.name, reason)
        self._paused = reason
        self._running.clear()

    def resume(self) -> None:
        if self._paused is not None:
            log.info("%s: reconciles resumed", self.name)
        self._paused = None
        if not self._checking:
            self._running.set()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            try:
                await self._running.wait()
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
        outcome = Outcome(error="cancelled")
        try:
            outcome = await self.reconciler.reconcile(key)
        except asyncio.CancelledError:
            raise
        except (Conflict, Unavailable) as err:
            # Routine (others kept writing the CR; the API server is restarting): one line,
            # and the key is retried with backoff.
            log.warning("reconcile of %s %s: %s", self.watch.gvk.kind, key, err)
            outcome = Outcome(error=str(err))
        except Exception as err:  # a broken CR must never stop the controller
            log.exception("reconcile of %s %s raised", self.watch.gvk.kind, key)
            outcome = Outcome(error=f"{type(err).__name__}: {err}")
        finally:
            self.active -= 1
            self.reconciles += 1
            if self._metrics is not None:
                self._metrics.finished(
                    self.watch.gvk,
                    started,
                    result=_result_label(outcome),
                    manages_status=self.watch.manage_status,
                )
        return outcome

    def _apply(self, key: NamespacedName, outcome: Outcome) -> None:
        if outcome.error is not None:
            delay = self.queue.add_rate_limited(key)
            log.info(
                "requeue %s %s in %.1f s after error (retry %d)",
                self.watch.gvk.kind,
                key,
                delay,
                self.queue.num_requeues(key),
            )
            return
        self.queue.forget(key)
        if outcome.requeue_after is not None:
            self.queue.add_after(key, outcome.requeue_after)

    def enqueue_all(self) -> None:
        """Reconcile every known CR again (a new leader starts from its cache)."""
        for key in self.informer:
            self.queue.add(key)

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


def _result_label(outcome: Outcome) -> str:
    if outcome.error is not None:
        return "error"
    return "requeue_after" if outcome.requeue_after is not None else "success"
