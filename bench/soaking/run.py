"""One soak, start to end.

1. A private cluster (its own state directory), the CRD, the project, the replicas.
2. The CRs created; every one Successful.
3. The first quiet period; then each replica's resources (the baseline).
4. The chaos window: the workload and the faults of the schedule, together.
5. The end: no new fault, the workload stopped and the population trimmed back to
   `crs`; every replica running again; every CR
   converged (or the convergence timeout); a last quiet period; the resources again.
6. The invariants, over the run log, the operators' logs, the API's state, the Lease
   observations and both resource snapshots; the table, the JSON results, the chart.

Everything started is stopped and the private cluster removed, also when the soak fails
or is interrupted; the work directory (logs, run log, results) is kept when it failed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kubernetes import client

from . import invariants, report, runlog, schedule, timeline
from .cluster import NAMESPACE, SoakCluster
from .faults import Injector
from .invariants import CR, Check, Deleted, Life, Resources
from .observe import LeaseObserver, Sampler, Snapshot, snapshot
from .project import GROUP, PLURAL, VERSION, write_project
from .replicas import Replica, ReplicaOptions, Replicas
from .workload import Workload

Print = Callable[[str], None]

QUIET = 35.0
"""Seconds of a quiet period. Longer than an idle pooled API connection can live: the
operator's aiohttp pool closes connections idle for 15 s, but looks for them only every
15 s, so one released just after a look lives up to 30 s (31 with its timer rounded up);
with less, the fd count at rest depends on when the last requests happened."""


@dataclass(frozen=True)
class SoakConfig:
    seed: int
    crs: int = 200
    chaos: float = 120.0
    """Seconds of workload and faults."""
    quiet: float = QUIET
    replicas: int = 3
    sharding: bool = False
    burst: int = 200
    rate: float = 2.0
    """Workload operations per second."""
    faults: int | None = None
    """How many faults (default: one per 12 s of chaos, at least one of each kind)."""
    converge_timeout: float = 600.0
    work_dir: Path | None = None
    keep: bool = False
    results: Path | None = None
    chart: Path | None = None
    replica_options: ReplicaOptions = field(default_factory=lambda: ReplicaOptions(sharding=False))

    def replay(self) -> str:
        """The command that replays this soak's schedule."""
        args = [
            f"--seed {self.seed}",
            f"--crs {self.crs}",
            f"--chaos {self.chaos:g}",
            f"--replicas {self.replicas}",
            f"--burst {self.burst}",
        ]
        if self.faults is not None:
            args.append(f"--faults {self.faults}")
        if self.sharding:
            args.append("--sharding")
        return "python bench/soak.py " + " ".join(args)


def rundir_size(crs: int) -> str:
    """A run directory's tmpfs for `crs` CRs: a CR's data directory (its last runs'
    artifacts) takes about 120 KiB, and bursts take the population to 1.5 times `crs`
    and more; 64 MiB at least. Only what is written takes memory."""
    return f"{max(64, -(-crs // 4))}m"


@dataclass
class SoakOutcome:
    passed: bool
    checks: list[Check]
    results: dict[str, Any]
    work_dir: Path


