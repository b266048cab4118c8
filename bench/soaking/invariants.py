"""The invariants checked at the end of a soak, over what was recorded (pure).

Each check returns a `Check`: passed or not, one line of summary, and the violations,
each with the moment it happened and the CR it concerns, for the events around it.

How runs are counted:

- a run's interval is its `start` record to its `end` record; a run without an end (its
  process was killed) ends at the first of: the end of that reconcile in its operator's
  log, a kill of its replica's zygote, its operator's manager logging that it stopped
  (a lost Lease cuts runs off: they are killed and reaped before that line), the moment
  no process of its operator process was left (`Life.gone`). A run with none of these,
  whose operator still runs, never ended: a violation;
- a finalizer run *completes* when it records an end without a failed task; a CR that
  was deleted must have exactly one completed finalizer run — runs killed before their
  end, or that failed, and were then run again, are not completions. One exception, as
  no operator can do better: a completion whose process never removed the finalizer
  (the API server was away, then its Lease was lost, or it was killed) and gave the CR
  up before the next finalizer run began; the role's end and the finalizer's removal
  cannot be one atomic step, so the process that takes over must run it again;
- a run *starts while holding the lease* when its start lies between its operator
  process's "became the leader" (or "joined the ring") and its "lost the lease" or exit,
  when no observation of the Lease made after the process became the leader and
  answered before the run started named another holder, and, with sharding, when the CR
  it ran on carried its replica's member name as its shard label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .runlog import FINALIZE, RECONCILE, Run, RunLog

RSS_GROWTH = 0.10
FD_SLACK = 10
"""fds an operator may hold beyond its reference (pooled API connections come and go)."""
MAX_ZYGOTES = 2
"""The fast backend keeps at most this many zygotes (one per distinct run environment)."""


@dataclass(frozen=True)
class Life:
    """One operator process (incarnation) as the checks need it."""

    id: str
    replica: str
    started: float
    exited: float | None
    gone: float | None
    identity: str = ""
    holding_from: float | None = None
    lost_at: float | None = None
    run_ends: Mapping[str, Sequence[float]] = field(default_factory=dict)
    run_errors: Mapping[str, Sequence[float]] = field(default_factory=dict)
    finalizer_removed: Mapping[str, Sequence[float]] = field(default_factory=dict)
    stopped: Sequence[float] = ()
    tracebacks: Sequence[str] = ()
    log: str = ""

    def end_after(self, key: str, when: float) -> float | None:
        later = [t for t in self.run_ends.get(key, ()) if t >= when]
        return min(later) if later else None


@dataclass(frozen=True)
class CR:
    name: str
    uid: str
    generation: int
    successful: bool
    deleting: bool


@dataclass(frozen=True)
class Deleted:
    name: str
    uid: str
    at: float


@dataclass(frozen=True)
class Violation:
    at: float
    key: str
    text: str


@dataclass
class Check:
    name: str
    passed: bool
    summary: str
    violations: list[Violation] = field(default_factory=list)


def _check(name: str, violations: list[Violation], summary: str) -> Check:
    return Check(name=name, passed=not violations, summary=summary, violations=violations)


def _key(name: str, namespace: str) -> str:
    return f"{namespace}/{name}"


# -- the CRs ----------------------------------------------------------------------------


def existing_successful(crs: Iterable[CR], log: RunLog, *, namespace: str, now: float) -> Check:
    """Every CR that exists is Successful, and the last run of it that completed saw its
    latest generation."""
    violations, count = [], 0
    for cr in crs:
        count += 1
        key = _key(cr.name, namespace)
        if cr.deleting:
            violations.append(Violation(now, key, "still being deleted at the end"))
            continue
        completed = [r for r in log.of(cr.uid, RECONCILE) if r.completed]
        last = max(completed, key=lambda r: r.ended or 0.0, default=None)
        if not cr.successful:
            violations.append(Violation(now, key, "not Successful"))
        if last is None:
            violations.append(Violation(now, key, "no completed run recorded"))
        elif last.generation != cr.generation:
            violations.append(
                Violation(
                    last.ended or now,
                    key,
                    f"its last completed run saw generation {last.generation}, "
                    f"it is at {cr.generation}",
                )
            )
    return _check(
        "existing CRs Successful at their latest generation",
        violations,
        f"{count} CRs",
    )


def deleted_finalized_once(
    deleted: Iterable[Deleted],
    crs: Iterable[CR],
    log: RunLog,
    lives: Mapping[str, Life],
    *,
    namespace: str,
    now: float,
) -> Check:
    """Every deleted CR is gone, and its finalizer role completed exactly once — or, when
    the process that completed it could not remove the finalizer (it lost the API server
    or its Lease first, and gave the CR up), once more by the process that took over."""
    present = {cr.uid for cr in crs}
    violations, count, redone, uncommitted = [], 0, 0, 0
    for gone in deleted:
        count += 1
        key = _key(gone.name, namespace)
        if gone.uid in present:
            violations.append(Violation(now, key, "deleted, but still there"))
        runs = log.of(gone.uid, FINALIZE)
        completions = sorted((r for r in runs if r.completed), key=lambda r: r.ended or 0.0)
        if not completions:
            violations.append(
                Violation(gone.at, key, f"finalizer never completed ({len(runs)} runs)")
            )
            continue
        if len(runs) > len(completions):
            redone += 1
        for done in completions[:-1]:
            why = _why_again(done, runs, lives.get(done.incarnation), key)
            if not why:
                uncommitted += 1
                continue
            violations.append(
                Violation(
                    done.ended or done.started,
                    key,
                    f"finalizer completed {len(completions)} times; again after the one on "
                    f"{done.incarnation}, {why}",
                )
            )
    return _check(
        "deleted CRs finalized exactly once and gone",
        violations,
        f"{count} deleted; {redone} finalized again after a run was cut short or failed, "
        f"{uncommitted} after a completed run whose finalizer removal was lost",
    )


def _why_again(done: Run, runs: Sequence[Run], life: Life | None, key: str) -> str:
    """Empty when the completed finalizer run `done` could not be committed: its process
    never removed the finalizer after it, and stopped holding its Lease before the next
    finalizer run of the CR began; else what makes running the role again a fault."""
    if life is None or done.ended is None:
        return "whose process is unknown"
    later = [r.started for r in runs if r.started > done.ended]
    following = min(later, default=float("inf"))
    if any(done.ended <= t < following for t in life.finalizer_removed.get(key, ())):
        return "which removed the finalizer"
    if any(done.ended <= t < following for t in life.run_errors.get(key, ())):
        # The role ended, but its operator could not take its result (a disk-full run
        # directory): the finalizer stays and the retry runs the role again, as it must.
        return ""
    stopped = min(t for t in (life.lost_at, life.exited, float("inf")) if t is not None)
    if later and stopped <= min(later):
        return ""
    return "which still held its Lease when the role ran again"


# -- runs in time ---------------------------------------------------------------------


def run_end(run: Run, life: Life | None, zygote_kills: Sequence[tuple[str, float]]) -> float | None:
    """When `run` ended at the latest (see the module docstring); None: it never did."""
    if run.ended is not None:
        return run.ended
    if life is None:
        return None
    candidates = [t for inc, t in zygote_kills if inc == run.incarnation and t >= run.started]
    logged = life.end_after(run.key, run.started)
    if logged is not None:
        candidates.append(logged)
    candidates.extend(t for t in life.stopped if t >= run.started)
    if life.gone is not None:
        candidates.append(life.gone)
    return min(candidates) if candidates else None


def no_overlaps(
    log: RunLog,
    lives: Mapping[str, Life],
    zygote_kills: Sequence[tuple[str, float]],
) -> Check:
    """No two runs of one CR (any phase, any replica) were in flight at the same time,
    and every run ended."""
    violations: list[Violation] = []
    by_uid: dict[str, list[tuple[float, float, Run]]] = {}
    cut_short = 0
    for run in log.runs:
        life = lives.get(run.incarnation)
        end = run_end(run, life, zygote_kills)
        if run.ended is None:
            cut_short += 1
        if end is None:
            if life is not None and life.exited is not None and life.gone is None:
                text = f"run {run.run}: its operator exited, but a process of it stayed"
            else:
                text = f"run {run.run} on {run.incarnation} never ended"
            violations.append(Violation(run.started, run.key, text))
            continue
        by_uid.setdefault(run.uid, []).append((run.started, end, run))
    for spans in by_uid.values():
        spans.sort(key=lambda span: span[0])
        latest_end, latest = spans[0][1], spans[0][2]
        for start, end, run in spans[1:]:
            if start < latest_end:
                violations.append(
                    Violation(
                        start,
                        run.key,
                        f"{run.phase} run on {run.incarnation} started "
                        f"{latest_end - start:.2f} s before the {latest.phase} run on "
                        f"{latest.incarnation} ended",
                    )
                )
            if end > latest_end:
                latest_end, latest = end, run
    if log.unreadable:
        violations.append(Violation(0.0, "", f"{log.unreadable} unreadable run-log lines"))
    return _check(
        "no two runs of a CR at once, every run ended",
        violations,
        f"{len(log.runs)} runs of {len(by_uid)} CRs; {cut_short} cut short by a fault",
    )


def runs_while_holding(
    log: RunLog,
    lives: Mapping[str, Life],
    *,
    sharding: bool,
    lease_seen: Sequence[tuple[float, float, str]] = (),
) -> Check:
    """Every run started while its operator process held its Lease (and, sharded, the
    CR's shard). `lease_seen`: (asked, answered, holder) observations of the election's
    Lease."""
    violations: list[Violation] = []
    other_holder_seen: dict[str, float] = {}
    if not sharding:
        for life in lives.values():
            if life.holding_from is None or not life.identity:
                continue
            later = [
                answered
                for asked, answered, holder in lease_seen
                if asked > life.holding_from and holder != life.identity
            ]
            if later:
                other_holder_seen[life.id] = min(later)
    for run in log.runs:
        life = lives.get(run.incarnation)
        if life is None:
            violations.append(Violation(run.started, run.key, f"unknown process {run.incarnation}"))
            continue
        what = "shard" if sharding else "lease"
        if life.holding_from is None or run.started < life.holding_from:
            violations.append(
                Violation(
                    run.started,
                    run.key,
                    f"{run.incarnation} started a run before it held its {what}",
                )
            )
            continue
        ended = min(t for t in (life.lost_at, life.exited, float("inf")) if t is not None)
        if run.started > ended:
            violations.append(
                Violation(
                    run.started,
                    run.key,
                    f"{run.incarnation} started a run after it lost its {what}",
                )
            )
        seen = other_holder_seen.get(life.id)
        if seen is not None and run.started > seen:
            violations.append(
                Violation(
                    run.started,
                    run.key,
                    f"{run.incarnation} started a run {run.started - seen:.2f} s after the "
                    "Lease was seen held by another",
                )
            )
        if sharding and run.shard != life.identity:
            violations.append(
                Violation(
                    run.started,
                    run.key,
                    f"{run.incarnation} (member {life.identity}) ran a CR of shard "
                    f"{run.shard or '(none)'}",
                )
            )
    observed = f"; {len(lease_seen)} Lease observations" if lease_seen else ""
    return _check(
        "runs started only while holding the " + ("shard" if sharding else "lease"),
        violations,
        f"{len(log.runs)} runs on {len({r.incarnation for r in log.runs})} processes{observed}",
    )


# -- the replicas' resources ----------------------------------------------------------


@dataclass(frozen=True)
class Resources:
    """One replica's resources at a moment (`observe.Snapshot`, as the checks need it)."""

    replica: str
    incarnation: str
    holding: bool
    rss_mib: float
    fds: int
    others: Sequence[str]
    """Processes below the operator other than its zygotes."""
    zygotes: int
    process_dirs: int
    stale_data_dirs: Sequence[str]
    unfinished_runs: Sequence[str]
    leftovers: Sequence[str]


def _reference(replica: str, holding: bool, baseline: Mapping[str, Resources]) -> Resources | None:
    """What an end state is compared with: the replica's own first-quiet state when it
    has the same role (holding its Lease or standing by) as then, else the state of a
    replica that had that role then (the largest)."""
    own = baseline.get(replica)
    if own is not None and own.holding == holding:
        return own
    same = [b for b in baseline.values() if b.holding == holding]
    return max(same, key=lambda b: b.rss_mib, default=None)


def no_leaks(
    baseline: Mapping[str, Resources], end: Mapping[str, Resources], *, now: float
) -> Check:
    violations: list[Violation] = []
    parts = []
    for name, state in sorted(end.items()):
        if not state.incarnation:
            violations.append(Violation(now, "", f"replica {name} not running at the end"))
            continue
        where = f"{name} ({state.incarnation})"
        for leftover in state.leftovers:
            violations.append(Violation(now, "", f"{where}: an earlier process's {leftover}"))
        for other in state.others:
            violations.append(Violation(now, "", f"{where}: process {other} at rest"))
        if state.zygotes > MAX_ZYGOTES:
            violations.append(Violation(now, "", f"{where}: {state.zygotes} zygotes"))
        if state.process_dirs != 1:
            violations.append(
                Violation(now, "", f"{where}: {state.process_dirs} process run directories")
            )
        for key in state.stale_data_dirs:
            violations.append(Violation(now, key, f"{where}: data directory of a deleted CR"))
        for run in state.unfinished_runs:
            violations.append(Violation(now, run.split()[0], f"{where}: unfinished run {run}"))
        reference = _reference(name, state.holding, baseline)
        if reference is not None and state.fds > reference.fds + FD_SLACK:
            violations.append(
                Violation(
                    now,
                    "",
                    f"{where}: {state.fds} fds, {reference.fds} after the first quiet period",
                )
            )
        before = baseline.get(name)
        parts.append(
            f"{name}: fds {before.fds if before else '-'}->{state.fds}, "
            f"zygotes {before.zygotes if before else '-'}->{state.zygotes}"
        )
    return _check("no leaked process, run directory, fd or zygote", violations, "; ".join(parts))


def rss_bounded(
    baseline: Mapping[str, Resources], end: Mapping[str, Resources], *, now: float
) -> Check:
    violations: list[Violation] = []
    parts = []
    for name, state in sorted(end.items()):
        reference = _reference(name, state.holding, baseline)
        if reference is None or not state.incarnation or not reference.rss_mib:
            parts.append(f"{name}: no reference")
            continue
        ratio = state.rss_mib / reference.rss_mib
        parts.append(f"{name} {reference.rss_mib:.0f}->{state.rss_mib:.0f} MiB ({ratio - 1:+.0%})")
        if ratio > 1 + RSS_GROWTH:
            violations.append(
                Violation(
                    now,
                    "",
                    f"{name} ({state.incarnation}): RSS {state.rss_mib:.0f} MiB, "
                    f"{ratio - 1:+.0%} over {reference.rss_mib:.0f} MiB after the first quiet "
                    "period",
                )
            )
    return _check(
        f"RSS at the end within {RSS_GROWTH:.0%} of the first quiet period",
        violations,
        "; ".join(parts),
    )


def no_tracebacks(lives: Iterable[Life]) -> Check:
    violations = []
    count = 0
    for life in lives:
        count += 1
        for line in life.tracebacks:
            violations.append(Violation(life.started, "", f"{life.id} ({life.log}): {line[:300]}"))
    return _check("no traceback in any log", violations, f"{count} operator logs")
