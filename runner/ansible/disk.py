"""Disk use of the runner base directory: a global artifacts cap, and removing CR dirs.

Per-CR rotation (`artifacts.rotate`, `maxRunnerArtifacts`) bounds the runs of one CR,
not the disk: thousands of CRs times twenty runs with verbose output filled the disks of
the Go operator. Two rules bound it here:

- a global cap (`--max-artifacts-bytes`): after each run the oldest run directories of
  all CRs are removed until the total fits, except each CR's `latest` run and runs in
  progress (`over_budget` decides, `ArtifactBudget` keeps the listing up to date);
- a CR's whole data directory goes when the CR is gone (`remove_data_dir`).

Each operator process starts in a fresh private run directory and moves its stopped
predecessors' data directories into it at start-up (`rundir.py`), so their runs count
here like its own.

Decisions are pure functions of listings; the IO is small and stays inside the base
directory: nothing here follows a symbolic link or writes outside it, so a read-only
root file system with a writable volume as the base works. Sizes count disk blocks, as
`du` does (many small `job_events` files use more disk than their bytes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.ansible.artifacts import ARTIFACTS, LATEST, find_data_dirs

__all__ = [
    "UNFINISHED_GRACE_SECONDS",
    "ArtifactBudget",
    "ArtifactDir",
    "dir_usage",
    "over_budget",
    "remove_data_dir",
    "scan",
    "scan_data_dir",
]


UNFINISHED_GRACE_SECONDS = 3600.0
"""A run directory without a `status` file younger than this may belong to a run of
another process sharing the base directory; older ones were interrupted (kill -9)."""

_STATUS = "status"
_STARTED_MARKER = "command"


@dataclass(frozen=True, kw_only=True)
class ArtifactDir:
    """One run directory (`<data dir>/artifacts/<ident>`) as the cap sees it."""

    path: Path
    size: int
    """Disk use in bytes."""
    mtime: float
    """When the run started (wall clock)."""
    is_latest: bool
    """`artifacts/latest` points at it: the CR's last known run, never removed."""
    finished: bool = True
    """It has ansible-runner's `status` file."""


def over_budget(
    listing: Iterable[ArtifactDir],
    *,
    limit: int,
    busy: Collection[Path] = (),
    now: float | None = None,
    unfinished_grace: float = UNFINISHED_GRACE_SECONDS,
) -> list[Path]:
    """The run directories to remove, oldest first, so that the total fits in `limit`.

    `limit` <= 0 means no cap. Never chosen: `latest` targets, `busy` paths (runs in
    progress), and unfinished runs started less than `unfinished_grace` seconds before
    `now`. When those alone exceed the limit, everything else is chosen.
    """
    if limit <= 0:
        return []
    entries = list(listing)
    total = sum(entry.size for entry in entries)
    if total <= limit:
        return []
    now = time.time() if now is None else now
    busy_paths = set(busy)
    chosen: list[Path] = []
    for entry in sorted(entries, key=lambda e: (e.mtime, str(e.path))):
        if total <= limit:
            break
        if entry.is_latest or entry.path in busy_paths:
            continue
        if not entry.finished and now - entry.mtime < unfinished_grace:
            continue
        chosen.append(entry.path)
        total -= entry.size
    return chosen


def scan_data_dir(
    data_dir: Path, *, known: Mapping[Path, ArtifactDir] | None = None
) -> list[ArtifactDir]:
    """The run directories of one data directory.

    A finished run never changes: one found in `known` (an earlier scan) is not measured
    again, only its `latest` flag is updated.
    """
    known = known or {}
    artifacts = data_dir / ARTIFACTS
    latest = _latest_target(artifacts)
    listing: list[ArtifactDir] = []
    for entry in _scandir(artifacts):
        if entry.name == LATEST or entry.name.startswith("."):
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        is_latest = entry.name == latest
        previous = known.get(path)
        if previous is not None and previous.finished:
            if previous.is_latest != is_latest:
                previous = dataclasses.replace(previous, is_latest=is_latest)
            listing.append(previous)
            continue
        listing.append(
            ArtifactDir(
                path=path,
                size=dir_usage(path),
                mtime=_started(path),
                is_latest=is_latest,
                finished=(path / _STATUS).exists(),
            )
        )
    return listing


def scan(base_dir: Path, *, known: Mapping[Path, ArtifactDir] | None = None) -> list[ArtifactDir]:
    """Every run directory under `base_dir` (see `scan_data_dir`)."""
    listing: list[ArtifactDir] = []
    for data_dir in find_data_dirs(base_dir):
        listing += scan_data_dir(data_dir, known=known)
    return listing


