"""ansible-runner job events -> the outcome of one run (`RunResult`).

The reconciler decides everything after a run from its events, as the Go operator does:
the stats for host `localhost` (shown as `ansibleResult`), the failed tasks (the Failure
condition's message), a `requeue_after` request, and whether the playbook finished at all
(no `playbook_on_stats` event means it did not). Events are plain mappings as
ansible-runner emits them (`event`, `created`, `event_data`), fed one at a time to an
`EventCollector` while the run goes on, or all at once to `summarize`.

Rules kept from the original (`internal/ansible/controller/reconcile.go` and
`runner/eventapi/types.go`):
- a failed task is a `runner_on_failed` event without `ignore_errors: true` and not
  rescued; its message is `res.msg` when that is a string, else
  "unknown playbook failure";
- `ansibleResult.failures` is the stats' `failures` for `localhost`; unreachable
  (`dark`) hosts are not counted there and do not fail the run;
- `requeue_after` is the first task event (not `runner_on_failed`) whose `task_action`
  is `operator_sdk.util.requeue_after` or `requeue_after` and whose `res.period` is a
  string, parsed as a Go duration.

Rescued failures: the original only looks for a `rescued` map on the failed event
itself, which ansible-runner never sends, so a failure rescued by a `block`/`rescue` still
failed the run. Ansible counts each non-ignored failure as exactly one of `failures` or
`rescued` in the final stats, and a host stops at its first unrescued failure, so the
last `failures[host]` failed events of a host are the real ones and up to
`rescued[host]` earlier ones were rescued. `EventCollector.result` drops those.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from runner.util.durations import parse_duration

__all__ = [
    "NO_STATS_ERROR",
    "REQUEUE_ACTIONS",
    "UNKNOWN_FAILURE",
    "EventCollector",
    "FailedTask",
    "RunResult",
    "no_stats_reason",
    "strip_ansi",
    "summarize",
]

HOST = "localhost"
"""The host whose stats become `ansibleResult`."""

UNKNOWN_FAILURE = "unknown playbook failure"
NO_STATS_ERROR = "did not receive playbook_on_stats event"
REQUEUE_ACTIONS = frozenset({"operator_sdk.util.requeue_after", "requeue_after"})

_STATS = "playbook_on_stats"
_FAILED = "runner_on_failed"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ERROR_PREFIXES = ("[ERROR]: ", "ERROR! ")
_REASON_LINES = 10


class FailedTask(NamedTuple):
    """One failed task: its name and the message it failed with."""

    task: str
    msg: str


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """What one Ansible run reported through its events."""

    ok: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    unreachable: int = 0
    failed_tasks: tuple[FailedTask, ...] = ()
    requeue_after: float | None = None
    """Seconds, from the first `requeue_after` task; None when there was none."""
    requeue_error: str | None = None
    """Why the first `requeue_after` task's period could not be parsed (then no requeue)."""
    has_stats: bool = False
    completion: datetime | None = None
    """When `playbook_on_stats` was emitted (UTC); None without it."""

    @property
    def failed(self) -> bool:
        """True when a task failed (neither ignored nor rescued)."""
        return bool(self.failed_tasks)

    @property
    def failure_message(self) -> str:
        """The failed tasks' messages joined by newlines, or "unknown playbook failure"."""
        if not self.failed_tasks:
            return UNKNOWN_FAILURE
        return "\n".join(task.msg for task in self.failed_tasks)

    @property
    def error(self) -> str | None:
        """Why the run has no result at all (no stats event), else None."""
        return None if self.has_stats else NO_STATS_ERROR


