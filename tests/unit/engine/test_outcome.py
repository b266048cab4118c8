"""The errors a reconcile meets become outcome values, and each has its metric label."""

from __future__ import annotations

import pytest

from runner.engine.outcome import (
    Done,
    Outcome,
    RequeueAfter,
    Retry,
    Terminal,
    outcome_of,
    result_label,
)
from runner.errors import AnsibleOperatorError, AnsibleRunError, ReconcileError
from runner.k8s.apierrors import Conflict, Forbidden, Invalid, NotFound, Unavailable


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        pytest.param(
            Conflict(409, "Conflict", "the object has been modified", {}),
            Retry("409 Conflict: the object has been modified", routine=True),
            id="conflict-is-routine",
        ),
        pytest.param(
            Unavailable(503, "ServiceUnavailable", "restarting", {}),
            Retry("503 ServiceUnavailable: restarting"),
            id="unavailable",
        ),
        pytest.param(
            Forbidden(403, "Forbidden", "no", {}), Retry("403 Forbidden: no"), id="forbidden"
        ),
        pytest.param(NotFound(404, "NotFound", "gone", {}), Retry("404 NotFound: gone"), id="404"),
        pytest.param(
            Invalid(422, "Invalid", "status.conditions: bad", {}),
            Terminal("422 Invalid: status.conditions: bad"),
            id="invalid-is-terminal",
        ),
        pytest.param(ReconcileError("kept changing"), Retry("kept changing"), id="reconcile"),
        pytest.param(AnsibleRunError("no stats"), Retry("no stats"), id="ansible-run"),
    ],
)
def test_outcome_of(error: AnsibleOperatorError, expected: Outcome) -> None:
    assert outcome_of(error) == expected


@pytest.mark.parametrize(
    ("outcome", "label"),
    [
        pytest.param(Done(), "success", id="done"),
        pytest.param(RequeueAfter(5.0), "requeue_after", id="requeue-after"),
        pytest.param(Retry("x"), "error", id="retry"),
        pytest.param(Retry("x", routine=True), "error", id="conflict"),
        pytest.param(Terminal("x"), "error", id="terminal"),
    ],
)
def test_result_label(outcome: Outcome, label: str) -> None:
    assert result_label(outcome) == label
