"""The `artifacts/` directory of a CR's data directory: rotation, `latest`, and reading.

Every run leaves `artifacts/<ident>/` behind (`stdout`, `job_events/`, `status`, `rc`,
`command`). The Go operator kept `maxRunnerArtifacts` of them through ansible-runner's
`--rotate-artifacts` and pointed `artifacts/latest` at the newest. ansible-runner's own
rotation counts `latest` as a run and fails removing a symlink, and idents are random
numbers, so the order of runs is their start time (the `command` file ansible-runner
writes first); rotation and the link are done here, after each run.

The reading helpers serve the `history` and `logs` commands; they never raise for a
half-written or foreign directory, they skip it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "ARTIFACTS",
    "LATEST",
    "RunInfo",
    "find_data_dirs",
    "is_data_dir",
    "latest_run",
    "link_latest",
    "list_runs",
    "read_events",
    "read_stdout",
    "rotate",
]

ARTIFACTS = "artifacts"
LATEST = "latest"
_STARTED_MARKER = "command"
"""Written by ansible-runner when a run starts and never touched again."""
_INPUTS_MARKER = "env/extravars"
"""Written into every data directory before each run."""


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """One run's artifact directory."""

    ident: str
    path: Path
    started: datetime
    """When the run started (UTC), from its artifact files' modification times."""
    status: str | None
    """ansible-runner's final status (`successful`, `failed`, ...); None while running."""
    rc: int | None


def link_latest(data_dir: Path, ident: str) -> None:
    """Point `artifacts/latest` at `artifacts/<ident>`, replacing the link atomically.

    The link is relative (`latest -> <ident>`), so it survives moving the base directory.
    """
    artifacts = data_dir / ARTIFACTS
    temporary = artifacts / f".{LATEST}.{secrets.token_hex(4)}"
    temporary.symlink_to(ident, target_is_directory=True)
    try:
        temporary.replace(artifacts / LATEST)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def rotate(data_dir: Path, *, keep: int) -> list[Path]:
    """Remove the oldest run directories so that `keep` remain; return those removed.

    `keep` <= 0 keeps everything (the original's `maxRunnerArtifacts: 0`). The run
    `latest` points at is never removed.
    """
    if keep <= 0:
        return []
    current = _latest_target(data_dir)
    removed: list[Path] = []
    runs = [path for path, _ in _runs_newest_first(data_dir)]
    for path in runs[keep:]:
        if path.name == current:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def list_runs(data_dir: Path) -> list[RunInfo]:
    """The runs of one data directory, newest first."""
    return [_info(path, started) for path, started in _runs_newest_first(data_dir)]


def latest_run(data_dir: Path) -> RunInfo | None:
    """The run `artifacts/latest` points at, else the newest run, else None."""
    target = _latest_target(data_dir)
    runs = list_runs(data_dir)
    for run in runs:
        if run.ident == target:
            return run
    return runs[0] if runs else None


def read_stdout(run: RunInfo) -> str:
    """The run's Ansible output ("" when there is none yet)."""
    try:
        return (run.path / "stdout").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def read_events(run: RunInfo) -> list[dict[str, Any]]:
    """The run's job events in emission order (unreadable event files are skipped)."""
    events: list[tuple[int, dict[str, Any]]] = []
    try:
        entries = list((run.path / "job_events").iterdir())
    except OSError:
        return []
    for entry in entries:
        counter, _, rest = entry.name.partition("-")
        if not counter.isdigit() or not rest.endswith(".json") or rest.endswith("-partial.json"):
            continue
        try:
            event = json.loads(entry.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(event, dict):
            events.append((int(counter), event))
    events.sort(key=lambda item: item[0])
    return [event for _, event in events]


def is_data_dir(path: Path) -> bool:
    """Whether `path` is a CR's data directory: `artifacts/` and the `env/extravars` file.

    Both, because a namespace or CR may be called `artifacts` or `env`: the directory of a
    namespace holding such CRs has an `artifacts/` or `env/` directory too, but never a
    file `env/extravars` next to `artifacts/`. Symbolic links do not count.
    """
    artifacts = path / ARTIFACTS
    extravars = path / _INPUTS_MARKER
    return (
        artifacts.is_dir()
        and not artifacts.is_symlink()
        and extravars.is_file()
        and not extravars.is_symlink()
    )


def find_data_dirs(base: Path) -> Iterator[Path]:
    """Every data directory under `base` (see `is_data_dir`), sorted; links not followed."""
    if not base.is_dir():
        return
    for root, dirs, _ in os.walk(base):
        path = Path(root)
        if ARTIFACTS in dirs and is_data_dir(path):
            yield path
            # A kind's objects are all namespaced or all not: no data dir holds another.
            dirs.clear()
        dirs.sort()


# -- internals ------------------------------------------------------------------------


def _latest_target(data_dir: Path) -> str | None:
    try:
        target = os.readlink(data_dir / ARTIFACTS / LATEST)
    except OSError:
        return None
    return Path(target).name


def _runs_newest_first(data_dir: Path) -> list[tuple[Path, float]]:
    try:
        entries = list((data_dir / ARTIFACTS).iterdir())
    except OSError:
        return []
    runs: list[tuple[Path, float]] = []
    for entry in entries:
        if entry.name == LATEST or entry.name.startswith(".") or entry.is_symlink():
            continue
        if not entry.is_dir():
            continue
        started = _started(entry)
        if started is not None:
            runs.append((entry, started))
    runs.sort(key=lambda item: (item[1], item[0].name), reverse=True)
    return runs


def _started(run_dir: Path) -> float | None:
    for candidate in (run_dir / _STARTED_MARKER, run_dir):
        try:
            return candidate.stat().st_mtime
        except OSError:
            continue
    return None


def _info(path: Path, started: float) -> RunInfo:
    return RunInfo(
        ident=path.name,
        path=path,
        started=datetime.fromtimestamp(started, tz=UTC),
        status=_read_text(path / "status"),
        rc=_read_int(path / "rc"),
    )


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _read_int(path: Path) -> int | None:
    text = _read_text(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None
