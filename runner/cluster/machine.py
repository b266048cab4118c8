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
import ctypes
import fcntl
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from runner.cluster.nodeconfig import CNI_BIN_DIR, RUN_ROOT, NodeLayout
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
# containerd 1.6 puts each shim's socket here whatever its configured state directory.
CONTAINERD_SHIM_SOCKETS = Path("/run/containerd/s")
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
    if not _cgroup_mounts():
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


# -- network --------------------------------------------------------------------------


def _run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise ClusterError(f"`{' '.join(argv)}` failed: {result.stderr.strip()}")
    return result


def networks_in_use() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine routes or has an address in."""
    used: list[ipaddress.IPv4Network] = []
    for argv in (["ip", "-j", "-4", "route", "show", "table", "all"], ["ip", "-j", "-4", "addr"]):
        output = _run([program("ip"), *argv[1:]], check=False).stdout or "[]"
        for entry in json.loads(output):
            destinations = [entry.get("dst")] + [
                f"{a['local']}/{a['prefixlen']}" for a in entry.get("addr_info", [])
            ]
            for destination in destinations:
                if not destination or destination == "default":
                    continue
                with contextlib.suppress(ValueError):
                    used.append(ipaddress.ip_network(destination, strict=False))  # type: ignore[arg-type]
    return used


def create_bridge(name: str, address: ipaddress.IPv4Interface) -> None:
    """The pods' bridge with our address on it; IPv6 off (pods reach this machine only
    through the IPv4 rules below); route_localnet on, so that traffic DNATed to the
    loopback API server may be routed (the setting goes away with the bridge)."""
    ip = program("ip")
    if _run([ip, "link", "show", name], check=False).returncode != 0:
        _run([ip, "link", "add", name, "type", "bridge"])
    write_sysctl(f"net.ipv6.conf.{name}.disable_ipv6", "1")
    write_sysctl(f"net.ipv4.conf.{name}.route_localnet", "1")
    _run([ip, "addr", "replace", str(address), "dev", name])
    _run([ip, "link", "set", name, "up"])


def delete_bridge(name: str) -> bool:
    ip = program("ip")
    if _run([ip, "link", "show", name], check=False).returncode != 0:
        return False
    _run([ip, "link", "delete", name])
    return True


@dataclass(frozen=True)
class PodNetworkRules:
    """The iptables rules of one node (all in chains named after it)."""

    bridge: str
    node_ip: str
    service_ip: str
    apiserver_port: int


def _rule_specs(
    layout: NodeLayout, rules: PodNetworkRules
) -> list[tuple[str, str, str, list[str]]]:
    """(table, builtin chain, our chain, [our chain's rules as iptables arguments])."""
    bridge = rules.bridge
    return [
        (
            "nat",
            "PREROUTING",
            layout.chain("DNAT"),
            [
                # Stands in for kube-proxy: the `kubernetes` Service is the API server.
                f"-i {bridge} -d {rules.service_ip}/32 -p tcp --dport 443 -j DNAT "
                f"--to-destination 127.0.0.1:{rules.apiserver_port}",
            ],
        ),
        (
            "filter",
            "INPUT",
            layout.chain("INPUT"),
            [
                # Pods reach this machine only as the API server (DNATed above) and with
                # replies to connections the machine opened (probes, logs, exec).
                f"-i {bridge} -m conntrack --ctstate ESTABLISHED,RELATED,DNAT -j RETURN",
                f"-i {bridge} -j DROP",
            ],
        ),
        (
            "filter",
            "FORWARD",
            layout.chain("FORWARD"),
            # Nothing from the pods leaves through another interface.
            [f"-i {bridge} ! -o {bridge} -j DROP", f"-o {bridge} ! -i {bridge} -j DROP"],
        ),
    ]


def install_rules(layout: NodeLayout, rules: PodNetworkRules) -> None:
    remove_rules(layout)
    iptables = program("iptables")
    for table, builtin, chain, specs in _rule_specs(layout, rules):
        _run([iptables, "-w", "-t", table, "-N", chain])
        for spec in specs:
            _run([iptables, "-w", "-t", table, "-A", chain, *spec.split()])
        _run([iptables, "-w", "-t", table, "-I", builtin, "1", "-j", chain])


def remove_rules(layout: NodeLayout) -> list[str]:
    """Delete our chains and the jumps to them; returns the chains removed."""
    removed: list[str] = []
    try:
        iptables = program("iptables")
    except ClusterError:
        return removed
    for table, builtin, chain in (
        ("nat", "PREROUTING", layout.chain("DNAT")),
        ("filter", "INPUT", layout.chain("INPUT")),
        ("filter", "FORWARD", layout.chain("FORWARD")),
    ):
        jump = [iptables, "-w", "-t", table, "-D", builtin, "-j", chain]
        while _run(jump, check=False).returncode == 0:
            pass
        if _run([iptables, "-w", "-t", table, "-F", chain], check=False).returncode == 0:
            _run([iptables, "-w", "-t", table, "-X", chain], check=False)
            removed.append(f"{table}/{chain}")
    return removed


def iptables_chains(family: str = "ipv4") -> dict[str, list[str]]:
    """Every chain of every table of `family` (ipv4 or ipv6), for checks."""
    binary = "iptables-save" if family == "ipv4" else "ip6tables-save"
    output = _run([program(binary)], check=False).stdout
    chains: dict[str, list[str]] = {}
    table = ""
    for line in output.splitlines():
        if line.startswith("*"):
            table = line[1:]
            chains[table] = []
        elif line.startswith(":"):
            chains[table].append(line[1:].split()[0])
    return chains


# -- processes, mounts, cgroups -------------------------------------------------------


def _cgroup_mounts() -> list[Path]:
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split()[0] in ("cgroup", "cgroup2"):
            mounts.append(Path(_unescape(fields[0].split()[4])))
    return mounts


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


def _unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        path = path.replace(code, char)
    return path


def mounts_under(roots: tuple[Path, ...]) -> list[Path]:
    """Mount points at or below any of `roots`, deepest first."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        point = Path(_unescape(line.split()[4]))
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
    _run([mount, "--bind", str(source), str(target)])
    _run([mount, "--make-private", str(target)])


def remove_cgroups(cgroup_root: str, *, timeout: float = 5) -> list[Path]:
    """rmdir this node's cgroup tree in every hierarchy (a cgroup is removable once its
    processes are gone, which may take a moment after SIGKILL)."""
    removed = []
    for mount in _cgroup_mounts():
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
    for mount in _cgroup_mounts():
        if (mount / "cgroup.procs").exists():
            (mount / cgroup_root.lstrip("/")).mkdir(exist_ok=True)


def remaining_cgroups(cgroup_root: str) -> list[Path]:
    return [
        mount / cgroup_root.lstrip("/")
        for mount in _cgroup_mounts()
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