class EventCollector:
    """Accumulates the events of one run; `result()` may be called at any time."""

    def __init__(self) -> None:
        self._stats: Mapping[str, Any] | None = None
        self._completion: datetime | None = None
        # (host, task) of each candidate failure, in event order.
        self._failures: list[tuple[str, FailedTask]] = []
        self._requeue_seen = False
        self._requeue_after: float | None = None
        self._requeue_error: str | None = None

    def add(self, event: Mapping[str, Any]) -> None:
        """Take one job event into account; events of other kinds are ignored."""
        kind = event.get("event")
        data = event.get("event_data")
        if not isinstance(data, Mapping):
            data = {}

        if kind == _STATS:
            # The last stats event wins, as in the original.
            self._stats = data
            self._completion = _parse_time(event.get("created"))
        if not self._requeue_seen and kind != _FAILED:
            self._take_requeue(data)
        if kind == _FAILED and not _ignored(data) and not _marked_rescued(data):
            host = data.get("host")
            self._failures.append((host if isinstance(host, str) else "", _failed_task(data)))

    def result(self) -> RunResult:
        """The outcome of the events seen so far."""
        stats = self._stats
        if stats is None:
            return RunResult(
                failed_tasks=tuple(task for _, task in self._failures),
                requeue_after=self._requeue_after,
                requeue_error=self._requeue_error,
            )
        return RunResult(
            ok=_count(stats, "ok", HOST),
            changed=_count(stats, "changed", HOST),
            skipped=_count(stats, "skipped", HOST),
            failures=_count(stats, "failures", HOST),
            unreachable=_count(stats, "dark", HOST),
            failed_tasks=_without_rescued(self._failures, stats),
            requeue_after=self._requeue_after,
            requeue_error=self._requeue_error,
            has_stats=True,
            completion=self._completion,
        )

    def _take_requeue(self, data: Mapping[str, Any]) -> None:
        if data.get("task_action") not in REQUEUE_ACTIONS:
            return
        res = data.get("res")
        period = res.get("period") if isinstance(res, Mapping) else None
        if not isinstance(period, str):
            # A task start or a skipped task: no period, keep looking.
            return
        self._requeue_seen = True
        try:
            self._requeue_after = parse_duration(period)
        except ValueError as exc:
            self._requeue_error = f"invalid requeue_after period {period!r}: {exc}"


def summarize(events: Iterable[Mapping[str, Any]]) -> RunResult:
    """The outcome of a whole run from all its events."""
    collector = EventCollector()
    for event in events:
        collector.add(event)
    return collector.result()


def strip_ansi(text: str) -> str:
    """`text` without terminal colour and cursor sequences (Ansible colours its output)."""
    return _ANSI.sub("", text)


def no_stats_reason(stdout: str, rc: int | None) -> str:
    """Ansible's own error from a run that stopped before its stats, for a condition.

    The `[ERROR]:` (or older `ERROR!`) line and its `Origin:` line up to the next blank
    line; else the last lines of output; else the exit code.
    """
    lines = [strip_ansi(line).rstrip() for line in stdout.splitlines()]
    for index, line in enumerate(lines):
        prefix = next((p for p in _ERROR_PREFIXES if line.startswith(p)), None)
        if prefix is None:
            continue
        reason = [line[len(prefix) :]]
        for following in lines[index + 1 : index + _REASON_LINES]:
            if not following.strip():
                break
            reason.append(following)
        return "\n".join(reason)
    tail = [line for line in lines if line.strip()][-5:]
    if tail:
        return "\n".join(tail)
    return f"ansible-playbook exited with code {rc}"


# -- internals ------------------------------------------------------------------------


def _ignored(data: Mapping[str, Any]) -> bool:
    return data.get("ignore_errors") is True


def _marked_rescued(data: Mapping[str, Any]) -> bool:
    """The original's check: a `rescued` map on the event with a host counted."""
    rescued = data.get("rescued")
    if not isinstance(rescued, Mapping):
        return False
    return any(_as_int(v) >= 1 for v in rescued.values())


def _failed_task(data: Mapping[str, Any]) -> FailedTask:
    task = data.get("task")
    res = data.get("res")
    msg = res.get("msg") if isinstance(res, Mapping) else None
    return FailedTask(
        task=task if isinstance(task, str) else "",
        msg=msg if isinstance(msg, str) else UNKNOWN_FAILURE,
    )


def _without_rescued(
    failures: list[tuple[str, FailedTask]], stats: Mapping[str, Any]
) -> tuple[FailedTask, ...]:
    """Drop failures the final stats show were rescued (see the module docstring)."""
    per_host: dict[str, int] = {}
    for host, _ in failures:
        per_host[host] = per_host.get(host, 0) + 1
    to_drop = {
        host: min(_count(stats, "rescued", host), max(0, seen - _count(stats, "failures", host)))
        for host, seen in per_host.items()
    }
    kept: list[FailedTask] = []
    for host, task in failures:
        if to_drop[host] > 0:
            to_drop[host] -= 1
            continue
        kept.append(task)
    return tuple(kept)


def _as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value)


def _count(stats: Mapping[str, Any], key: str, host: str) -> int:
    per_host = stats.get(key)
    if not isinstance(per_host, Mapping):
        return 0
    return _as_int(per_host.get(host, 0))


def _parse_time(value: Any) -> datetime | None:
    """An event's `created` (ISO 8601, normally with `+00:00`) as an aware UTC datetime."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when.astimezone(UTC)
