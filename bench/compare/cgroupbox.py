"""A cgroup with a memory limit and a CPU quota to run an operator in (as root).

cgroup v2 where the unified hierarchy has the memory and cpu controllers (a directory
under /sys/fs/cgroup with `memory.max` and `cpu.max`), else cgroup v1 (a directory in
each of the `memory` and `cpu` hierarchies). `wrapper()` is a command prefix that moves
the process into the cgroup before it execs the operator, so the operator and everything
it starts are in it from the first instruction. `close()` kills what is left in it and
removes it; use the box as a context manager so that happens even when the run fails.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path
from types import TracebackType

ROOT = Path("/sys/fs/cgroup")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _fields(path: Path) -> dict[str, int]:
    values = {}
    for line in _read(path).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            values[parts[0]] = int(parts[1])
    return values


class CgroupBox:
    def __init__(self, *, memory_bytes: int, cpus: float, name: str | None = None) -> None:
        self.name = name or f"ao-bench-{uuid.uuid4().hex[:6]}"
        self.memory_bytes = memory_bytes
        self.cpus = cpus
        controllers = _read(ROOT / "cgroup.controllers").split()
        self.version = 2 if {"memory", "cpu"} <= set(controllers) else 1
        if self.version == 2:
            self.dirs = [ROOT / self.name]
        else:
            self.dirs = [ROOT / "memory" / self.name, ROOT / "cpu" / self.name]

    @property
    def memory_dir(self) -> Path:
        return self.dirs[0]

    def __enter__(self) -> CgroupBox:
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def _create(self) -> None:
        period = 100_000
        quota = int(self.cpus * period)
        if self.version == 2:
            with contextlib.suppress(OSError):  # may be on already
                (ROOT / "cgroup.subtree_control").write_text("+memory +cpu")
            self.memory_dir.mkdir()
            (self.memory_dir / "memory.max").write_text(str(self.memory_bytes))
            with contextlib.suppress(OSError):
                (self.memory_dir / "memory.swap.max").write_text("0")
            (self.memory_dir / "cpu.max").write_text(f"{quota} {period}")
            return
        memory, cpu = self.dirs
        memory.mkdir()
        (memory / "memory.limit_in_bytes").write_text(str(self.memory_bytes))
        with contextlib.suppress(OSError):  # no swap accounting: nothing to limit
            (memory / "memory.memsw.limit_in_bytes").write_text(str(self.memory_bytes))
        cpu.mkdir()
        (cpu / "cpu.cfs_period_us").write_text(str(period))
        (cpu / "cpu.cfs_quota_us").write_text(str(quota))

    def wrapper(self) -> tuple[str, ...]:
        """`sh -c 'echo $$ > <dir>/cgroup.procs ...; exec "$@"' sh`: put before a command."""
        moves = "; ".join(f"echo $$ > {d}/cgroup.procs" for d in self.dirs)
        return ("sh", "-c", f'{moves}; exec "$@"', "sh")

    def pids(self) -> list[int]:
        found: set[int] = set()
        for directory in self.dirs:
            found.update(int(p) for p in _read(directory / "cgroup.procs").split())
        return sorted(found)

    def peak(self) -> int:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        return int(_read(self.memory_dir / name).strip() or 0)

    def current(self) -> int:
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        return int(_read(self.memory_dir / name).strip() or 0)

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        return _fields(self.memory_dir / name).get("oom_kill", 0)

    def close(self) -> None:
        """Kill whatever is still in the cgroup and remove it."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
        for directory in reversed(self.dirs):
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
