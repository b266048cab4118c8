"""The operator's Prometheus metrics, with the names the Go operator's users scrape.

One registry per operator process (not prometheus-client's global one, so tests can run
several side by side). What is in it:

- `ansible_operator_build_info{commit,version}` = 1;
- `ansible_operator_reconcile_result{GVK,result}`: a gauge that only counts up, as in the
  original, and like it only for watches that manage status (the original counts where
  it writes the final status); `ansible_operator_reconciles{GVK}`: a histogram of whole
  reconciles (the original timed only the run set-up);
- `resource_created_at_seconds{name,namespace,group,version,kind}` for every primary CR;
- controller-runtime's controller and work-queue metrics, labelled by controller name;
- the roles' own metrics from `operator_sdk.util.osdk_metric` (`usermetrics.py`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

from runner import __version__
from runner.structs import GVK, bodies

_RECONCILE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300, float("inf"))
_MEMORY_BUCKETS = (
    *(float(mib << 20) for mib in (8, 16, 32, 64, 128, 256, 512, 1024)),
    float("inf"),
)
_QUEUE_BUCKETS = (*tuple(10.0**exponent for exponent in range(-8, 4)), float("inf"))


class OperatorMetrics:
    """Every metric of the operator, in `registry`."""

    def __init__(self, registry: CollectorRegistry | None = None, *, commit: str = "") -> None:
        # The original's Go client exports no `<name>_created` series; neither do we.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        Gauge(
            "ansible_operator_build_info",
            "Build information of the operator",
            ["commit", "version"],
            registry=r,
        ).labels(commit=commit or "unknown", version=__version__).set(1)
        self.reconcile_result = Gauge(
            "ansible_operator_reconcile_result",
            "Reconcile results by GVK and result (only ever increases)",
            ["GVK", "result"],
            registry=r,
        )
        self.reconciles = Histogram(
            "ansible_operator_reconciles",
            "Duration of whole reconciles in seconds, by GVK",
            ["GVK"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.created_at = Gauge(
            "resource_created_at_seconds",
            "Creation time of each primary resource, seconds since the epoch",
            ["name", "namespace", "group", "version", "kind"],
            registry=r,
        )
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Reconciles per controller and result",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Reconcile errors per controller",
            ["controller"],
            registry=r,
        )
        self.terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Reconciles that ended terminally (no retry until the object changes), per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Reconcile duration per controller",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Workers running a reconcile now, per controller",
            ["controller"],
            registry=r,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Worker count per controller",
            ["controller"],
            registry=r,
        )
        # Depth and wait by priority: controller-runtime's numbers ("0", "-100"), or ""
        # for a queue without priorities (which Prometheus stores as no label at all).
        self.queue_depth = Gauge(
            "workqueue_depth",
            "Keys waiting in the work queue, by priority",
            ["name", "priority"],
            registry=r,
        )
        self.queue_adds = Counter(
            "workqueue_adds_total", "Adds handled by the work queue", ["name"], registry=r
        )
        self.queue_retries = Counter(
            "workqueue_retries_total", "Rate-limited re-adds", ["name"], registry=r
        )
        self.queue_latency = Histogram(
            "workqueue_queue_duration_seconds",
            "Time a key waits in the queue before it is processed, by priority",
            ["name", "priority"],
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "Time processing a key takes",
            ["name"],
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )

        self.memory = MemoryMetrics(r)

    # -- what the engine reports ---------------------------------------------------------

    def controller(
        self, name: str, *, gvk: GVK, workers: int, manages_status: bool = True
    ) -> ControllerMetrics:
        """The metrics of the controller `name` of the primary kind `gvk`.
        `manages_status`: its reconciles write the CR's status (the watch's
        `manageStatus`), so they count in `ansible_operator_reconcile_result`."""
        self.max_concurrent.labels(controller=name).set(workers)
        return ControllerMetrics(self, name, gvk=gvk, manages_status=manages_status)


class MemoryMetrics:
    """What the memory limit of runs does (`runner.operator.memory`); also the engine
    limiter's `LimiterMetrics`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._waiting = Gauge(
            "ansible_operator_runs_waiting_for_memory",
            "Reconciles held back now because one more Ansible run would exceed the memory budget",
            registry=registry,
        )
        self._held = Counter(
            "ansible_operator_runs_held_for_memory",
            "Times a reconcile was held back because of the memory budget",
            registry=registry,
        )
        self.limit = Gauge(
            "ansible_operator_memory_limit_bytes",
            "The operator's cgroup memory limit (0: none found)",
            registry=registry,
        )
        self.budget = Gauge(
            "ansible_operator_memory_budget_bytes",
            "The part of the memory limit runs may fill (--memory-limit-fraction)",
            registry=registry,
        )
        self.usage = Gauge(
            "ansible_operator_memory_working_set_bytes",
            "The cgroup's memory use less inactive file cache, at the last sample",
            registry=registry,
        )
        self.estimate = Gauge(
            "ansible_operator_run_memory_estimate_bytes",
            "The memory one more Ansible run of a controller is expected to take",
            ["controller"],
            registry=registry,
        )
        self.run_peak = Histogram(
            "ansible_operator_run_memory_peak_bytes",
            "Peak private memory (USS) of an Ansible run's process tree, per controller",
            ["controller"],
            buckets=_MEMORY_BUCKETS,
            registry=registry,
        )

    def waiting(self, count: int) -> None:
        self._waiting.set(count)

    def held(self) -> None:
        self._held.inc()


