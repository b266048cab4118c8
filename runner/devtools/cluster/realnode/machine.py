"""What a real node changes on the machine, and how each change is put back.

A kubelet and a CNI plugin change machine-wide settings (kernel settings at kubelet
start, an address on a bridge, iptables rules, mounts, cgroups). Everything here is
either named after one node (bridge, chains, cgroup root, mounts under its directories)
and removed by that node's stop, or machine-wide (kernel settings, containerd's fixed
shim-socket directory) and recorded before the first real node on the machine starts,
then restored when the last one stops: the record and the list of nodes using it live
in `/run/ansible-operator` (gone after a reboot, like the settings themselves), guarded
by a lock file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from runner.devtools.cluster.realnode.nodeconfig import CNI_BIN_DIR, RUN_ROOT, NodeLayout
from runner.errors import ClusterError

# What the kubelet sets at start (its "kernel tunables", see the kubelet's
# container_manager_linux.go), and the forwarding and route_localnet switches a CNI
# plugin or a kube-proxy stand-in would turn on; by setting, the value it is set to.
KUBELET_SYSCTLS = {
    "vm.overcommit_memory": "1",
    "vm.panic_on_oom": "0",
    "kernel.panic": "10",
    "kernel.panic_on_oops": "1",
    "kernel.keys.root_maxkeys": "1000000",
    "kernel.keys.root_maxbytes": "25000000",
}
NETWORK_SYSCTLS = {
    "net.ipv4.ip_forward": "1",
    "net.ipv4.conf.all.forwarding": "1",
    "net.ipv4.conf.default.forwarding": "1",
    "net.ipv4.conf.all.route_localnet": "1",
    "net.ipv4.conf.default.route_localnet": "1",
    "net.ipv6.conf.all.forwarding": "1",
    "net.ipv6.conf.default.forwarding": "1",
}
NODE_SYSCTLS = KUBELET_SYSCTLS | NETWORK_SYSCTLS
RECORDED_SYSCTLS = tuple(NODE_SYSCTLS)
# containerd 1.6 makes this (for shim sockets) whatever its configured state directory.
_CONTAINERD_RUN = Path("/run/containerd")


# -- what the machine must have -------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    """A program the real node runs, and the Debian package that ships it."""

    path: str
    package: str


REQUIREMENTS = (
    Requirement("containerd", "containerd"),
    Requirement("containerd-shim-runc-v2", "containerd"),
    Requirement("ctr", "containerd"),
    Requirement("runc", "runc"),
    Requirement(str(CNI_BIN_DIR / "bridge"), "containernetworking-plugins"),
    Requirement(str(CNI_BIN_DIR / "host-local"), "containernetworking-plugins"),
    Requirement(str(CNI_BIN_DIR / "loopback"), "containernetworking-plugins"),
    Requirement("catatonit", "catatonit"),
    Requirement("iptables", "iptables"),
    Requirement("ip", "iproute2"),
    Requirement("mount", "mount"),
)
PACKAGES = tuple(dict.fromkeys(r.package for r in REQUIREMENTS))


def _found(path: str) -> bool:
    if "/" in path:
        return os.access(path, os.X_OK)
    return shutil.which(path) is not None or any(
        os.access(Path(directory) / path, os.X_OK) for directory in ("/usr/sbin", "/sbin")
    )


def program(name: str) -> str:
    """The absolute path of `name` (also looked up in the sbin directories, which a
    non-login PATH may lack)."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        raise ClusterError(f"{name} is not installed")
    return found


