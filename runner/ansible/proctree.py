"""Killing a run with everything it started.

A run's `ansible-playbook` leads a process group, but ansible-core's task workers call
`setsid()` and so leave it, taking the modules they run with them: killing the group, as
ansible-runner does, leaves a module that hangs (a `command` waiting on a host, a `uri`
without a timeout) running after its run was cancelled or timed out. So the tree is
walked through `/proc/<pid>/task/<tid>/children`, stopped (a stopped process can neither
fork nor exit, so its pid cannot be reused), walked again until nothing new appears,
and only then killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

__all__ = ["children", "descendants", "kill_tree"]

_PROC = Path("/proc")
_WALKS = 5  # stop-and-walk rounds; each round only finds what forked during the last


def children(pid: int, *, proc: Path = _PROC) -> list[int]:
    """The pids of `pid`'s children (empty when it is gone or the kernel has no
    `children` files)."""
    found: list[int] = []
    try:  # the process may end meanwhile: its task directory goes with it
        listed = list((proc / str(pid) / "task").glob("*/children"))
    except OSError:
        return found
    for path in listed:
        with contextlib.suppress(OSError, ValueError):
            found += [int(text) for text in path.read_text().split()]
    return found


def descendants(pid: int, *, proc: Path = _PROC) -> list[int]:
    """The pids below `pid`, parents before their children."""
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children(todo.pop(0), proc=proc):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL the process group `pid` leads (a run starts a session of its own) and
    every process below `pid`, wherever their sessions are. A `pid` that leads no group
    has no group killed: never the caller's own."""
    stopped: set[int] = set()
    for _round in range(_WALKS):
        fresh = [p for p in (pid, *descendants(pid)) if p not in stopped]
        if not fresh:
            break
        for target in fresh:
            with contextlib.suppress(OSError):
                os.kill(target, signal.SIGSTOP)
        stopped.update(fresh)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for target in stopped:
        with contextlib.suppress(OSError):
            os.kill(target, signal.SIGKILL)