class ArtifactBudget:
    """The global cap: the run directories under the base, and removing the oldest.

    Scanning a base with thousands of CRs takes seconds, too long to repeat after every
    run. The listing is kept in memory instead (one small record per run directory on
    disk) and updated from the data directories that changed; a full rescan every
    `rescan_interval` seconds picks up what changed behind our back. Methods may be
    called from any thread; `enforce` from one at a time.
    """

    def __init__(
        self,
        base_dir: Path,
        *,
        limit: int,
        rescan_interval: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_dir = base_dir
        self.limit = limit
        self._rescan_interval = rescan_interval
        self._clock = clock
        self._last_full: float | None = None
        self._lock = threading.Lock()
        self._runs: dict[Path, dict[Path, ArtifactDir]] = {}
        """Run directories by data directory."""

    def listing(self) -> list[ArtifactDir]:
        with self._lock:
            return [entry for runs in self._runs.values() for entry in runs.values()]

    def total(self) -> int:
        """Disk use of the run directories as last seen."""
        return sum(entry.size for entry in self.listing())

    def enforce(self, *, changed: Iterable[Path] = (), busy: Collection[Path] = ()) -> list[Path]:
        """Update the listing (`changed` data directories, or all when due), then remove
        the oldest run directories until the total fits; return those removed."""
        if self.limit <= 0:
            return []
        now = self._clock()
        if self._last_full is None or now - self._last_full >= self._rescan_interval:
            self._rescan()
            self._last_full = now
        else:
            for data_dir in set(changed):
                self._refresh(data_dir)
        chosen = over_budget(self.listing(), limit=self.limit, busy=busy)
        for path in chosen:
            shutil.rmtree(path, ignore_errors=True)
        with self._lock:
            for path in chosen:
                self._runs.get(path.parent.parent, {}).pop(path, None)
        return chosen

    def forget(self, data_dir: Path) -> None:
        """`data_dir` was removed."""
        with self._lock:
            self._runs.pop(data_dir, None)

    def _refresh(self, data_dir: Path) -> None:
        with self._lock:
            known = dict(self._runs.get(data_dir, {}))
        runs = {entry.path: entry for entry in scan_data_dir(data_dir, known=known)}
        with self._lock:
            if runs:
                self._runs[data_dir] = runs
            else:
                self._runs.pop(data_dir, None)

    def _rescan(self) -> None:
        with self._lock:
            known = {path: e for runs in self._runs.values() for path, e in runs.items()}
        fresh: dict[Path, dict[Path, ArtifactDir]] = {}
        for entry in scan(self.base_dir, known=known):
            fresh.setdefault(entry.path.parent.parent, {})[entry.path] = entry
        with self._lock:
            self._runs = fresh


def dir_usage(path: Path) -> int:
    """Disk use of a directory tree in bytes (blocks, as `du`), symlinks not followed."""
    total = 0
    stack = [str(path)]
    while stack:
        current = stack.pop()
        try:
            info = os.lstat(current)
        except OSError:
            continue
        total += _usage(info)
        if not stat.S_ISDIR(info.st_mode):
            continue
        for entry in _scandir(Path(current)):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
                continue
            try:
                total += _usage(entry.stat(follow_symlinks=False))
            except OSError:
                continue
    return total


def remove_data_dir(
    base_dir: Path, data_dir: Path, *, layout_lock: AbstractContextManager[Any] | None = None
) -> bool:
    """Remove one data directory (and its namespace directory when that is left empty).

    Refuses, returning False, for a path outside `base_dir` or a symbolic link; a
    directory that is already gone counts as removed. `layout_lock` is held while the
    parent is removed, so that a run creating its data directory next to it (holding the
    same lock) never sees its parent vanish.
    """
    try:
        relative = data_dir.relative_to(base_dir)
    except ValueError:
        return False
    if not relative.parts or ".." in relative.parts:
        return False
    if not data_dir.exists() and not data_dir.is_symlink():
        return True
    if not _within(base_dir, data_dir):
        return False
    shutil.rmtree(data_dir, ignore_errors=True)
    if data_dir.exists():
        return False
    parent = data_dir.parent
    if parent != base_dir:
        # The namespace (or kind) directory; fails harmlessly when other CRs live there.
        with layout_lock or contextlib.nullcontext(), contextlib.suppress(OSError):
            parent.rmdir()
    return True


# -- internals ------------------------------------------------------------------------


def _within(base_dir: Path, path: Path) -> bool:
    """`path` is `base_dir` or below it, with no symbolic link or `..` on the way."""
    try:
        relative = path.relative_to(base_dir)
    except ValueError:
        return False
    if ".." in relative.parts:
        return False
    try:
        return path.resolve(strict=True) == base_dir.resolve(strict=True).joinpath(relative)
    except OSError:
        return False


def _usage(info: os.stat_result) -> int:
    blocks = getattr(info, "st_blocks", None)
    return blocks * 512 if isinstance(blocks, int) else info.st_size


def _scandir(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as entries:
            return list(entries)
    except OSError:
        return []


def _latest_target(artifacts: Path) -> str | None:
    try:
        return Path(os.readlink(artifacts / LATEST)).name
    except OSError:
        return None


def _started(run_dir: Path) -> float:
    for candidate in (run_dir / _STARTED_MARKER, run_dir):
        try:
            return candidate.stat().st_mtime
        except OSError:
            continue
    return 0.0
