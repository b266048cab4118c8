"""Past runs of a CR, read back from its artifacts: the data behind `history` and `logs`.

The first questions about a misbehaving CR are "did it run, when, did it work, what did
it change, what failed". Every answer is already on disk in the CR's data directory
(`<base>/operator-*/<group>/<version>/<Kind>/<namespace>/<name>/artifacts/<ident>/`:
`job_events/`, `status`, `rc`, `stdout`; `operator-*` is each operator process's own
directory, see `rundir.py`); this module finds the directory from what a user types
(`memcached/x`, `Memcached.cache.example.com/x`) and summarizes each run with the same
rules the reconciler applies to live events (`events.EventCollector`).

Finding the directory needs care because empty path segments are dropped: a core-group
kind has no group directory and a cluster-scoped CR no namespace directory, so
`v1/Secret/ns/s` and `g/v1/Kind/s` both have four parts. Kubernetes object names are
lower case and kinds are CamelCase, which settles it; when nothing does, both readings
are offered and what the user asked for picks one.

Readers only: nothing here writes, and unreadable or half-written runs are reported as
they are (`unfinished`), never raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from runner.ansible.artifacts import RunInfo, find_data_dirs, read_events, read_stdout
from runner.ansible.jobevents import FailedTask, no_stats_reason, summarize
from runner.ansible.rundir import process_dirs

__all__ = [
    "CRDir",
    "Outcome",
    "RunSummary",
    "Target",
    "changed_tasks",
    "cr_dirs",
    "interpret",
    "matches",
    "parse_target",
    "summarize_events",
    "summarize_run",
    "task_lines",
]

Outcome = Literal["successful", "failed", "error", "unfinished"]

_CHANGED_EVENTS = ("runner_on_ok",)
_STOPPED = {
    "canceled": "the run was stopped",
    "timeout": "the run timed out",
}


@dataclass(frozen=True, kw_only=True)
class CRDir:
    """One CR's data directory and the identity its path spells."""

    path: Path
    group: str
    version: str
    kind: str
    namespace: str
    name: str

    @property
    def kind_label(self) -> str:
        """`Kind.group/version` (`Kind/version` for the core group)."""
        kind = f"{self.kind}.{self.group}" if self.group else self.kind
        return f"{kind}/{self.version}"

    @property
    def object_label(self) -> str:
        """`Kind namespace/name` (`Kind name` when cluster-scoped)."""
        key = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {key}"


@dataclass(frozen=True, kw_only=True)
class Target:
    """What the user asked for: `KIND[.GROUP]/NAME` (KIND case-insensitive, or plural)."""

    kind: str
    group: str | None
    name: str


@dataclass(frozen=True, kw_only=True)
class RunSummary:
    """One run as `history` shows it."""

    ident: str
    started: datetime
    ended: datetime | None
    outcome: Outcome
    ok: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    changed_tasks: tuple[str, ...] = ()
    failed_tasks: tuple[FailedTask, ...] = ()
    error: str | None = None
    """Why a run without a result (`error`) has none."""
    status: str | None = None
    """ansible-runner's own status (`successful`, `failed`, `canceled`, ...)."""
    rc: int | None = None

    @property
    def duration(self) -> float | None:
        if self.ended is None:
            return None
        return max(0.0, (self.ended - self.started).total_seconds())


def parse_target(text: str, name: str | None = None) -> Target:
    """`KIND/NAME`, or `KIND` and a separate `name`; ValueError saying what is wrong."""
    kind_part, slash, name_part = text.partition("/")
    if slash and name is not None:
        raise ValueError(f"{text!r} already names the object; drop {name!r}")
    if not slash:
        if name is None:
            raise ValueError(f"{text!r}: expected KIND/NAME (e.g. memcached/example)")
        name_part = name
    if not kind_part or not name_part or "/" in name_part:
        raise ValueError(f"{text!r}: expected KIND/NAME (e.g. memcached/example)")
    kind, dot, group = kind_part.partition(".")
    return Target(kind=kind, group=group if dot else None, name=name_part)


def interpret(parts: Sequence[str]) -> list[tuple[str, str, str, str, str]]:
    """The (group, version, kind, namespace, name) a data directory's path may mean."""
    readings: list[tuple[str, str, str, str, str]] = []
    if len(parts) == 5:
        readings.append((parts[0], parts[1], parts[2], parts[3], parts[4]))
    elif len(parts) == 4:
        grouped = (parts[0], parts[1], parts[2], "", parts[3])
        core = ("", parts[0], parts[1], parts[2], parts[3])
        if _kind_like(parts[2]) and not _kind_like(parts[1]):
            readings.append(grouped)
        elif _kind_like(parts[1]) and not _kind_like(parts[2]):
            readings.append(core)
        else:
            readings += [grouped, core]
    elif len(parts) == 3:
        readings.append(("", parts[0], parts[1], "", parts[2]))
    return readings


