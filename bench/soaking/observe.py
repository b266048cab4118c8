"""What the soak watches while it runs, and the state of each replica at one moment.

- `Sampler`: every few seconds, CPU seconds and RSS of every live operator process (its
  whole tree's CPU, the operator's own RSS: `bench.compare.sampling.TreeSampler`), and
  the machine's load average, for the chart and table of CPU and RSS over time;
- `LeaseObserver`: the election's Lease as the API server has it, every half second,
  through the admin client (not a replica's forwarder), with the time each request
  began and was answered: an independent record of who held it;
- `snapshot`: one replica's resources now (RSS, fds, processes, zygotes, run
  directories, processes left by its earlier incarnations).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.ansible import proctree
from runner.ansible.artifacts import find_data_dirs, list_runs
from runner.ansible.rundir import OWNER_FILE, process_dirs

from .cluster import SYSTEM_NAMESPACE, SoakCluster
from .faults import zygotes
from .replicas import ELECTION_ID, Replica, Replicas, marked_processes


@dataclass(frozen=True)
class Point:
    """One sample of one incarnation: wall time, its tree's CPU seconds, RSS (MiB) of the
    operator process and of its descendants, processes in the tree."""

    at: float
    incarnation: str
    replica: str
    cpu_s: float
    rss_mib: float
    desc_rss_mib: float
    procs: int


class Sampler:
    def __init__(self, replicas: Replicas, *, interval: float = 2.0) -> None:
        self.replicas = replicas
        self.interval = interval
        self.points: list[Point] = []
        self.load: list[tuple[float, float]] = []
        """(wall time, the machine's 1-minute load average) at each sample."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.load.append((time.time(), os.getloadavg()[0]))
            for incarnation in self.replicas.incarnations():
                if not incarnation.alive():
                    continue
                sample = incarnation.sampler.sample()
                if not sample.root_rss:
                    continue
                self.points.append(
                    Point(
                        at=time.time(),
                        incarnation=incarnation.id,
                        replica=incarnation.replica,
                        cpu_s=sample.cpu_s,
                        rss_mib=round(sample.root_rss / 2**20, 1),
                        desc_rss_mib=round(sample.desc_rss / 2**20, 1),
                        procs=sample.procs,
                    )
                )


@dataclass(frozen=True)
class LeaseSeen:
    asked: float
    answered: float
    holder: str


class LeaseObserver:
    def __init__(self, cluster: SoakCluster, *, interval: float = 0.5) -> None:
        self.cluster = cluster
        self.interval = interval
        self.seen: list[LeaseSeen] = []
        self.unanswered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        api = client.CoordinationV1Api(self.cluster.client())
        while not self._stop.wait(self.interval):
            asked = time.time()
            try:
                lease = api.read_namespaced_lease(ELECTION_ID, SYSTEM_NAMESPACE, _request_timeout=2)
            except Exception:
                self.unanswered += 1
                continue
            holder = (lease.spec.holder_identity if lease.spec else None) or ""
            self.seen.append(LeaseSeen(asked=asked, answered=time.time(), holder=holder))


@dataclass
class Snapshot:
    """One replica's resources at one moment (its current incarnation's)."""

    replica: str
    incarnation: str
    at: float
    holding: bool
    rss_mib: float = 0.0
    fds: int = 0
    fd_kinds: dict[str, int] = field(default_factory=dict)
    """The operator's fds by what they are (socket, pipe, anon_inode, a file's path)."""
    procs: list[str] = field(default_factory=list)
    """The processes below the operator, its zygotes first: `pid command` of each."""
    zygotes: int = 0
    process_dirs: int = 0
    process_dir_names: list[str] = field(default_factory=list)
    stale_data_dirs: list[str] = field(default_factory=list)
    """Data directories of CRs that no longer exist (only counted while holding)."""
    unfinished_runs: list[str] = field(default_factory=list)
    """Runs this incarnation started whose artifacts have no final status."""
    leftovers: list[str] = field(default_factory=list)
    """Processes of its earlier incarnations still running."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def _command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)[:160]


_TCP_STATES = {"01": "established", "0A": "listen"}


def _tcp_sockets(pid: int) -> dict[str, tuple[str, int, int]]:
    """Socket inode -> (state, local port, remote port) of the TCP sockets `pid` sees."""
    found = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            found[inode] = (
                _TCP_STATES.get(state, "other"),
                int(local.rsplit(":", 1)[1], 16),
                int(remote.rsplit(":", 1)[1], 16),
            )
    return found


def _fd_kinds(pid: int, *, api_port: int) -> dict[str, int]:
    """The operator's fds by kind: its TCP connections to the API server (through its
    forwarder, `api_port`), other connections, listening sockets, other sockets, pipes,
    and files by path."""
    kinds: dict[str, int] = {}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return kinds
    tcp = _tcp_sockets(pid)
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            state, _, remote = tcp.get(target[8:-1], ("", 0, 0))
            if state == "established":
                kind = "tcp to the API server" if remote == api_port else "tcp, other"
            elif state:
                kind = f"tcp, {state}"
            else:
                kind = "socket, not TCP"
        elif target.startswith(("pipe:", "anon_inode:")):
            kind = target.split(":", 1)[0]
        else:
            kind = target
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def _describe_dir(directory: Path) -> str:
    try:
        owner = json.loads((directory / OWNER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        owner = {}
    return f"{directory.name} (pid {owner.get('pid', '?')})"


def _own_process_dir(replica: Replica, pid: int) -> Path | None:
    base = replica.runner_dir_seen() or replica.runner_dir
    for directory in process_dirs(base):
        try:
            owner = json.loads((directory / OWNER_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if owner.get("pid") == pid:
            return directory
    return None


def snapshot(replica: Replica, *, existing: Collection[str], token: str) -> Snapshot:
    """`existing`: the keys (namespace/name) of the CRs that exist now."""
    current = replica.current()
    if current is None or not current.alive():
        return Snapshot(replica=replica.name, incarnation="", at=time.time(), holding=False)
    log = current.oplog()
    holding = log.holding_from is not None and log.lost_at is None
    pid = current.pid
    found = Snapshot(replica=replica.name, incarnation=current.id, at=time.time(), holding=holding)
    found.rss_mib = _rss_mib(pid)
    found.fd_kinds = _fd_kinds(pid, api_port=replica.forwarder.port)
    found.fds = sum(found.fd_kinds.values())
    own = zygotes(pid)
    below = own + [child for child in proctree.descendants(pid) if child not in own]
    found.procs = [f"{child} {_command(child)}" for child in below]
    found.zygotes = len(own)
    base = replica.runner_dir_seen() or replica.runner_dir
    found.process_dir_names = [_describe_dir(d) for d in process_dirs(base)]
    found.process_dirs = len(found.process_dir_names)
    own_dir = _own_process_dir(replica, pid)
    if own_dir is not None:
        for data_dir in find_data_dirs(own_dir):
            key = f"{data_dir.parent.name}/{data_dir.name}"
            if holding and key not in existing:
                found.stale_data_dirs.append(key)
            for run in list_runs(data_dir):
                if run.status is None and run.started.timestamp() >= current.started:
                    found.unfinished_runs.append(f"{key} {run.ident}")
    for earlier in replica.incarnations[:-1]:
        for leftover in marked_processes(f"{token}/{earlier.id}"):
            found.leftovers.append(f"{earlier.id}: {leftover} {_command(leftover)}")
    return found
