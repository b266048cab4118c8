"""How many CPUs this process may use: the default number of workers per watch.

`os.cpu_count()` is the node's CPUs: 64 on a big node, in a pod limited to 500m. The
limit a pod really has is its cgroup's CPU quota: `cpu.max` (`<quota> <period>` or
`max <period>`) on cgroup v2, `cpu.cfs_quota_us` / `cpu.cfs_period_us` (-1: none) on
cgroup v1, at the process's own cgroup or any cgroup above it (the smallest wins). Where
each hierarchy is mounted comes from `/proc/self/mountinfo`, and the process's place in
it from `/proc/self/cgroup`, so hosts, containers with their own cgroup namespace and
hybrid v1/v2 layouts all work.

The functions take the `/proc/self` directory, so tests give them fake files; anything
unreadable or malformed means "no quota" (never an error: this only picks a default).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["available_cpus", "cgroup_cpu_limit", "cgroup_directories"]

PROC_SELF = Path("/proc/self")


@dataclass(frozen=True)
class _Mount:
    version: int  # 1 or 2
    root: PurePosixPath  # the cgroup the mount shows as its top
    mount_point: Path


def available_cpus(proc_self: Path = PROC_SELF) -> int:
    """The CPUs this process may use: its CPU affinity, lowered to the cgroup quota
    rounded up (a quota of 500m gives 1)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit(proc_self)
    if limit is not None:
        cpus = min(cpus, math.ceil(limit))
    return max(cpus, 1)


def cgroup_cpu_limit(proc_self: Path = PROC_SELF) -> float | None:
    """The CPU quota of this process's cgroups in CPUs (0.5 for 500m), or None."""
    limits: list[float] = []
    for version, directory in cgroup_directories("cpu", proc_self):
        limit = _quota(directory, version)
        if limit is not None:
            limits.append(limit)
    return min(limits) if limits else None


def cgroup_directories(controller: str, proc_self: Path = PROC_SELF) -> list[tuple[int, Path]]:
    """(version, directory) of this process's cgroup and of every cgroup above it, its
    own first, in the v2 hierarchy and in the v1 hierarchy of `controller` (a v2
    directory may lack the controller's files: in a hybrid layout v1 has it)."""
    mounts = _cgroup_mounts(_read(proc_self / "mountinfo"), controller)
    found: list[tuple[int, Path]] = []
    for version, path in _own_cgroups(_read(proc_self / "cgroup"), controller):
        for mount in mounts:
            if mount.version == version:
                found += [(version, directory) for directory in _directories(mount, path)]
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _cgroup_mounts(mountinfo: str, controller: str) -> list[_Mount]:
    """cgroup2 mounts, and cgroup v1 mounts that carry `controller`."""
    mounts = []
    for line in mountinfo.splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, mount_point = PurePosixPath(fields[3]), Path(_unescape(fields[4]))
        if tail[0] == "cgroup2":
            mounts.append(_Mount(2, root, mount_point))
        elif tail[0] == "cgroup" and controller in tail[2].split(","):
            mounts.append(_Mount(1, root, mount_point))
    return mounts


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _own_cgroups(cgroup: str, controller: str) -> list[tuple[int, PurePosixPath]]:
    """(version, path) of this process in the v2 hierarchy and the v1 `controller` one."""
    found = []
    for line in cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            found.append((2, PurePosixPath(path)))
        elif controller in controllers.split(","):
            found.append((1, PurePosixPath(path)))
    return found


def _directories(mount: _Mount, path: PurePosixPath) -> list[Path]:
    """The directories of `path` and every cgroup above it that the mount shows."""
    try:
        relative = path.relative_to(mount.root)
    except ValueError:
        # Inside a cgroup namespace the mount's root is the namespace's top, and paths
        # outside it (shown relative to another root) are the namespace's top itself.
        relative = PurePosixPath(".")
    parts = [part for part in relative.parts if part not in ("/", ".")]
    return [mount.mount_point.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]


def _quota(directory: Path, version: int) -> float | None:
    try:
        if version == 2:
            quota_text, _, period_text = _read(directory / "cpu.max").strip().partition(" ")
            if quota_text in ("", "max"):
                return None
            quota, period = int(quota_text), int(period_text or "100000")
        else:
            quota = int(_read(directory / "cpu.cfs_quota_us").strip() or "-1")
            period = int(_read(directory / "cpu.cfs_period_us").strip() or "0")
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return quota / period