def missing_requirements() -> list[str]:
    """Why this machine cannot run a real node, one line each (empty when it can)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("a real node runs containers, mounts and network settings: run as root")
    missing = [r for r in REQUIREMENTS if not _found(r.path)]
    if missing:
        packages = " ".join(dict.fromkeys(r.package for r in missing))
        names = ", ".join(r.path for r in missing)
        problems.append(
            f"missing {names}; install them with `apt-get install -y {packages}` "
            "(Debian/Ubuntu packages)"
        )
    if not cgroup_mounts():
        problems.append("no cgroup file system is mounted (the kubelet needs cgroups)")
    return problems


# -- kernel settings ------------------------------------------------------------------


def _sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def read_sysctls(names: tuple[str, ...] = RECORDED_SYSCTLS) -> dict[str, str]:
    """The current values of `names` (settings this kernel does not have are left out)."""
    values = {}
    for name in names:
        with contextlib.suppress(OSError):
            values[name] = _sysctl_path(name).read_text(encoding="utf-8").strip()
    return values


def write_sysctl(name: str, value: str) -> None:
    try:
        _sysctl_path(name).write_text(value + "\n", encoding="utf-8")
    except OSError as exc:
        raise ClusterError(f"cannot set {name} to {value}: {exc}") from exc


@contextlib.contextmanager
def _machine_lock() -> Iterator[None]:
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    with (RUN_ROOT / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _users_dir() -> Path:
    return RUN_ROOT / "users"


def _baseline_file() -> Path:
    return RUN_ROOT / "baseline.json"


def _live_users() -> dict[str, Path]:
    """Nodes recorded as using the machine whose node state still exists."""
    users = {}
    directory = _users_dir()
    if directory.is_dir():
        for entry in directory.iterdir():
            state_file = Path(entry.read_text(encoding="utf-8").strip())
            if state_file.is_file():
                users[entry.name] = state_file
            else:
                entry.unlink(missing_ok=True)
    return users


def acquire_machine(layout: NodeLayout) -> None:
    """Record the machine's settings if no other real node runs, then count this one."""
    with _machine_lock():
        if not _live_users() or not _baseline_file().is_file():
            baseline = {
                "sysctls": read_sysctls(),
                "containerd_run_existed": _CONTAINERD_RUN.exists(),
            }
            _baseline_file().write_text(json.dumps(baseline, indent=2), encoding="utf-8")
        _users_dir().mkdir(parents=True, exist_ok=True)
        (_users_dir() / layout.ident).write_text(str(layout.state_file), encoding="utf-8")


def settings_to_restore(
    baseline: dict[str, str], current: dict[str, str]
) -> dict[str, tuple[str, str]]:
    """{setting: (current, recorded)} for the settings to put back: those that differ
    from the record *and* hold the value a node component sets. A setting someone else
    changed meanwhile (e.g. podman turning on forwarding) is theirs: left as it is."""
    return {
        name: (current[name], value)
        for name, value in baseline.items()
        if name in current and current[name] != value and current[name] == NODE_SYSCTLS.get(name)
    }


def release_machine(layout: NodeLayout) -> dict[str, tuple[str, str]]:
    """Stop counting this node; when it was the last, put the recorded settings back.

    Returns what was changed back: {setting: (found, restored)}.
    """
    restored: dict[str, tuple[str, str]] = {}
    if not RUN_ROOT.is_dir():
        return restored
    with _machine_lock():
        (_users_dir() / layout.ident).unlink(missing_ok=True)
        if _live_users():
            return restored
        try:
            baseline = json.loads(_baseline_file().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            baseline = None
        if baseline is not None:
            restored = settings_to_restore(baseline["sysctls"], read_sysctls())
            for name, (_current, value) in restored.items():
                write_sysctl(name, value)
            if not baseline.get("containerd_run_existed", True):
                _remove_empty_tree(_CONTAINERD_RUN)
        _baseline_file().unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            _users_dir().rmdir()
        # The last node leaves nothing behind, not even the lock (a start waiting for
        # it at this very moment would lock the removed file: harmless, it then finds
        # no record and makes a new one).
        (RUN_ROOT / ".lock").unlink(missing_ok=True)
    return restored


def _remove_empty_tree(root: Path) -> None:
    """Remove `root` and its directories if they hold no files."""
    if not root.is_dir():
        return
    for directory, _subdirs, _files in sorted(os.walk(root), key=lambda w: -len(w[0])):
        with contextlib.suppress(OSError):
            os.rmdir(directory)


# -- helpers ------------------------------------------------------------------------


def run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise ClusterError(f"`{' '.join(argv)}` failed: {result.stderr.strip()}")
    return result


def cgroup_mounts() -> list[Path]:
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split()[0] in ("cgroup", "cgroup2"):
            mounts.append(Path(unescape(fields[0].split()[4])))
    return mounts


def unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        path = path.replace(code, char)
    return path
