"""Memory-aware concurrency: start no Ansible run that would take the operator's cgroup
over a safe part of its memory limit (the engine's `AdmissionLimiter` asks `RunMemory`).

What is measured. Every `interval` seconds while runs are in flight, the operator's
process tree is walked: a process whose working directory is a run's `project`
directory (`<base>/<group>/<version>/<kind>/<namespace>/<name>/project`, where both
backends start `ansible-playbook`, and where its forks stay) is the root of a run, and
the run's memory is its tree's (`runner.util.memlimit.tree_memory`). Each run's peak
private memory (USS: what it adds to the cgroup; a run forked from a warm zygote shares
the zygote's pages) becomes, when the run ends, the estimate of its controller's next
run: up at once to a higher peak, down slowly (a fifth of the way per run) after a
lower one. Until a controller's first run is measured its estimate is the largest
known, else `default_estimate`.

What is admitted. One more run of controller `c` fits when

    working set + sum over controllers of (runs admitted x estimate - measured now)+
                + estimate(c)  <=  fraction x limit

the working set being the cgroup's (`CgroupMemory.usage`: it holds the operator, its
zygotes and the runs measured so far), the second term the memory that admitted runs are
expected to take still (a run just admitted has not grown yet). The engine always
admits one run when none runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runner.engine.limiter import AdmissionLimiter
from runner.observability.metrics import MemoryMetrics
from runner.structs import GVK
from runner.util.memlimit import CgroupMemory, TreeMemory, cgroup_memory, children, tree_memory

log = logging.getLogger("ansible-operator.memory")

__all__ = ["DEFAULT_RUN_ESTIMATE", "RunMemory", "RunSample", "memory_limiter"]

MIB = 1 << 20
DEFAULT_RUN_ESTIMATE = 64 * MIB
"""A run's memory before any is measured: above what the runs of small roles take
(10-40 MiB of their own when forked from a warm zygote), so the first burst is careful."""

_DOWN = 0.2  # how far an estimate moves toward a lower peak per run
_PROC = Path("/proc")


@dataclass
class RunSample:
    """One run seen by the sampler: its controller, memory now and at its peak."""

    controller: str
    now: TreeMemory
    peak: TreeMemory = field(default_factory=TreeMemory)


class RunMemory:
    """The `Admission` of the memory limit, and the sampler that feeds it."""

    def __init__(
        self,
        base_dir: Path,
        *,
        cgroup: CgroupMemory,
        fraction: float,
        metrics: MemoryMetrics | None = None,
        default_estimate: int = DEFAULT_RUN_ESTIMATE,
        interval: float = 0.25,
        pid: int | None = None,
        proc: Path = _PROC,
    ) -> None:
        self._base = base_dir.resolve()
        self._cgroup = cgroup
        self.budget = int(cgroup.limit * fraction)
        self._metrics = metrics
        self._default = default_estimate
        self._interval = interval
        self._pid = os.getpid() if pid is None else pid
        self._proc = proc
        self._kinds: dict[Path, str] = {}  # <base>/<group>/<version>/<kind> -> controller
        self.estimates: dict[str, int] = {}
        self.runs: dict[int, RunSample] = {}  # by root pid, as last sampled
        self.peaks: list[tuple[str, TreeMemory]] = []  # of the runs that ended (the latest 1000)
        self.in_flight: Callable[[], int] = lambda: 0
        """How many reconciles are admitted now (the limiter's count, set by its owner)."""
        self._wake = asyncio.Event()
        self._last_reason = ""
        if metrics is not None:
            metrics.limit.set(cgroup.limit)
            metrics.budget.set(self.budget)

    # -- set-up ------------------------------------------------------------------------

    def watch(self, name: str, gvk: GVK) -> None:
        """Runs of the kind `gvk` are those of controller `name`."""
        parts = [part for part in (gvk.group, gvk.version, gvk.kind) if part]
        self._kinds[self._base.joinpath(*parts)] = name

    def estimate(self, name: str) -> int:
        known = self.estimates.get(name)
        if known is not None:
            return known
        return max(self.estimates.values(), default=self._default)

    # -- the Admission -----------------------------------------------------------------

    def admits(self, name: str, running: Mapping[str, int]) -> bool:
        self._wake.set()
        usage = self._cgroup.usage()
        if usage is None:
            return True  # cannot measure: do not hold anything back
        measured: dict[str, int] = {}
        for run in self.runs.values():
            measured[run.controller] = measured.get(run.controller, 0) + run.now.uss
        expected = sum(
            max(0, count * self.estimate(controller) - measured.get(controller, 0))
            for controller, count in running.items()
        )
        need = self.estimate(name)
        fits = usage + expected + need <= self.budget
        if not fits:
            self._last_reason = (
                f"memory: {_mib(usage)} in use, {_mib(expected)} expected for the runs "
                f"starting, {_mib(need)} for one more run of {name}; the budget is "
                f"{_mib(self.budget)} ({_mib(self._cgroup.limit)} limit)"
            )
        return fits

    def why_not(self, name: str) -> str:
        return self._last_reason or f"memory budget of {_mib(self.budget)} for {name}"

    # -- sampling ----------------------------------------------------------------------

    async def run(self) -> None:
        """Sample while runs are in flight, until cancelled."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._interval * 4)
            self._wake.clear()
            while self.in_flight() or self.runs:
                try:
                    found = await asyncio.to_thread(self.sample)
                except Exception:  # a sampler bug must never stop the operator
                    log.exception("sampling the memory of runs failed")
                    found = {}
                self.update(found)
                await asyncio.sleep(self._interval)
            self.update({})

    def sample(self) -> dict[int, tuple[str, TreeMemory]]:
        """The runs in the operator's tree now: root pid -> (controller, memory).
        Blocking: call it from a thread."""
        found: dict[int, tuple[str, TreeMemory]] = {}
        todo = children(self._pid, proc=self._proc)
        while todo:
            pid = todo.pop()
            controller = self._controller_of(pid)
            if controller is None:
                todo += children(pid, proc=self._proc)
            else:
                found[pid] = (controller, tree_memory(pid, proc=self._proc))
        return found

    def update(self, found: Mapping[int, tuple[str, TreeMemory]]) -> None:
        """Fold a sample in: track the peaks of runs in flight, and turn the peak of each
        run that ended into its controller's estimate."""
        for pid in [pid for pid in self.runs if pid not in found]:
            self._ended(self.runs.pop(pid))
        for pid, (controller, memory) in found.items():
            run = self.runs.get(pid)
            if run is None or run.controller != controller:
                run = self.runs[pid] = RunSample(controller, memory)
            run.now = memory
            run.peak = TreeMemory(
                max(run.peak.rss, memory.rss),
                max(run.peak.pss, memory.pss),
                max(run.peak.uss, memory.uss),
            )
        if self._metrics is not None:
            usage = self._cgroup.usage()
            if usage is not None:
                self._metrics.usage.set(usage)

    def _ended(self, run: RunSample) -> None:
        peak = run.peak.uss
        if peak <= 0:
            return
        old = self.estimates.get(run.controller)
        new = peak if old is None or peak >= old else int(old + (peak - old) * _DOWN)
        self.estimates[run.controller] = new
        self.peaks.append((run.controller, run.peak))
        del self.peaks[:-1000]
        if self._metrics is not None:
            self._metrics.estimate.labels(controller=run.controller).set(new)
            self._metrics.run_peak.labels(controller=run.controller).observe(peak)

    def _controller_of(self, pid: int) -> str | None:
        try:
            cwd = Path(os.readlink(self._proc / str(pid) / "cwd"))
        except OSError:
            return None
        if cwd.name != "project":
            return None
        for parent in cwd.parents:
            name = self._kinds.get(parent)
            if name is not None:
                return name
        return None


def _mib(size: int) -> str:
    return f"{size / MIB:.0f} MiB"


def memory_limiter(
    base_dir: Path,
    *,
    fraction: float,
    metrics: MemoryMetrics | None = None,
    cgroup: CgroupMemory | None = None,
) -> tuple[AdmissionLimiter, RunMemory] | None:
    """The limiter of runs by memory and its `RunMemory` (whose `run()` the caller
    runs), or None when `fraction` is 0 or no cgroup limits the operator's memory."""
    if fraction <= 0:
        return None
    cgroup = cgroup or cgroup_memory()
    if cgroup is None:
        if metrics is not None:
            metrics.limit.set(0)
        log.info("no cgroup memory limit: runs are not limited by memory")
        return None
    memory = RunMemory(base_dir, cgroup=cgroup, fraction=fraction, metrics=metrics)
    limiter = AdmissionLimiter(memory, metrics=metrics, what="Ansible runs")
    memory.in_flight = lambda: limiter.running
    log.info(
        "memory limit %s (cgroup v%d %s): runs start while the operator stays under %s",
        _mib(cgroup.limit),
        cgroup.version,
        cgroup.directory,
        _mib(memory.budget),
    )
    return limiter, memory
