"""runner.ansible.jobevents: job events -> RunResult (SPEC "Status", "Triggers")."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from runner.ansible.jobevents import (
    NO_STATS_ERROR,
    UNKNOWN_FAILURE,
    EventCollector,
    FailedTask,
    RunResult,
    summarize,
)

CREATED = "2025-05-06T07:08:09.123456+00:00"
CREATED_DT = datetime(2025, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def ev(kind: str, *, created: str = "2025-05-06T07:00:00+00:00", **data: Any) -> dict[str, Any]:
    return {"event": kind, "uuid": "u", "counter": 1, "created": created, "event_data": data}


def stats(
    *,
    created: str = CREATED,
    ok: int = 0,
    changed: int = 0,
    skipped: int = 0,
    failures: int = 0,
    dark: int = 0,
    rescued: int = 0,
    ignored: int = 0,
    others: dict[str, dict[str, int]] | None = None,
) -> dict[str, Any]:
    per_key = {
        "ok": ok,
        "changed": changed,
        "skipped": skipped,
        "failures": failures,
        "dark": dark,
        "rescued": rescued,
        "ignored": ignored,
    }
    data: dict[str, Any] = {key: {"localhost": n} for key, n in per_key.items()}
    for host, counts in (others or {}).items():
        for key, n in counts.items():
            data[key][host] = n
    data["processed"] = {host: 1 for host in ["localhost", *(others or {})]}
    data["artifact_data"] = {}
    return ev("playbook_on_stats", created=created, **data)


def task_start(name: str, action: str = "debug") -> dict[str, Any]:
    return ev("playbook_on_task_start", task=name, task_action=action, is_conditional=False)


def ok(name: str, action: str = "debug", res: Any = None) -> dict[str, Any]:
    return ev(
        "runner_on_ok",
        host="localhost",
        task=name,
        task_action=action,
        res=res if res is not None else {"changed": False},
    )


def fail(
    name: str,
    msg: Any = "boom",
    *,
    host: str = "localhost",
    ignore_errors: Any = False,
    res: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    return ev(
        "runner_on_failed",
        host=host,
        task=name,
        task_action="fail",
        ignore_errors=ignore_errors,
        res=res if res is not None else {"failed": True, "msg": msg},
        **extra,
    )


def requeue(
    period: Any = "30s",
    *,
    kind: str = "runner_on_ok",
    action: str = "operator_sdk.util.requeue_after",
) -> dict[str, Any]:
    return ev(
        kind,
        host="localhost",
        task="requeue",
        task_action=action,
        res={"changed": False, "period": period},
    )


def done(**fields: Any) -> RunResult:
    """A RunResult of a run that reached playbook_on_stats (completion CREATED_DT)."""
    return RunResult(has_stats=True, completion=CREATED_DT, **fields)


CASES = [
    # -- stats ------------------------------------------------------------------------
    pytest.param(
        [task_start("a"), ok("a"), stats(ok=2, changed=1, skipped=3)],
        done(ok=2, changed=1, skipped=3),
        id="success-stats-for-localhost",
    ),
    pytest.param(
        [stats(ok=1, others={"otherhost": {"ok": 7, "failures": 4}})],
        done(ok=1),
        id="other-hosts-stats-ignored",
    ),
    pytest.param(
        [ev("playbook_on_stats", created=CREATED, ok={}, changed=0, failures={"localhost": 2})],
        done(failures=2),
        id="missing-or-malformed-stats-count-zero",
    ),
    pytest.param(
        [stats(ok=1, created="2025-01-01T00:00:00+00:00"), stats(ok=5)],
        done(ok=5),
        id="last-stats-wins",
    ),
    pytest.param(
        [
            ev("runner_on_unreachable", host="localhost", task="t", res={"msg": "gone"}),
            stats(dark=1),
        ],
        done(unreachable=1),
        id="unreachable-not-a-failure",
    ),
    # -- no stats ----------------------------------------------------------------------
    pytest.param([], RunResult(), id="no-events"),
    pytest.param(
        [task_start("a"), fail("a", "boom")],
        RunResult(failed_tasks=(FailedTask("a", "boom"),)),
        id="no-stats-keeps-failures",
    ),
    # -- failed tasks ------------------------------------------------------------------
    pytest.param(
        [task_start("a"), fail("a", "boom"), stats(ok=1, failures=1)],
        done(ok=1, failures=1, failed_tasks=(FailedTask("a", "boom"),)),
        id="one-failure",
    ),
    pytest.param(
        [
            fail("a", "first", host="localhost"),
            fail("b", "second", host="otherhost"),
            stats(failures=1, others={"otherhost": {"failures": 1}}),
        ],
        done(failures=1, failed_tasks=(FailedTask("a", "first"), FailedTask("b", "second"))),
        id="multiple-failures-all-hosts",
    ),
    pytest.param(
        [fail("a", "ignored", ignore_errors=True), stats(ok=1, ignored=1)],
        done(ok=1),
        id="ignore-errors",
    ),
    pytest.param(
        [fail("a", "not ignored", ignore_errors="yes"), stats(failures=1)],
        done(failures=1, failed_tasks=(FailedTask("a", "not ignored"),)),
        id="ignore-errors-must-be-boolean-true",
    ),
    pytest.param(
        [fail("a", res={"failed": True, "reason": "include failed"}), stats(failures=1)],
        done(failures=1, failed_tasks=(FailedTask("a", UNKNOWN_FAILURE),)),
        id="no-msg-unknown-failure",
    ),
    pytest.param(
        [fail("a", ["not", "a", "string"]), stats(failures=1)],
        done(failures=1, failed_tasks=(FailedTask("a", UNKNOWN_FAILURE),)),
        id="non-string-msg-unknown-failure",
    ),
    pytest.param(
        [ev("runner_on_failed", host="localhost"), stats(failures=1)],
        done(failures=1, failed_tasks=(FailedTask("", UNKNOWN_FAILURE),)),
        id="bare-failed-event",
    ),
    pytest.param(
        [ev("runner_item_on_failed", host="localhost", task="a", res={"msg": "item"}), stats()],
        done(),
        id="item-failures-not-counted",
    ),
    # -- rescued -----------------------------------------------------------------------
    pytest.param(
        [fail("a", "rescued", rescued={"localhost": 1}), stats(failures=1)],
        done(failures=1),
        id="rescued-flag-on-event-as-original",
    ),
    pytest.param(
        [fail("a", "rescued", rescued={"localhost": 0}), stats(failures=1)],
        done(failures=1, failed_tasks=(FailedTask("a", "rescued"),)),
        id="rescued-flag-zero-not-rescued",
    ),
    pytest.param(
        [fail("a", "rescued"), ok("rescue task"), stats(ok=1, rescued=1)],
        done(ok=1),
        id="rescued-by-block-per-stats",
    ),
    pytest.param(
        [fail("a", "rescued"), fail("b", "real"), stats(failures=1, rescued=1)],
        done(failures=1, failed_tasks=(FailedTask("b", "real"),)),
        id="rescued-then-real-failure",
    ),
    pytest.param(
        [fail("a", "x"), fail("b", "y"), stats(failures=0, rescued=1)],
        done(failed_tasks=(FailedTask("b", "y"),)),
        id="rescued-count-caps-what-is-dropped",
    ),
    pytest.param(
        [fail("a", "kept"), stats(failures=0, rescued=0)],
        done(failed_tasks=(FailedTask("a", "kept"),)),
        id="stats-disagree-failure-kept",
    ),
    pytest.param(
        [
            fail("a", "local rescued"),
            fail("b", "other real", host="otherhost"),
            stats(rescued=1, others={"otherhost": {"failures": 1}}),
        ],
        done(failed_tasks=(FailedTask("b", "other real"),)),
        id="rescued-counted-per-host",
    ),
    # -- requeue_after -----------------------------------------------------------------
    pytest.param(
        [task_start("requeue", "operator_sdk.util.requeue_after"), requeue("30s"), stats(ok=1)],
        done(ok=1, requeue_after=30.0),
        id="requeue-after-fqcn",
    ),
    pytest.param(
        [requeue("1m30s", action="requeue_after"), stats()],
        done(requeue_after=90.0),
        id="requeue-after-short-name",
    ),
    pytest.param(
        [requeue("500ms", kind="runner_on_failed", action="requeue_after"), stats(failures=1)],
        done(failures=1, failed_tasks=(FailedTask("requeue", UNKNOWN_FAILURE),)),
        id="requeue-after-not-on-failed",
    ),
    pytest.param(
        [
            ev(
                "runner_on_skipped",
                task="requeue",
                task_action="operator_sdk.util.requeue_after",
                res={"changed": False, "skip_reason": "Conditional result was False"},
            ),
            requeue("2h"),
            stats(),
        ],
        done(requeue_after=7200.0),
        id="requeue-after-skipped-task-has-no-period",
    ),
    pytest.param(
        [requeue("10s"), requeue("20s"), stats()],
        done(requeue_after=10.0),
        id="requeue-after-first-wins",
    ),
    pytest.param(
        [requeue("10s", action="my.collection.requeue_after"), stats()],
        done(),
        id="requeue-after-other-module-ignored",
    ),
    pytest.param(
        [requeue(30), stats()],
        done(),
        id="requeue-after-non-string-period-ignored",
    ),
    pytest.param(
        [requeue("5s"), fail("later", "boom"), stats(failures=1)],
        done(failures=1, requeue_after=5.0, failed_tasks=(FailedTask("later", "boom"),)),
        id="requeue-after-then-failure-both-reported",
    ),
    pytest.param(
        [requeue("5s")],
        RunResult(requeue_after=5.0),
        id="requeue-after-without-stats",
    ),
    # -- malformed events --------------------------------------------------------------
    pytest.param(
        [{"event": "runner_on_ok"}, {"event_data": None}, {}, stats()],
        done(),
        id="malformed-events-ignored",
    ),
]


@pytest.mark.parametrize(("events", "expected"), CASES)
def test_summarize(events: list[dict[str, Any]], expected: RunResult) -> None:
    assert summarize(events) == expected


@pytest.mark.parametrize(
    ("period", "expected_in_error"),
    [
        pytest.param("", '""', id="empty"),
        pytest.param("30", "missing unit", id="no-unit"),
        pytest.param("1d", "unknown unit", id="unknown-unit"),
    ],
)
def test_requeue_after_invalid_period(period: str, expected_in_error: str) -> None:
    result = summarize([requeue(period), requeue("10s"), stats()])
    assert result.requeue_after is None
    assert result.requeue_error is not None
    assert expected_in_error in result.requeue_error


@pytest.mark.parametrize(
    ("created", "expected"),
    [
        pytest.param(CREATED, CREATED_DT, id="runner-format"),
        pytest.param("2025-05-06T07:08:09.123456Z", CREATED_DT, id="z-suffix"),
        pytest.param("2025-05-06T07:08:09.123456", CREATED_DT, id="naive-is-utc"),
        pytest.param("2025-05-06T09:08:09.123456+02:00", CREATED_DT, id="offset-converted"),
        pytest.param("yesterday", None, id="unparseable"),
    ],
)
def test_completion(created: str, expected: datetime | None) -> None:
    result = summarize([stats(created=created)])
    assert result.has_stats
    assert result.completion == expected


@pytest.mark.parametrize(
    ("result", "failed", "message", "error"),
    [
        pytest.param(done(), False, UNKNOWN_FAILURE, None, id="success"),
        pytest.param(
            done(failed_tasks=(FailedTask("a", "one"), FailedTask("b", "two"))),
            True,
            "one\ntwo",
            None,
            id="failures-joined-by-newline",
        ),
        pytest.param(RunResult(), False, UNKNOWN_FAILURE, NO_STATS_ERROR, id="no-stats"),
    ],
)
def test_result_properties(
    result: RunResult, failed: bool, message: str, error: str | None
) -> None:
    assert result.failed is failed
    assert result.failure_message == message
    assert result.error == error


def test_collector_is_incremental() -> None:
    collector = EventCollector()
    collector.add(task_start("a"))
    collector.add(fail("a", "boom"))
    partial = collector.result()
    assert partial.failed_tasks == (FailedTask("a", "boom"),)
    assert not partial.has_stats
    collector.add(requeue("1s"))
    collector.add(stats(ok=1, failures=1))
    final = collector.result()
    assert final == done(
        ok=1, failures=1, requeue_after=1.0, failed_tasks=(FailedTask("a", "boom"),)
    )
    assert collector.result() == final


def test_summarize_does_not_mutate_events() -> None:
    events = [fail("a", "boom"), requeue("1s"), stats(failures=1)]
    before = copy.deepcopy(events)
    summarize(events)
    assert events == before