def cr_dirs(base: Path) -> list[CRDir]:
    """Every reading of every data directory under `base`: in each operator process's
    directory there, or in `base` itself when it has none (it is one of them, or written
    by an older version)."""
    found: list[CRDir] = []
    for root in process_dirs(base) or [base]:
        found += _cr_dirs_in(root)
    return found


def _cr_dirs_in(base: Path) -> list[CRDir]:
    found: list[CRDir] = []
    for path in find_data_dirs(base):
        parts = path.relative_to(base).parts
        for group, version, kind, namespace, name in interpret(parts):
            found.append(
                CRDir(
                    path=path,
                    group=group,
                    version=version,
                    kind=kind,
                    namespace=namespace,
                    name=name,
                )
            )
    return found


def matches(cr: CRDir, target: Target, *, namespace: str | None = None) -> bool:
    """Whether `cr` is what `target` names (in `namespace`, when given)."""
    if cr.name != target.name:
        return False
    if namespace is not None and cr.namespace != namespace:
        return False
    return kind_matches(cr, target)


def kind_matches(cr: CRDir, target: Target) -> bool:
    """Kind as typed (any case, or a simple plural) and, if given, group or version.group."""
    if target.kind.lower() not in _kind_spellings(cr.kind):
        return False
    if target.group is None:
        return True
    group = target.group.lower()
    return group in (cr.group.lower(), f"{cr.version}.{cr.group}".lower().rstrip("."))


def changed_tasks(events: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """Names of the tasks that reported a change, in order, each once."""
    names: list[str] = []
    for event in events:
        if event.get("event") not in _CHANGED_EVENTS:
            continue
        data = event.get("event_data")
        if not isinstance(data, Mapping):
            continue
        res = data.get("res")
        if not isinstance(res, Mapping) or res.get("changed") is not True:
            continue
        task = data.get("task") or data.get("task_action") or "?"
        if isinstance(task, str) and task not in names:
            names.append(task)
    return tuple(names)


def summarize_events(
    run: RunInfo,
    events: Sequence[Mapping[str, Any]],
    *,
    ended: datetime | None,
    stdout: str = "",
) -> RunSummary:
    """One run's summary from its events, ansible-runner status and output (pure)."""
    result = summarize(events)
    changed = changed_tasks(events)
    if run.status is None:
        return RunSummary(
            ident=run.ident,
            started=run.started,
            ended=None,
            outcome="unfinished",
            changed_tasks=changed,
            failed_tasks=result.failed_tasks,
            rc=run.rc,
        )
    if not result.has_stats:
        reason = _STOPPED.get(run.status) or no_stats_reason(stdout, run.rc)
        return RunSummary(
            ident=run.ident,
            started=run.started,
            ended=ended,
            outcome="error",
            changed_tasks=changed,
            error=reason,
            status=run.status,
            rc=run.rc,
        )
    return RunSummary(
        ident=run.ident,
        started=run.started,
        ended=ended or result.completion,
        outcome="failed" if result.failed else "successful",
        ok=result.ok,
        changed=result.changed,
        skipped=result.skipped,
        failures=result.failures,
        changed_tasks=changed,
        failed_tasks=result.failed_tasks,
        status=run.status,
        rc=run.rc,
    )


def summarize_run(run: RunInfo) -> RunSummary:
    """`summarize_events` with the run's files read from its directory."""
    events = read_events(run)
    stdout = read_stdout(run) if run.status is not None else ""
    return summarize_events(run, events, ended=_ended(run), stdout=stdout)


def task_lines(summary: RunSummary) -> list[str]:
    """The lines under a run in `history` (and `plan`): its changed tasks, each failed
    task with its message, and why a run without a result has none (unmasked)."""
    lines = []
    if summary.changed_tasks:
        lines.append(f"changed: {', '.join(summary.changed_tasks)}")
    for task in summary.failed_tasks:
        lines.append(f"failed: {task.task}: {one_line(task.msg)}")
    if summary.error:
        lines.append(f"error: {one_line(summary.error)}")
    return lines


def one_line(text: str) -> str:
    """`text`'s non-blank lines, stripped and joined by " / "."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines)


# -- internals ------------------------------------------------------------------------


def _kind_like(part: str) -> bool:
    """Kinds are CamelCase; namespaces, names and versions are lower case."""
    return part[:1].isupper()


def _kind_spellings(kind: str) -> set[str]:
    lowered = kind.lower()
    spellings = {lowered, f"{lowered}s", f"{lowered}es"}
    if lowered.endswith("y"):
        spellings.add(f"{lowered[:-1]}ies")
    return spellings


def _ended(run: RunInfo) -> datetime | None:
    """When ansible-runner wrote the final `status` file."""
    try:
        return datetime.fromtimestamp((run.path / "status").stat().st_mtime, tz=UTC)
    except OSError:
        return None
