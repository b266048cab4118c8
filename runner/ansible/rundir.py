"""Each operator process's own run directory, under a base only its user can change.

The runs' data directories (inventories, playbooks, kubeconfigs, artifacts) used to live
at a predictable path under `/tmp` shared by every process: another local user could
create it first and plant `filter_plugins/` beside the generated playbook, and two
operators on one machine removed each other's directories at start-up. Now:

* the base directory (`$ANSIBLE_OPERATOR_RUNNER_DIR`, default
  `/tmp/ansible-operator/runner`) is checked before anything is written: it and each
  directory above it must belong to this process's user or to root, and the base must
  not be writable by anyone else unless it has the sticky bit (as `/tmp` has: others
  cannot then rename or remove what we put there). Missing levels are created with mode
  0700. A root-owned directory above the base is the system's choice (e.g. a pod's
  emptyDir at `/tmp`) and is accepted;
* the process creates a fresh directory of its own in the base (`operator-*`, mode 0700,
  a new random name) and holds a lock on it (`flock` on `.lock`) until it exits;
* at start-up it removes only directories of earlier processes of the same operator (the
  same watches file, recorded in `.operator`), owned by its user, whose lock nobody holds:
  the directory of an operator that still runs is never touched, whoever it belongs to.
  Their CRs' data directories are moved into the new process's directory first, so that
  `history` and `logs` still show the runs from before a restart (per-CR rotation and
  the global artifacts cap then bound them like the new process's own runs).

`check_base` and `claim` raise `ConfigError` naming the path and what is wrong with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from runner.ansible.artifacts import ARTIFACTS, LATEST, find_data_dirs
from runner.errors import ConfigError

__all__ = [
    "LOCK_FILE",
    "OWNER_FILE",
    "PROCESS_DIR_PREFIX",
    "RunDirectory",
    "carry_runs",
    "check_base",
    "claim",
    "process_dirs",
    "remove_abandoned",
]

PROCESS_DIR_PREFIX: Final = "operator-"
LOCK_FILE: Final = ".lock"
"""Locked (`flock`) by the process using the directory, for as long as it runs."""
OWNER_FILE: Final = ".operator"
"""JSON `{"identity", "pid", "started"}`: which operator made the directory."""

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


@dataclass
class RunDirectory:
    """A process's own run directory, locked until `release()` (or the process's end)."""

    path: Path
    _lock: int | None

    def release(self) -> None:
        """Give up the lock: a later operator may now remove the directory."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def check_base(base: Path, *, uid: int | None = None) -> Path:
    """Create `base` if missing (mode 0700 for each new level) and check that only this
    process's user (or root) can change it; returns it resolved. `ConfigError` otherwise."""
    uid = os.geteuid() if uid is None else uid
    _make_private_dirs(base)
    resolved = base.resolve()
    info = _stat(resolved)
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"run directory base {resolved}: not a directory")
    _check_owner(resolved, info, uid=uid, role="run directory base")
    if info.st_mode & _OTHERS_WRITE and not info.st_mode & stat.S_ISVTX:
        raise ConfigError(
            f"run directory base {resolved}: writable by other users "
            f"(mode {stat.S_IMODE(info.st_mode):04o}) without the sticky bit, so they could "
            "replace what the operator writes there; use a directory only this user can "
            "write (chmod go-w), or set ANSIBLE_OPERATOR_RUNNER_DIR to one"
        )
    for parent in resolved.parents:
        info = _stat(parent)
        if info.st_uid == 0:
            continue  # the system's (e.g. /tmp, or a pod's emptyDir)
        _check_owner(parent, info, uid=uid, role=f"{parent} (above the run directory base)")
        if info.st_mode & _OTHERS_WRITE and not info.st_mode & stat.S_ISVTX:
            raise ConfigError(
                f"{parent} (above the run directory base {resolved}): writable by other "
                f"users (mode {stat.S_IMODE(info.st_mode):04o}), so they could replace the "
                "base; use a base whose parents only this user or root can write"
            )
    return resolved


