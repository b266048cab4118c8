"""The real node's processes, mounts and cgroups: the few made at start, and the sweep
at stop that finds everything the node left by name (its cgroup tree, its containerd
socket, its directories), whether or not its processes still run.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import signal
import time
from pathlib import Path

from runner.devtools.cluster.realnode.machine import cgroup_mounts, program, run, unescape
from runner.devtools.cluster.realnode.nodeconfig import NodeLayout

# containerd 1.6 puts each shim's socket here whatever its configured state directory.
CONTAINERD_SHIM_SOCKETS = Path("/run/containerd/s")


def owned_pids(layout: NodeLayout) -> list[int]:
    """Processes of this node: anything in its cgroup tree (the pods' processes) and any
    containerd shim serving its containerd."""
    socket = str(layout.containerd_socket)
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text(encoding="utf-8")
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        in_tree = any(
            line.split(":", 2)[-1].startswith(layout.cgroup_root + "/")
            for line in cgroups.splitlines()
        )
        if in_tree or socket.encode() in cmdline:
            pids.append(int(entry.name))
    return pids


def kill_owned_processes(layout: NodeLayout, *, timeout: float = 10) -> list[int]:
    """SIGKILL every process of this node and wait for them to be gone."""
    killed = owned_pids(layout)
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [pid for pid in owned_pids(layout) if _alive(pid)]
        if not alive:
            break
        time.sleep(0.05)
    return killed


def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def mounts_under(roots: tuple[Path, ...]) -> list[Path]:
    """Mount points at or below any of `roots`, deepest first."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        point = Path(unescape(line.split()[4]))
        if any(point == root or root in point.parents for root in roots):
            found.append(point)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


_MNT_DETACH = 2


def unmount_all(roots: tuple[Path, ...]) -> list[Path]:
    """Unmount (lazily, as a last resort) everything mounted below `roots`."""
    libc = ctypes.CDLL(None, use_errno=True)
    unmounted = []
    for _attempt in range(5):
        points = mounts_under(roots)
        if not points:
            break
        for point in points:
            if libc.umount2(str(point).encode(), _MNT_DETACH) == 0:
                unmounted.append(point)
    return unmounted


def bind_mount(source: Path, target: Path) -> None:
    """Mount `source` at `target` too, privately (mounts below either stay there)."""
    mount = program("mount")
    run([mount, "--bind", str(source), str(target)])
    run([mount, "--make-private", str(target)])


def remove_cgroups(cgroup_root: str, *, timeout: float = 5) -> list[Path]:
    """rmdir this node's cgroup tree in every hierarchy (a cgroup is removable once its
    processes are gone, which may take a moment after SIGKILL)."""
    removed = []
    for mount in cgroup_mounts():
        top = mount / cgroup_root.lstrip("/")
        if not top.is_dir():
            continue
        deadline = time.monotonic() + timeout
        while top.exists() and time.monotonic() < deadline:
            for directory, _subdirs, _files in sorted(os.walk(top), key=lambda w: -len(w[0])):
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
            if top.exists():
                time.sleep(0.1)
        if not top.exists():
            removed.append(top)
    return removed


def create_cgroups(cgroup_root: str) -> None:
    """The kubelet wants its cgroup root to exist in every hierarchy."""
    for mount in cgroup_mounts():
        if (mount / "cgroup.procs").exists():
            (mount / cgroup_root.lstrip("/")).mkdir(exist_ok=True)


def remaining_cgroups(cgroup_root: str) -> list[Path]:
    return [
        mount / cgroup_root.lstrip("/")
        for mount in cgroup_mounts()
        if (mount / cgroup_root.lstrip("/")).exists()
    ]


def shim_socket(containerd_socket: Path, namespace: str, container_id: str) -> Path:
    """Where containerd 1.6 puts the shim socket of one container."""
    key = f"{containerd_socket}/{namespace}/{container_id}".encode()
    return CONTAINERD_SHIM_SOCKETS / hashlib.sha256(key).hexdigest()


def remove_shim_sockets(layout: NodeLayout) -> list[Path]:
    """Shim sockets left by shims that were killed rather than shut down: the task
    directories in our state name every container that had one."""
    removed: list[Path] = []
    tasks = layout.containerd_state / "io.containerd.runtime.v2.task"
    if not tasks.is_dir():
        return removed
    for namespace in tasks.iterdir():
        for container in namespace.iterdir() if namespace.is_dir() else ():
            socket = shim_socket(layout.containerd_socket, namespace.name, container.name)
            if socket.exists() or socket.is_symlink():
                socket.unlink()
                removed.append(socket)
    return removed
