"""runner.observability.metrics: what a finished reconcile adds to the operator's metrics."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from runner.engine.queue import Priority, WorkQueue
from runner.observability.metrics import OperatorMetrics
from runner.structs.gvk import GVK

GVK_ = GVK("cache.example.com", "v1alpha1", "Memcached")


@pytest.mark.parametrize(
    ("manages_status", "counted"),
    [
        pytest.param(True, True, id="manageStatus-true"),
        # As the original, which counts where it writes the final status.
        pytest.param(False, False, id="manageStatus-false"),
    ],
)
def test_reconcile_result_is_counted_only_for_watches_that_manage_status(
    manages_status: bool, counted: bool
) -> None:
    metrics = OperatorMetrics()
    controller = metrics.controller(
        "memcached-v1alpha1-controller", gvk=GVK_, workers=1, manages_status=manages_status
    )
    for result in ("success", "error"):
        controller.finished(controller.started(), result=result)
    text = generate_latest(metrics.registry).decode()
    gvk = 'GVK="cache.example.com/v1alpha1, Kind=Memcached"'
    for outcome in ("succeeded", "failed"):
        line = f'ansible_operator_reconcile_result{{{gvk},result="{outcome}"}} 1.0'
        assert (line in text.splitlines()) is counted
    # The controller's own metrics count either way.
    assert f"ansible_operator_reconciles_count{{{gvk}}} 2.0" in text.splitlines()


@pytest.mark.parametrize(
    ("prioritized", "lines"),
    [
        pytest.param(
            True,
            [
                'workqueue_depth{name="c",priority="0"} 0.0',
                'workqueue_depth{name="c",priority="-100"} 1.0',
                'workqueue_queue_duration_seconds_count{name="c",priority="0"} 1.0',
                'workqueue_queue_duration_seconds_count{name="c",priority="-100"} 0.0',
                'workqueue_adds_total{name="c"} 2.0',
            ],
            id="by-priority",
        ),
        # Prometheus stores an empty label as none: the series of a queue without
        # priorities are the ones this operator exported before priorities.
        pytest.param(
            False,
            [
                'workqueue_depth{name="c",priority=""} 1.0',
                'workqueue_queue_duration_seconds_count{name="c",priority=""} 1.0',
                'workqueue_adds_total{name="c"} 2.0',
            ],
            id="fifo",
        ),
    ],
)
async def test_workqueue_depth_and_wait_by_priority(prioritized: bool, lines: list[str]) -> None:
    metrics = OperatorMetrics()
    queue: WorkQueue[str] = WorkQueue(
        metrics=metrics.controller("c", gvk=GVK_, workers=1), prioritized=prioritized
    )
    queue.add("low", Priority.LOW)
    queue.add("high", Priority.HIGH)
    await queue.get()
    text = generate_latest(metrics.registry).decode().splitlines()
    for line in lines:
        assert line in text
    assert sum('workqueue_depth{name="c"' in line for line in text) == len(
        [line for line in lines if line.startswith("workqueue_depth")]
    )
    queue.shutdown()