class Soak:
    def __init__(self, config: SoakConfig, *, say: Print = print) -> None:
        options = config.replica_options
        self.config = replace(
            config,
            replica_options=replace(
                options,
                sharding=config.sharding,
                rundir_size=options.rundir_size or rundir_size(config.crs),
            ),
        )
        self._say = say
        self.token = uuid.uuid4().hex[:10]
        self.start = time.time()
        self.events: list[tuple[float, str, str]] = []
        self.times: dict[str, float] = {"start": self.start}

    # -- output -----------------------------------------------------------------------

    def say(self, text: str) -> None:
        self._say(f"[soak {time.time() - self.start:7.1f} s] {text}")

    def on_event(self, source: str, text: str) -> None:
        self.events.append((time.time(), source, text))
        self.say(f"{source}: {text}")

    # -- the phases ---------------------------------------------------------------------

    def run(self) -> SoakOutcome:
        c = self.config
        work = c.work_dir or Path(tempfile.mkdtemp(prefix=f"soak-{c.seed}-"))
        work.mkdir(parents=True, exist_ok=True)
        if (work / "runs.log").exists():
            # Its runs would be checked with this soak's (a reused --work-dir).
            raise ValueError(f"--work-dir {work}: holds an earlier soak's runs.log; use another")
        names = [chr(ord("a") + index) for index in range(c.replicas)]
        faults = schedule.draw(
            c.seed, window=c.chaos, replicas=names, burst=c.burst, count=c.faults
        )
        self.say(f"seed {c.seed}; replay: {c.replay()}")
        self.say(
            f"{c.replicas} replicas ({'sharding' if c.sharding else 'leader election'}), "
            f"{c.crs} CRs, {c.chaos:g} s of chaos, {len(faults)} faults "
            f"({schedule.overlapping_pairs(faults)} overlapping pairs); work dir {work}"
        )
        self.say("schedule:\n" + schedule.render(faults))
        passed = False
        with contextlib.ExitStack() as stack:
            cluster = SoakCluster(work / "cluster")
            stack.callback(self._cleanup, cluster, work, lambda: passed)
            self.say("starting the private cluster")
            cluster.up(progress=lambda message: None)
            cluster.prepare()
            project = write_project(work / "project", run_log=work / "runs.log")
            replicas = Replicas()
            stack.callback(replicas.stop)
            for name in names:
                replicas.by_name[name] = Replica(
                    name,
                    root=work / "replicas",
                    project=project,
                    admin_kubeconfig=cluster.kubeconfig,
                    token=self.token,
                    options=self.config.replica_options,
                    on_event=self.on_event,
                )
            sampler = Sampler(replicas)
            sampler.start()
            stack.callback(sampler.stop)
            observer = None
            if not c.sharding:
                observer = LeaseObserver(cluster)
                observer.start()
                stack.callback(observer.stop)
            for replica in replicas:
                replica.start()
            self._wait_for_holders(replicas)
            workload = Workload(
                cluster.client, target=c.crs, rate=c.rate, seed=c.seed, on_event=self.on_event
            )
            made = workload.create_many(c.crs)
            self.say(f"created {made} CRs")
            self.times["populated"] = time.time()
            self._converge(cluster, workload, work)
            self.say(f"first quiet period: {c.quiet:g} s")
            time.sleep(c.quiet)
            baseline = self._snapshots(cluster, replicas)
            self.times["chaos_start"] = time.time()
            injector = Injector(
                faults,
                cluster=cluster,
                replicas=replicas,
                workload=workload,
                sharding=c.sharding,
                seed=c.seed,
                on_event=self.on_event,
            )
            workload.start()
            injector.start()
            try:
                time.sleep(c.chaos)
            finally:
                injector.stop()
                workload.stop()
            self.times["chaos_end"] = time.time()
            workload.trim()
            self._wait_for_holders(replicas)
            converged = self._converge(cluster, workload, work)
            self.times["converged"] = time.time()
            self.say(f"last quiet period: {c.quiet:g} s")
            time.sleep(c.quiet)
            end = self._snapshots(cluster, replicas)
            crs = self._crs(cluster)
            self.times["end"] = time.time()
            sampler.stop()
            if observer is not None:
                observer.stop()
            replicas.stop()
            checks, results = self._check(
                work=work,
                replicas=replicas,
                injector=injector,
                workload=workload,
                observer=observer,
                sampler=sampler,
                baseline=baseline,
                end=end,
                crs=crs,
                faults=faults,
                converged=converged,
            )
            passed = all(check.passed for check in checks)
        return SoakOutcome(passed=passed, checks=checks, results=results, work_dir=work)

    def _cleanup(self, cluster: SoakCluster, work: Path, passed: Callable[[], bool]) -> None:
        try:
            cluster.down()
        finally:
            if passed() and not self.config.keep and self.config.work_dir is None:
                shutil.rmtree(work, ignore_errors=True)
            else:
                self.say(f"kept the work directory {work} (logs, run log, results)")

    def _wait_for_holders(self, replicas: Replicas, timeout: float = 300.0) -> None:
        """Until every replica runs and (sharding) holds its Lease, or (election) one of
        them holds the Lease."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = [r.current() for r in replicas]
            alive = [i for i in current if i is not None and i.alive()]
            holding = [i for i in alive if i.oplog().holding_from is not None]
            want = len(current) if self.config.sharding else 1
            if len(alive) == len(current) and len(holding) >= want:
                self.say(
                    "replicas: " + ", ".join(f"{i.id}{'*' if i in holding else ''}" for i in alive)
                )
                return
            time.sleep(1)
        raise TimeoutError(f"the replicas did not start within {timeout:.0f} s")

    def _crs(self, cluster: SoakCluster) -> list[dict[str, Any]]:
        api = client.CustomObjectsApi(cluster.api)
        for attempt in range(60):
            try:
                answer = api.list_namespaced_custom_object(GROUP, VERSION, NAMESPACE, PLURAL)
                return list(answer["items"])
            except Exception:
                if attempt == 59:
                    raise
                time.sleep(2)
        return []

    def _converge(self, cluster: SoakCluster, workload: Workload, work: Path) -> bool:
        """Until the checks on the CRs pass (or the timeout); whether they did."""
        deadline = time.monotonic() + self.config.converge_timeout
        began, said = time.monotonic(), 0.0
        while True:
            crs = [_cr(item) for item in self._crs(cluster)]
            log = runlog.read(work / "runs.log")
            now = time.time()
            existing = invariants.existing_successful(crs, log, namespace=NAMESPACE, now=now)
            present = {cr.uid for cr in crs}
            lingering = [d for d in _deleted(workload) if d.uid in present]
            waiting = len({v.key for v in existing.violations})
            pending = waiting + len(lingering)
            if not pending:
                self.say(f"converged: {len(crs)} CRs in {time.monotonic() - began:.0f} s")
                return True
            if time.monotonic() > deadline:
                self.say(f"not converged after {self.config.converge_timeout:.0f} s: {pending} CRs")
                return False
            if time.monotonic() - said > 30:
                said = time.monotonic()
                self.say(
                    f"converging: {waiting} of {len(crs)} CRs not done, "
                    f"{len(lingering)} deleted ones still there"
                )
            time.sleep(3)

    def _snapshots(self, cluster: SoakCluster, replicas: Replicas) -> dict[str, Snapshot]:
        existing = {f"{NAMESPACE}/{item['metadata']['name']}" for item in self._crs(cluster)}
        found = {r.name: snapshot(r, existing=existing, token=self.token) for r in replicas}
        for state in found.values():
            self.say(
                f"{state.replica} ({state.incarnation}{', holding' if state.holding else ''}): "
                f"RSS {state.rss_mib:.0f} MiB, {state.fds} fds, {len(state.procs)} processes "
                f"({state.zygotes} zygotes), {state.process_dirs} run directories"
            )
        return found

    def _check(
        self,
        *,
        work: Path,
        replicas: Replicas,
        injector: Injector,
        workload: Workload,
        observer: LeaseObserver | None,
        sampler: Sampler,
        baseline: dict[str, Snapshot],
        end: dict[str, Snapshot],
        crs: list[dict[str, Any]],
        faults: list[schedule.Fault],
        converged: bool,
    ) -> tuple[list[Check], dict[str, Any]]:
        c = self.config
        log = runlog.read(work / "runs.log")
        lives = {i.id: _life(i) for i in replicas.incarnations()}
        zygote_kills = [
            (i.target, i.struck or i.began)
            for i in injector.injected
            if i.fault.kind == schedule.ZYGOTE and not i.skipped
        ]
        lease_seen = [(s.asked, s.answered, s.holder) for s in observer.seen] if observer else []
        now = time.time()
        the_crs = [_cr(item) for item in crs]
        deleted = _deleted(workload)
        checks = [
            invariants.existing_successful(the_crs, log, namespace=NAMESPACE, now=now),
            invariants.deleted_finalized_once(
                deleted, the_crs, log, lives, namespace=NAMESPACE, now=now
            ),
            invariants.no_overlaps(log, lives, zygote_kills),
            invariants.runs_while_holding(log, lives, sharding=c.sharding, lease_seen=lease_seen),
            invariants.no_leaks(_resources(baseline), _resources(end), now=now),
            invariants.rss_bounded(_resources(baseline), _resources(end), now=now),
            invariants.no_tracebacks(lives.values()),
        ]
        scheduled = Counter(f.kind for f in faults)
        injected = injector.counts()
        fault_json = [i.to_json() for i in injector.injected]
        ops = [(op.at, op.op, op.name, op.detail) for op in workload.population.ops]
        self._say("\nfaults:\n" + report.fault_table(scheduled, injected))
        self._say("\ninvariants:\n" + report.invariant_table(checks))
        system = timeline.system_events(lives.values(), fault_json)
        for check in checks:
            for violation in check.violations[:5]:
                self._say(f"\n{check.name}: {violation.text} ({violation.key or 'system'})")
                of_cr = (
                    timeline.cr_events(violation.key, log, lives, zygote_kills, ops)
                    if violation.key
                    else []
                )
                events = timeline.around(violation, system, of_cr)
                self._say(timeline.render(events, origin=self.start))
            if len(check.violations) > 5:
                self._say(f"... and {len(check.violations) - 5} more")
        p = workload.population
        results: dict[str, Any] = {
            "config": {
                "seed": c.seed,
                "crs": c.crs,
                "chaos_s": c.chaos,
                "quiet_s": c.quiet,
                "replicas": c.replicas,
                "sharding": c.sharding,
                "burst": c.burst,
                "rate": c.rate,
                "replica_options": asdict(self.config.replica_options),
                "replay": c.replay(),
            },
            "passed": converged and all(check.passed for check in checks),
            "converged": converged,
            "times": self.times,
            "load_average": os.getloadavg(),
            "schedule": [f.to_json() for f in faults],
            "faults": fault_json,
            "fault_counts": {"scheduled": dict(scheduled), "injected": dict(injected)},
            "workload": {
                "creates": p.creates,
                "updates": p.updates,
                "deletes": p.deletes,
                "given_up": p.failed,
            },
            "runs": {
                "total": len(log.runs),
                "cut_short": sum(1 for r in log.runs if r.ended is None),
                "failed": sum(1 for r in log.runs if r.failed),
            },
            "incarnations": [
                {
                    "id": i.id,
                    "started": i.started,
                    "exited": i.exited,
                    "code": i.code,
                    "signalled": i.signalled,
                }
                for i in replicas.incarnations()
            ],
            "checks": [
                {
                    "name": check.name,
                    "passed": check.passed,
                    "summary": check.summary,
                    "violation_count": len(check.violations),
                    "violations": [asdict(v) for v in check.violations[:50]],
                }
                for check in checks
            ],
            "baseline": {name: s.to_json() for name, s in baseline.items()},
            "end": {name: s.to_json() for name, s in end.items()},
            "samples": [asdict(point) for point in sampler.points],
            "load_samples": [[round(at, 1), load] for at, load in sampler.load],
        }
        step = 5.0 if c.chaos >= 900 else 1.0
        self._say(f"\nCPU and RSS over time ({step:g}-minute windows):\n")
        self._say(report.over_time(results, step=step))
        destination = c.results or work / "soak.json"
        report.write_json(destination, results)
        self.say(f"results: {destination}")
        if c.chart is not None:
            report.draw(results, c.chart)
            self.say(f"chart: {c.chart}")
        if not converged:
            checks.insert(
                0,
                Check(
                    name="converged before the timeout",
                    passed=False,
                    summary=f"not within {c.converge_timeout:.0f} s",
                ),
            )
        return checks, results


def _cr(item: dict[str, Any]) -> CR:
    meta = item["metadata"]
    conditions = (item.get("status") or {}).get("conditions") or []
    successful = any(
        cond.get("type") == "Successful" and cond.get("status") == "True" for cond in conditions
    )
    return CR(
        name=meta["name"],
        uid=meta["uid"],
        generation=int(meta.get("generation") or 0),
        successful=successful,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def _deleted(workload: Workload) -> list[Deleted]:
    return [
        Deleted(name=name, uid=uid, at=at)
        for name, (uid, at) in list(workload.population.deleted.items())
    ]


def _life(incarnation: Any) -> Life:
    log = incarnation.oplog()
    return Life(
        id=incarnation.id,
        replica=incarnation.replica,
        started=incarnation.started,
        exited=incarnation.exited,
        gone=incarnation.gone,
        identity=log.identity,
        holding_from=log.holding_from,
        lost_at=log.lost_at,
        run_ends=log.run_ends,
        run_errors=log.run_errors,
        finalizer_removed=log.finalizer_removed,
        stopped=log.stopped,
        tracebacks=log.tracebacks,
        log=str(incarnation.log),
    )


def _resources(snapshots: dict[str, Snapshot]) -> dict[str, Resources]:
    found = {}
    for name, state in snapshots.items():
        others = state.procs[state.zygotes :]  # the zygotes come first
        found[name] = Resources(
            replica=name,
            incarnation=state.incarnation,
            holding=state.holding,
            rss_mib=state.rss_mib,
            fds=state.fds,
            others=others,
            zygotes=state.zygotes,
            process_dirs=state.process_dirs,
            stale_data_dirs=state.stale_data_dirs,
            unfinished_runs=state.unfinished_runs,
            leftovers=state.leftovers,
        )
    return found
