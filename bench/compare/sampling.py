"""CPU and memory of an operator's whole process tree, sampled from /proc in a thread
(how, and what each figure means: the package docstring).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_INTERVAL = 0.25


def _stat(pid: int) -> tuple[int, int] | None:
    """(utime+stime+cutime+cstime in ticks, rss bytes) of one process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    ticks = sum(int(value) for value in fields[11:15])
    return ticks, int(fields[21]) * PAGE


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        with contextlib.suppress(OSError):
            found += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return found


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def vm_hwm(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class Sample:
    t: float
    cpu_s: float
    root_rss: int
    desc_rss: int
    procs: int
    pss: int | None = None


class TreeSampler:
    """Samples CPU and RSS of `root` and its descendants in a thread."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.samples: list[Sample] = []
        self.descendants: set[int] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._count = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self, *, pss: bool = False) -> Sample:
        with self._lock:
            now = time.monotonic()
            root = _stat(self.root)
            if root is None:
                return self.samples[-1] if self.samples else Sample(now, 0, 0, 0, 0)
            ticks, root_rss = root
            desc_rss = 0
            pss_total = _pss(self.root) if pss else 0
            todo = _children(self.root)
            procs = 1
            while todo:
                pid = todo.pop()
                stat = _stat(pid)
                if stat is None:
                    continue
                self.descendants.add(pid)
                procs += 1
                ticks += stat[0]
                desc_rss += stat[1]
                if pss:
                    pss_total += _pss(pid)
                todo += _children(pid)
            result = Sample(now, ticks / CLK_TCK, root_rss, desc_rss, procs, pss_total or None)
            self.samples.append(result)
            return result

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL):
            self._count += 1
            self.sample(pss=self._count % 8 == 0)

    def window(self, start: float, end: float) -> dict[str, Any]:
        inside = [s for s in self.samples if start <= s.t <= end]
        if not inside:
            return {}
        pss = [s.pss for s in inside if s.pss]
        return {
            "peak_root_rss_mib": mib(max(s.root_rss for s in inside)),
            "mean_root_rss_mib": mib(statistics.fmean(s.root_rss for s in inside)),
            "peak_desc_rss_mib": mib(max(s.desc_rss for s in inside)),
            "peak_tree_pss_mib": mib(max(pss)) if pss else None,
            "peak_procs": max(s.procs for s in inside),
        }


def mib(value: float) -> float:
    return round(value / 2**20, 1)