class ControllerMetrics:
    """The metrics of one controller and its queue (also the queue's `QueueMetrics`)."""

    def __init__(
        self, metrics: OperatorMetrics, name: str, *, gvk: GVK, manages_status: bool
    ) -> None:
        self._m = metrics
        self.name = name
        self._gvk = gvk
        self._manages_status = manages_status
        self._active = metrics.active_workers.labels(controller=name)
        self._adds = metrics.queue_adds.labels(name=name)
        self._retries = metrics.queue_retries.labels(name=name)
        # By priority label. A queue reports a depth of 0 at each of its priorities when
        # it starts, which creates that priority's depth and wait series.
        self._depth: dict[str, Gauge] = {}
        self._latency: dict[str, Histogram] = {}

    # QueueMetrics
    def added(self) -> None:
        self._adds.inc()

    def depth(self, keys: int, priority: str = "") -> None:
        gauge = self._depth.get(priority)
        if gauge is None:
            gauge = self._by_priority(priority)
        gauge.set(keys)

    def waited(self, seconds: float, priority: str = "") -> None:
        histogram = self._latency.get(priority)
        if histogram is None:
            self._by_priority(priority)
            histogram = self._latency[priority]
        histogram.observe(seconds)

    def _by_priority(self, priority: str) -> Gauge:
        self._latency[priority] = self._m.queue_latency.labels(name=self.name, priority=priority)
        gauge = self._depth[priority] = self._m.queue_depth.labels(
            name=self.name, priority=priority
        )
        return gauge

    def retried(self) -> None:
        self._retries.inc()

    # reconciles
    def started(self) -> float:
        self._active.inc()
        return time.monotonic()

    def finished(self, started: float, *, result: str, terminal: bool = False) -> None:
        """`result`: success, error, requeue_after (controller-runtime's labels);
        `terminal`: an error that is not retried (counted as an error too, as
        controller-runtime does)."""
        seconds = time.monotonic() - started
        self._active.dec()
        self._m.work_duration.labels(name=self.name).observe(seconds)
        self._m.reconcile_time.labels(controller=self.name).observe(seconds)
        self._m.reconcile_total.labels(controller=self.name, result=result).inc()
        if result == "error":
            self._m.reconcile_errors.labels(controller=self.name).inc()
        if terminal:
            self._m.terminal_errors.labels(controller=self.name).inc()
        gvk_label = str(self._gvk)
        self._m.reconciles.labels(GVK=gvk_label).observe(seconds)
        if self._manages_status:
            outcome = "failed" if result == "error" else "succeeded"
            self._m.reconcile_result.labels(GVK=gvk_label, result=outcome).inc()

    # the primary objects
    def resource_seen(self, obj: Mapping[str, Any]) -> None:
        created = _timestamp(bodies.creation_timestamp(obj))
        if created is not None:
            self._m.created_at.labels(**_resource_labels(self._gvk, obj)).set(created)

    def resource_deleted(self, obj: Mapping[str, Any]) -> None:
        labels = _resource_labels(self._gvk, obj)
        with contextlib.suppress(KeyError):
            self._m.created_at.remove(*labels.values())


def _resource_labels(gvk: GVK, obj: Mapping[str, Any]) -> dict[str, str]:
    return {
        "name": bodies.name(obj),
        "namespace": bodies.namespace(obj),
        "group": gvk.group,
        "version": gvk.version,
        "kind": gvk.kind,
    }


def _timestamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
