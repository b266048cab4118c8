"""runner.status.conditions: the status a run writes (SPEC "Status")."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from runner.status.conditions import (
    AnsibleResult,
    failed,
    format_completion,
    format_time,
    get_condition,
    restored,
    running,
    succeeded,
)
from runner.util.redact import MESSAGE_LIMIT

OLD = "2024-01-01T00:00:00Z"
EARLIER = "2024-06-01T12:00:00Z"
NOW_DT = datetime(2025, 5, 6, 7, 8, 9, 654321, tzinfo=UTC)
NOW = "2025-05-06T07:08:09Z"

RESULT = AnsibleResult(
    ok=3, changed=1, skipped=2, failures=0, completion=datetime(2025, 5, 6, 7, 8, 9, 120000, UTC)
)
RESULT_DICT = {
    "ok": 3,
    "changed": 1,
    "skipped": 2,
    "failures": 0,
    "completion": "2025-05-06T07:08:09.12+00:00",
}
FAILED_RESULT = AnsibleResult(
    ok=1, changed=0, skipped=0, failures=1, completion=datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC)
)
FAILED_RESULT_DICT = {
    "ok": 1,
    "changed": 0,
    "skipped": 0,
    "failures": 1,
    "completion": "2025-05-06T07:08:09+00:00",
}
OLD_RESULT_DICT = {**RESULT_DICT, "ok": 99, "completion": "2024-01-01T00:00:00.5+00:00"}


def cond(
    cond_type: str,
    status: str,
    reason: str,
    message: str,
    when: str,
    result: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": cond_type, "status": status, "lastTransitionTime": when}
    if result is not None:
        out["ansibleResult"] = result
    out["reason"] = reason
    out["message"] = message
    return out


def running_c(status: str, when: str) -> dict[str, Any]:
    return cond("Running", status, "Running", "Running reconciliation", when)


def awaiting_c(status: str, when: str, result: dict[str, Any] | None) -> dict[str, Any]:
    return cond("Running", status, "Successful", "Awaiting next reconciliation", when, result)


def successful_c(status: str, when: str) -> dict[str, Any]:
    return cond("Successful", status, "Successful", "Last reconciliation succeeded", when)


def failure_c(
    status: str, message: str, when: str, result: dict[str, Any] | None
) -> dict[str, Any]:
    reason = "Failed" if status == "True" else ""
    return cond("Failure", status, reason, message, when, result)


def blank_c(cond_type: str, when: str) -> dict[str, Any]:
    return cond(cond_type, "False", "", "", when)


def st(*conditions: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**extra, "conditions": list(conditions)}


# Statuses as the runtime leaves them at each step.
AFTER_SUCCESS = st(
    awaiting_c("True", OLD, OLD_RESULT_DICT),
    successful_c("True", OLD),
    blank_c("Failure", OLD),
)
RUNNING_AFTER_SUCCESS = st(
    blank_c("Failure", OLD),
    successful_c("False", EARLIER),
    running_c("True", OLD),
)
AFTER_FAILURE = st(
    running_c("False", OLD),
    failure_c("True", "old failure", OLD, OLD_RESULT_DICT),
    blank_c("Successful", OLD),
)
RUNNING_AFTER_FAILURE = st(
    failure_c("True", "old failure", OLD, OLD_RESULT_DICT),
    blank_c("Successful", OLD),
    running_c("True", EARLIER),
)

Op = Callable[[Any], dict[str, Any]]


def do_running(status: Any) -> dict[str, Any]:
    return running(status, now=NOW_DT)


def do_succeeded(status: Any) -> dict[str, Any]:
    return succeeded(status, result=RESULT, now=NOW_DT)


def do_failed(status: Any) -> dict[str, Any]:
    return failed(
        status, message="task one failed\ntask two failed", result=FAILED_RESULT, now=NOW_DT
    )


def do_error(status: Any) -> dict[str, Any]:
    return failed(status, message="Unable to run reconciliation", result=None, now=NOW_DT)


CASES = [
    # -- start of a run --------------------------------------------------------------
    pytest.param(do_running, None, st(running_c("True", NOW)), id="running-first-run-no-status"),
    pytest.param(do_running, {}, st(running_c("True", NOW)), id="running-first-run-empty-status"),
    pytest.param(
        do_running,
        AFTER_SUCCESS,
        st(
            blank_c("Failure", OLD),
            # Successful flips to False, keeping reason and message; the flip is stamped.
            successful_c("False", NOW),
            # Same status, new reason: replaced (ansibleResult gone), time kept, moved last.
            running_c("True", OLD),
        ),
        id="running-after-success",
    ),
    pytest.param(
        do_running,
        AFTER_FAILURE,
        st(
            failure_c("True", "old failure", OLD, OLD_RESULT_DICT),
            # Already False with the same (empty) reason: untouched.
            blank_c("Successful", OLD),
            running_c("True", NOW),
        ),
        id="running-after-failure",
    ),
    pytest.param(
        do_running,
        st(cond("Running", "True", "Running", "custom message", OLD), {"type": "Ready"}),
        st(cond("Running", "True", "Running", "custom message", OLD), {"type": "Ready"}),
        id="running-unchanged-status-and-reason-is-noop",
    ),
    pytest.param(
        do_running,
        st({"type": "Ready", "status": "True"}, replicas=3, nodes=["a", "b"]),
        st(
            {"type": "Ready", "status": "True"},
            running_c("True", NOW),
            replicas=3,
            nodes=["a", "b"],
        ),
        id="running-keeps-custom-status-and-unknown-conditions",
    ),
    pytest.param(
        do_running,
        {"conditions": ["garbage", {"type": "Ready"}, 3]},
        st({"type": "Ready"}, running_c("True", NOW)),
        id="running-drops-non-map-conditions",
    ),
    pytest.param(
        do_running,
        {"conditions": "not-a-list", "replicas": 1},
        {"conditions": [running_c("True", NOW)], "replicas": 1},
        id="running-replaces-non-list-conditions",
    ),
    pytest.param(
        do_running,
        st({**successful_c("True", OLD), "observedGeneration": 4}),
        st({**successful_c("False", NOW), "observedGeneration": 4}, running_c("True", NOW)),
        id="running-flip-keeps-extra-fields",
    ),
    # -- success ---------------------------------------------------------------------
    pytest.param(
        do_succeeded,
        st(running_c("True", OLD)),
        st(
            awaiting_c("True", OLD, RESULT_DICT),
            successful_c("True", NOW),
            # Added even on the first success, as the original does.
            blank_c("Failure", NOW),
        ),
        id="succeeded-first-run",
    ),
    pytest.param(
        do_succeeded,
        RUNNING_AFTER_FAILURE,
        st(
            awaiting_c("True", EARLIER, RESULT_DICT),
            successful_c("True", NOW),
            # Never removed: False with empty reason and message, no ansibleResult.
            blank_c("Failure", NOW),
        ),
        id="succeeded-after-failure",
    ),
    pytest.param(
        do_succeeded,
        RUNNING_AFTER_SUCCESS,
        st(
            awaiting_c("True", OLD, RESULT_DICT),
            successful_c("True", NOW),
            # Failure is always rewritten, but keeps its time while it stays False.
            blank_c("Failure", OLD),
        ),
        id="succeeded-again-keeps-transition-times",
    ),
    pytest.param(
        do_succeeded,
        st(running_c("True", OLD), {"type": "Ready", "status": "True"}, phase="Deployed"),
        st(
            {"type": "Ready", "status": "True"},
            awaiting_c("True", OLD, RESULT_DICT),
            successful_c("True", NOW),
            blank_c("Failure", NOW),
            phase="Deployed",
        ),
        id="succeeded-keeps-role-status-and-moves-set-conditions-last",
    ),
    # -- failure ---------------------------------------------------------------------
    pytest.param(
        do_failed,
        st(running_c("True", OLD)),
        st(
            running_c("False", NOW),
            failure_c("True", "task one failed\ntask two failed", NOW, FAILED_RESULT_DICT),
            blank_c("Successful", NOW),
        ),
        id="failed-first-run",
    ),
    pytest.param(
        do_failed,
        RUNNING_AFTER_SUCCESS,
        st(
            running_c("False", NOW),
            failure_c("True", "task one failed\ntask two failed", NOW, FAILED_RESULT_DICT),
            # Still False: time kept, reason and message emptied.
            blank_c("Successful", EARLIER),
        ),
        id="failed-after-success",
    ),
    pytest.param(
        do_failed,
        RUNNING_AFTER_FAILURE,
        st(
            blank_c("Successful", OLD),
            running_c("False", NOW),
            # Failure excepted from the no-op rule: new message and result, same time.
            failure_c("True", "task one failed\ntask two failed", OLD, FAILED_RESULT_DICT),
        ),
        id="failed-repeated-updates-message",
    ),
    pytest.param(
        do_failed,
        st(replicas=2),
        st(
            failure_c("True", "task one failed\ntask two failed", NOW, FAILED_RESULT_DICT),
            blank_c("Successful", NOW),
            replicas=2,
        ),
        id="failed-without-running-condition",
    ),
    # -- failure before or around the run (no ansibleResult) ---------------------------
    pytest.param(
        do_error,
        AFTER_SUCCESS,
        st(
            awaiting_c("False", NOW, OLD_RESULT_DICT),
            successful_c("False", NOW),
            failure_c("True", "Unable to run reconciliation", NOW, None),
        ),
        id="error-after-success-keeps-reasons",
    ),
    pytest.param(
        do_error,
        None,
        st(failure_c("True", "Unable to run reconciliation", NOW, None)),
        id="error-on-empty-status",
    ),
    pytest.param(
        do_error,
        AFTER_FAILURE,
        st(
            # Already False with the same reasons: untouched, in place.
            running_c("False", OLD),
            blank_c("Successful", OLD),
            failure_c("True", "Unable to run reconciliation", OLD, None),
        ),
        id="error-after-failure",
    ),
]


@pytest.mark.parametrize(("op", "status", "expected"), CASES)
def test_transition(op: Op, status: Any, expected: dict[str, Any]) -> None:
    before = copy.deepcopy(status)
    assert op(status) == expected
    assert status == before


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param([do_running, do_succeeded], id="success"),
        pytest.param([do_running, do_failed], id="failure"),
        pytest.param([do_running, do_failed, do_running, do_succeeded], id="failure-then-success"),
        pytest.param([do_running, do_succeeded, do_running, do_failed], id="success-then-failure"),
    ],
)
def test_sequences_end_with_the_three_conditions(steps: list[Op]) -> None:
    status: dict[str, Any] | None = None
    for step in steps:
        status = step(status)
    assert status is not None
    assert sorted(c["type"] for c in status["conditions"]) == ["Failure", "Running", "Successful"]


def test_result_shares_nothing_with_input() -> None:
    status = st({"type": "Ready", "nested": {"a": [1]}}, custom={"list": [1]})
    out = running(status, now=NOW_DT)
    out["custom"]["list"].append(2)
    out["conditions"][0]["nested"]["a"].append(2)
    assert status == st({"type": "Ready", "nested": {"a": [1]}}, custom={"list": [1]})


def test_get_condition() -> None:
    status = st(running_c("True", OLD), successful_c("True", OLD))
    found = get_condition(status, "Successful")
    assert found == successful_c("True", OLD)
    assert found is not status["conditions"][1]
    assert get_condition(status, "Failure") is None
    assert get_condition(None, "Running") is None


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        pytest.param(
            datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC), "2025-01-02T03:04:05+00:00", id="no-fraction"
        ),
        pytest.param(
            datetime(2025, 1, 2, 3, 4, 5, 500000, tzinfo=UTC),
            "2025-01-02T03:04:05.5+00:00",
            id="trailing-zeros-dropped",
        ),
        pytest.param(
            datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=UTC),
            "2025-01-02T03:04:05.123456+00:00",
            id="microseconds",
        ),
        pytest.param(
            datetime(2025, 1, 2, 3, 4, 5, 1), "2025-01-02T03:04:05.000001+00:00", id="naive-is-utc"
        ),
        pytest.param(
            datetime(2025, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2))),
            "2025-01-02T03:04:05+00:00",
            id="converted-to-utc",
        ),
    ],
)
def test_format_completion(when: datetime, expected: str) -> None:
    assert format_completion(when) == expected


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        pytest.param(
            datetime(2025, 1, 2, 3, 4, 5, 999999, tzinfo=UTC),
            "2025-01-02T03:04:05Z",
            id="seconds-only",
        ),
        pytest.param(datetime(2025, 1, 2, 3, 4, 5), "2025-01-02T03:04:05Z", id="naive-is-utc"),
        pytest.param(
            datetime(2025, 1, 2, 0, 4, 5, tzinfo=timezone(timedelta(hours=-3))),
            "2025-01-02T03:04:05Z",
            id="converted-to-utc",
        ),
    ],
)
def test_format_time(when: datetime, expected: str) -> None:
    assert format_time(when) == expected


def test_ansible_result_to_dict() -> None:
    assert RESULT.to_dict() == RESULT_DICT
    assert list(RESULT.to_dict()) == ["ok", "changed", "skipped", "failures", "completion"]


def test_condition_key_order_matches_original_json() -> None:
    out = succeeded(None, result=RESULT, now=NOW_DT)
    assert list(out["conditions"][0]) == [
        "type",
        "status",
        "lastTransitionTime",
        "ansibleResult",
        "reason",
        "message",
    ]


def test_restored_undoes_the_running_write_and_keeps_what_the_role_wrote() -> None:
    before = st(awaiting_c("True", OLD, RESULT_DICT), successful_c("True", OLD))
    during = {**do_running(before), "custom": {"written": "by the role"}}
    assert get_condition(during, "Successful") is not None
    back = restored(during, before)
    assert back["conditions"] == before["conditions"]
    assert back["custom"] == {"written": "by the role"}
    assert back["conditions"] is not before["conditions"]  # a copy, not the cached object


def test_restored_to_no_status_drops_the_conditions() -> None:
    assert restored(do_running(None), None) == {"conditions": []}


TOKEN = "sha256~Pl4nted-T0ken-9f2c"


@pytest.mark.parametrize("result", [FAILED_RESULT, None], ids=["failed-tasks", "no-run"])
def test_failure_message_is_masked(result: AnsibleResult | None) -> None:
    message = f"GET https://api.example.com failed: Authorization: Bearer {TOKEN}"
    status = failed(None, message=message, result=result, now=NOW_DT)
    failure = get_condition(status, "Failure")
    assert failure is not None
    assert TOKEN not in failure["message"]
    assert failure["message"].endswith("Authorization: Bearer <redacted>")


def test_a_huge_failure_message_is_capped_keeping_its_end() -> None:
    message = "x" * 2_000_000 + "\nthe real error: ConfigMap data too long"
    status = failed(None, message=message, result=FAILED_RESULT, now=NOW_DT)
    failure = get_condition(status, "Failure")
    assert failure is not None
    assert len(failure["message"]) <= MESSAGE_LIMIT
    assert failure["message"].endswith("\nthe real error: ConfigMap data too long")
    assert failure["ansibleResult"] == FAILED_RESULT_DICT
