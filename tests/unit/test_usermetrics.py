"""runner.observability.usermetrics: what `osdk_metric` requests become in the registry."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest

from runner.observability.metrics import OperatorMetrics
from runner.observability.usermetrics import MetricError, UserMetrics


def exposition(**requests: list[dict[str, Any]]) -> list[str]:
    metrics = OperatorMetrics()
    user = UserMetrics(metrics.registry)
    for request in requests["apply"]:
        user.apply(request)
    return generate_latest(metrics.registry).decode().splitlines()


def counter(name: str, **options: Any) -> dict[str, Any]:
    return {"name": name, "description": "Things seen", "counter": options}


def test_a_counter_keeps_the_name_the_role_gave() -> None:
    lines = exposition(apply=[counter("things", increment=True), counter("things", add=2)])
    assert "things 3.0" in lines
    assert not any(line.startswith("things_total") for line in lines)


def test_a_counter_named_total_is_typed_counter() -> None:
    lines = exposition(apply=[counter("runs_total", increment=True)])
    assert "# TYPE runs_total counter" in lines
    assert "runs_total 1.0" in lines


def test_no_created_series() -> None:
    lines = exposition(apply=[counter("runs_total", increment=True)])
    assert not any("_created " in line for line in lines if not line.startswith("#"))


@pytest.mark.parametrize(
    ("request_body", "message"),
    [
        (counter("things", add=-1), "cannot be decreased"),
        (counter("9things", increment=True), "invalid metric name"),
        (counter("ansible_operator_build_info", increment=True), "ansible_operator_build_info"),
        ({"name": "g", "description": "d", "gauge": {"set": "high"}}, "set must be a number"),
        ({"name": "h", "description": "d", "histogram": {"observe": "x"}}, "must be a number"),
        ({"name": "x", "description": "d"}, "exactly one of"),
    ],
)
def test_bad_requests_are_refused(request_body: dict[str, Any], message: str) -> None:
    user = UserMetrics(OperatorMetrics().registry)
    with pytest.raises(MetricError, match=message):
        user.apply(request_body)


def test_a_name_keeps_its_first_type() -> None:
    user = UserMetrics(OperatorMetrics().registry)
    user.apply(counter("things", increment=True))
    with pytest.raises(MetricError, match="is a counter, not a gauge"):
        user.apply({"name": "things", "description": "d", "gauge": {"set": 1}})


@pytest.mark.parametrize(
    ("kind", "options", "expected"),
    [
        pytest.param("counter", {}, ["empty 0.0"], id="counter"),
        # The module sends every sub-option of the type, unset ones as null.
        pytest.param(
            "counter", {"increment": None, "add": None}, ["empty 0.0"], id="counter-nulls"
        ),
        pytest.param("gauge", {}, ["empty 0.0"], id="gauge"),
        pytest.param("gauge", {"set": None, "increment": False}, ["empty 0.0"], id="gauge-nulls"),
        pytest.param("histogram", {}, ["empty_count 1.0", "empty_sum 0.0"], id="histogram"),
        pytest.param(
            "summary", {"observe": None}, ["empty_count 1.0", "empty_sum 0.0"], id="summary"
        ),
    ],
)
def test_an_empty_operation_is_accepted_as_the_original_does(
    kind: str, options: dict[str, Any], expected: list[str]
) -> None:
    """An empty counter or gauge is registered and left alone; an empty histogram or
    summary observes 0."""
    lines = exposition(apply=[{"name": "empty", "description": "d", kind: options}])
    for line in expected:
        assert line in lines
    assert any(line.startswith("# HELP empty") for line in lines)


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param(counter("refused", add=-1), id="negative-add"),
        pytest.param({"name": "refused", "description": "d", "gauge": {"add": "x"}}, id="gauge"),
        pytest.param(
            {"name": "refused", "description": "d", "summary": {"observe": []}}, id="summary"
        ),
    ],
)
def test_a_refused_request_registers_nothing(request_body: dict[str, Any]) -> None:
    metrics = OperatorMetrics()
    user = UserMetrics(metrics.registry)
    with pytest.raises(MetricError):
        user.apply(request_body)
    assert "refused" not in generate_latest(metrics.registry).decode()
    # The name is still free for a good request of another type.
    user.apply({"name": "refused", "description": "d", "gauge": {"set": 4}})
    assert "refused 4.0" in generate_latest(metrics.registry).decode().splitlines()
