"""Killing a run's whole process tree, also what left its process group."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from runner.ansible import proctree


def _proc(root: Path, tree: dict[int, dict[int, list[int]]]) -> Path:
    """A stand-in /proc: pid -> thread id -> the children that thread forked."""
    for pid, threads in tree.items():
        for tid, kids in threads.items():
            listed = root / str(pid) / "task" / str(tid) / "children"
            listed.parent.mkdir(parents=True)
            listed.write_text("".join(f"{kid} " for kid in kids))
    return root


def test_descendants_walks_every_thread_of_every_process(tmp_path: Path) -> None:
    proc = _proc(tmp_path, {1: {1: [2], 7: [3]}, 2: {2: [4]}, 3: {3: []}, 4: {4: [5]}})
    assert sorted(proctree.children(1, proc=proc)) == [2, 3]
    assert sorted(proctree.descendants(1, proc=proc)) == [2, 3, 4, 5]
    assert proctree.descendants(99, proc=proc) == []  # gone: nothing, no error


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_kill_tree_reaches_a_grandchild_in_a_session_of_its_own() -> None:
    # As ansible-core's task workers: a child that calls setsid() and runs a module.
    script = (
        "import os, subprocess, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    child = subprocess.Popen(['sleep', '300'])\n"
        "    print(child.pid, flush=True)\n"
        "    child.wait()\n"
        "    os._exit(0)\n"
        "time.sleep(300)\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert run.stdout is not None
        module = int(run.stdout.readline())
        assert _alive(module)
        proctree.kill_tree(run.pid)
        run.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(module) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(module), "the module in another session survived"
    finally:
        run.kill()
        run.wait()


def test_kill_tree_of_a_child_in_the_callers_group_leaves_the_caller_alone() -> None:
    child = subprocess.Popen(["sleep", "300"])  # same process group as this test
    try:
        proctree.kill_tree(child.pid)
        assert child.wait(timeout=10) == -9
    finally:
        child.kill()
        child.wait()
