"""runner.observability.metrics: what a finished reconcile adds to the operator's metrics."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

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
