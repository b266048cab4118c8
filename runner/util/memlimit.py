"""The memory this process may use (its cgroup's limit) and what its processes use.

A pod's memory limit is its cgroup's: `memory.max` on cgroup v2, `memory.limit_in_bytes`
on cgroup v1, at the process's own cgroup or any cgroup above it (the smallest wins; the
directories come from `runner.util.cpulimit.cgroup_directories`). What counts against it
is the cgroup's usage less the file cache the kernel drops before it kills anything:
`memory.current` less `inactive_file` (v2), `memory.usage_in_bytes` less
`total_inactive_file` (v1), the kubelet's "working set".

`tree_memory` reads one process tree's memory from `/proc/<pid>/smaps_rollup`: RSS, PSS
(shared pages split between their sharers) and USS (pages of the tree's own, which is
what one more such tree would add: a run forked from a warm zygote shares the zygote's
pages until it writes them).

Functions take the `/proc/self` (or `/proc`) directory so tests give them fake files;
anything unreadable means "no limit" or "nothing measured", never an error.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from runner.util.cpulimit import PROC_SELF, cgroup_directories

__all__ = ["CgroupMemory", "TreeMemory", "cgroup_memory", "children", "tree_memory"]

PROC = Path("/proc")
_UNLIMITED = 1 << 62  # v1 writes "no limit" as a huge page-aligned number


@dataclass(frozen=True)
class CgroupMemory:
    """The cgroup whose memory limit binds this process: its directory and limit."""

    version: int  # 1 or 2
    directory: Path
    limit: int  # bytes

    def usage(self) -> int | None:
        """The cgroup's working set in bytes: its usage less inactive file cache."""
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        current = _int(_read(self.directory / name))
        if current is None:
            return None
        stat = _stat(self.directory / "memory.stat")
        inactive = stat.get("inactive_file" if self.version == 2 else "total_inactive_file", 0)
        return max(0, current - inactive)

    def peak(self) -> int | None:
        """The most the cgroup ever used (v2 `memory.peak`, v1 `max_usage_in_bytes`)."""
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        return _int(_read(self.directory / name))

    def oom_kills(self) -> int:
        """How many processes the OOM killer killed in the cgroup."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _stat(self.directory / name).get("oom_kill", 0)


def cgroup_memory(proc_self: Path = PROC_SELF) -> CgroupMemory | None:
    """The cgroup with the smallest memory limit above (or at) this process, or None
    when no cgroup limits its memory."""
    best: CgroupMemory | None = None
    for version, directory in cgroup_directories("memory", proc_self):
        name = "memory.max" if version == 2 else "memory.limit_in_bytes"
        limit = _int(_read(directory / name))
        if limit is None or limit <= 0 or limit >= _UNLIMITED:
            continue
        if best is None or limit < best.limit:
            best = CgroupMemory(version, directory, limit)
    return best


@dataclass(frozen=True)
class TreeMemory:
    """The memory of a process tree in bytes."""

    rss: int = 0
    pss: int = 0
    uss: int = 0

    def __add__(self, other: TreeMemory) -> TreeMemory:
        return TreeMemory(self.rss + other.rss, self.pss + other.pss, self.uss + other.uss)


def children(pid: int, *, proc: Path = PROC) -> list[int]:
    """The pids of `pid`'s children (empty when it is gone)."""
    found: list[int] = []
    try:  # the process may end meanwhile: its task directory goes with it
        listed = list((proc / str(pid) / "task").glob("*/children"))
    except OSError:
        return found
    for path in listed:
        with contextlib.suppress(OSError, ValueError):
            found += [int(text) for text in path.read_text().split()]
    return found


def tree_memory(pid: int, *, proc: Path = PROC) -> TreeMemory:
    """The memory of `pid` and every process below it (processes that end meanwhile
    count as nothing)."""
    total = TreeMemory()
    todo, seen = [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        total += process_memory(current, proc=proc)
        todo += children(current, proc=proc)
    return total


def process_memory(pid: int, *, proc: Path = PROC) -> TreeMemory:
    """One process's memory from its smaps_rollup (nothing when it is gone)."""
    fields = _stat(proc / str(pid) / "smaps_rollup", kilobytes=True)
    private = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return TreeMemory(rss=fields.get("Rss", 0), pss=fields.get("Pss", 0), uss=private)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _int(text: str) -> int | None:
    text = text.strip()
    if not text or text == "max":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _stat(path: Path, *, kilobytes: bool = False) -> dict[str, int]:
    """`name value` lines (`Name:  value kB` with `kilobytes`, in bytes)."""
    values: dict[str, int] = {}
    for line in _read(path).splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) < 2:
            continue
        with contextlib.suppress(ValueError):
            values[parts[0]] = int(parts[1]) * (1024 if kilobytes else 1)
    return values