def claim(base: Path, *, identity: str, uid: int | None = None) -> RunDirectory:
    """Check `base` (`check_base`) and create this process's own directory in it: fresh,
    mode 0700, locked. `identity` names the operator (its watches file), so that its
    next process knows which abandoned directories are its own."""
    resolved = check_base(base, uid=uid)
    try:
        path = Path(tempfile.mkdtemp(prefix=PROCESS_DIR_PREFIX, dir=resolved))
    except OSError as err:
        raise ConfigError(
            f"run directory base {resolved}: cannot create a directory: {err}"
        ) from err
    # Locked under a temporary name, then renamed: a directory whose `.lock` exists is
    # always locked while its process lives (`remove_abandoned` relies on it).
    fd: int | None = None
    try:
        pending = path / f"{LOCK_FILE}.new"
        fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        owner = {"identity": identity, "pid": os.getpid(), "started": time.time()}
        _write_private(path / OWNER_FILE, json.dumps(owner))
        os.rename(pending, path / LOCK_FILE)
    except OSError as err:
        # Half made (a full disk): nobody could ever tell it from one being made, and
        # remove it; this process does, before it gives up.
        if fd is not None:
            os.close(fd)
        shutil.rmtree(path, ignore_errors=True)
        raise ConfigError(f"run directory base {resolved}: cannot set up {path}: {err}") from err
    return RunDirectory(path=path, _lock=fd)


def remove_abandoned(
    base: Path, *, identity: str, uid: int | None = None, keep_runs_in: Path | None = None
) -> list[Path]:
    """Remove the directories in `base` of earlier processes of the operator `identity`
    that no longer run; returns them. Never a directory whose lock is held (its operator
    runs), one of another operator, one owned by another user, or a symbolic link.
    With `keep_runs_in` (the new process's own directory), their CRs' data directories
    and runs are moved there first (`carry_runs`)."""
    uid = os.geteuid() if uid is None else uid
    removed = []
    for path in process_dirs(base):
        try:
            info = path.lstat()
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            continue
        if _identity(path) != identity:
            continue
        with _unlocked(path) as free:
            if free:
                if keep_runs_in is not None:
                    carry_runs(path, keep_runs_in)
                shutil.rmtree(path, ignore_errors=True)
                if not path.exists():
                    removed.append(path)
    return removed


def carry_runs(source: Path, target: Path) -> int:
    """Move the CR data directories under `source` (a stopped process's directory) to the
    same places under `target`; returns how many runs moved. Where `target` already has
    the data directory (carried from a newer predecessor), only the runs it lacks move.
    Nothing is followed through a symbolic link; what cannot be moved stays behind."""
    moved = 0
    for data_dir in find_data_dirs(source):
        destination = target / data_dir.relative_to(source)
        runs = _run_dirs(data_dir)
        if not destination.exists():
            with contextlib.suppress(OSError):
                destination.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                data_dir.rename(destination)
                moved += len(runs)
            continue
        for run in runs:
            if (destination / ARTIFACTS / run.name).exists():
                continue
            with contextlib.suppress(OSError):
                run.rename(destination / ARTIFACTS / run.name)
                moved += 1
    return moved


def process_dirs(base: Path) -> list[Path]:
    """The operator processes' directories in `base`, newest first (none: an empty list)."""
    try:
        entries = [entry for entry in base.iterdir() if entry.name.startswith(PROCESS_DIR_PREFIX)]
    except OSError:
        return []
    dated = []
    for entry in entries:
        with contextlib.suppress(OSError):
            dated.append((entry.lstat().st_mtime, entry))
    return [path for _, path in sorted(dated, reverse=True)]


# -- internals ------------------------------------------------------------------------


def _make_private_dirs(path: Path) -> None:
    missing = []
    current = path.absolute()
    while not current.exists() and not current.is_symlink():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue  # made meanwhile: checked below like any existing directory
        except OSError as err:
            raise ConfigError(
                f"run directory base {path}: cannot create {directory}: {err}"
            ) from err


def _run_dirs(data_dir: Path) -> list[Path]:
    try:
        entries = list((data_dir / ARTIFACTS).iterdir())
    except OSError:
        return []
    return [
        entry
        for entry in entries
        if entry.name != LATEST
        and not entry.name.startswith(".")
        and entry.is_dir()
        and not entry.is_symlink()
    ]


def _stat(path: Path) -> os.stat_result:
    try:
        return path.stat()
    except OSError as err:
        raise ConfigError(f"run directory base {path}: {err}") from err


def _check_owner(path: Path, info: os.stat_result, *, uid: int, role: str) -> None:
    if info.st_uid in (uid, 0):
        return
    raise ConfigError(
        f"{role} {path}: owned by {_user(info.st_uid)}, not by this process's user "
        f"({_user(uid)}) or root, who could change what the operator runs; set "
        "ANSIBLE_OPERATOR_RUNNER_DIR to a directory of this user"
    )


def _user(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _identity(path: Path) -> str | None:
    try:
        owner = json.loads((path / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    identity = owner.get("identity") if isinstance(owner, dict) else None
    return identity if isinstance(identity, str) else None


@contextlib.contextmanager
def _unlocked(path: Path) -> Iterator[bool]:
    """Whether `path`'s lock was free (it is then held by us until the block ends)."""
    try:
        fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        yield False  # no lock file: being created, or not one of ours
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
