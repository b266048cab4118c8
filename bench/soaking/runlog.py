"""The run log read back: each run's start and end, paired by the run's id (pure).

`project.py` says how the log is written. A line that does not parse (there should be
none: each is one `write`) is counted and skipped. A start recorded twice (Ansible
templating a task twice) counts once; an end without a start cannot happen and is
counted as unreadable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

RECONCILE = "reconcile"
FINALIZE = "finalize"


@dataclass(frozen=True)
class Run:
    """One run as the log has it; `ended` None when its process was killed before."""

    run: str
    phase: str
    key: str
    uid: str
    generation: int
    shard: str
    incarnation: str
    pid: int
    started: float  # wall clock
    started_mono: float
    ended: float | None = None
    ended_mono: float | None = None
    failed: bool = False

    @property
    def completed(self) -> bool:
        """Ended without a failed task."""
        return self.ended is not None and not self.failed


@dataclass(frozen=True)
class RunLog:
    runs: list[Run]
    unreadable: int

    def of(self, uid: str, phase: str | None = None) -> list[Run]:
        return [r for r in self.runs if r.uid == uid and (phase is None or r.phase == phase)]


def parse(lines: Iterable[str]) -> RunLog:
    starts: dict[str, dict[str, object]] = {}
    ends: dict[str, dict[str, object]] = {}
    order: list[str] = []
    unreadable = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            run_id = str(record["run"])
            event = record["ev"]
        except (ValueError, KeyError, TypeError):
            unreadable += 1
            continue
        if event == "start":
            if run_id not in starts:
                starts[run_id] = record
                order.append(run_id)
        elif event == "end":
            ends[run_id] = record  # the last end of a run (there is one)
        else:
            unreadable += 1
    unreadable += sum(1 for run_id in ends if run_id not in starts)
    runs = []
    for run_id in order:
        start, end = starts[run_id], ends.get(run_id)
        runs.append(
            Run(
                run=run_id,
                phase=str(start["phase"]),
                key=str(start["key"]),
                uid=str(start["uid"]),
                generation=int(str(start["gen"])),
                shard=str(start.get("shard") or ""),
                incarnation=str(start["inc"]),
                pid=int(str(start["pid"])),
                started=float(str(start["wall"])),
                started_mono=float(str(start["mono"])),
                ended=float(str(end["wall"])) if end else None,
                ended_mono=float(str(end["mono"])) if end else None,
                failed=bool(end.get("failed")) if end else False,
            )
        )
    runs.sort(key=lambda r: r.started)
    return RunLog(runs=runs, unreadable=unreadable)


def read(path: Path) -> RunLog:
    if not path.exists():
        return RunLog(runs=[], unreadable=0)
    return parse(path.read_text(encoding="utf-8", errors="replace").splitlines())
