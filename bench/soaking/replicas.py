"""The operator replicas: `ansible-operator run` processes, each behind a stallable TCP
forwarder to the API server, each with a run directory on a small filesystem of its own,
restarted whenever they exit (as a Deployment's pods are: killed, stopped, or exited
after losing their Lease).

Each start of a replica is an *incarnation* (`a1`, `a2`, ...; its log `op-<n>.log`): a
waiter thread records when its process exited, then when the last process carrying its
marker (`$SOAK_INCARNATION`, inherited by everything it starts) was gone — a run without
an end record ended then at the latest — and starts the next incarnation.

The run directory: as root, a tmpfs mounted on the replica's base for the whole soak
(the disk-full fault fills it); otherwise the operator runs in a mount namespace of its
own (`unshare`) with the tmpfs mounted there, one per incarnation.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bench.compare.sampling import TreeSampler
from tests.support.tcpstall import StallingForwarder, forwarding, kubeconfig_through

from .cluster import NAMESPACE, SYSTEM_NAMESPACE
from .oplog import OpLog
from .oplog import parse as parse_oplog
from .project import INCARNATION_ENV

RING = "soak"
ELECTION_ID = "soak"
RESTART_DELAY = 2.0
"""Seconds between an exit and the next start (a kubelet waits too)."""
GONE_TIMEOUT = 30.0


@dataclass(frozen=True)
class ReplicaOptions:
    sharding: bool
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    rundir_size: str = ""
    """The run directory's tmpfs (`64m`); empty: sized for the soak's CRs (run.py)."""
    max_concurrent_reconciles: int = 4
    graceful_shutdown: float = 10.0


@dataclass
class Incarnation:
    replica: str
    number: int
    process: subprocess.Popen[bytes]
    log: Path
    started: float
    sampler: TreeSampler
    exited: float | None = None
    gone: float | None = None
    code: int | None = None
    signalled: str = ""
    """The fault that ended it (kill9, sigterm), or "" when it exited on its own."""
    signalled_at: float | None = None

    @property
    def id(self) -> str:
        return f"{self.replica}{self.number}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.exited is None

    def oplog(self) -> OpLog:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return OpLog()
        return parse_oplog(text.splitlines())


def marked_processes(marker: str) -> list[int]:
    """Processes whose environment has `SOAK_INCARNATION=<marker>` (exactly)."""
    needle = f"{INCARNATION_ENV}={marker}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


class Replica:
    """One replica slot: its directory, forwarder, run-directory filesystem and
    incarnations."""

    def __init__(
        self,
        name: str,
        *,
        root: Path,
        project: Path,
        admin_kubeconfig: Path,
        token: str,
        options: ReplicaOptions,
        on_event: Callable[[str, str], None],
    ) -> None:
        self.name = name
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.runner_dir = self.dir / "runner"
        self.runner_dir.mkdir(exist_ok=True)
        self.project = project
        self.token = token
        self.options = options
        self._on_event = on_event
        self._lock = threading.Lock()
        self._stack = contextlib.ExitStack()
        admin = yaml.safe_load(admin_kubeconfig.read_text(encoding="utf-8"))
        self.forwarder: StallingForwarder = self._stack.enter_context(
            forwarding(admin["clusters"][0]["cluster"]["server"])
        )
        self.kubeconfig = self.dir / "through-forwarder.kubeconfig"
        self.kubeconfig.write_text(
            yaml.safe_dump(kubeconfig_through(admin, self.forwarder)), encoding="utf-8"
        )
        self.mounted = False
        self.prefix: list[str] = []
        self._mount()
        self.incarnations: list[Incarnation] = []
        self.stopping = False

    # -- the run directory's filesystem -----------------------------------------------

    def _mount(self) -> None:
        size = self.options.rundir_size
        if os.geteuid() == 0:
            subprocess.run(
                [
                    "mount",
                    "-t",
                    "tmpfs",
                    "-o",
                    f"size={size},mode=0700",
                    "soak",
                    str(self.runner_dir),
                ],
                check=True,
            )
            self.mounted = True
            return
        if shutil.which("unshare") is None:
            return  # no disk-full faults on this replica: its run directory is the disk's
        mount = f'mount -t tmpfs -o size={size},mode=0700 soak "$0" && exec "$@"'
        self.prefix = [
            "unshare", "--user", "--map-root-user", "--mount", "--propagation", "private",
            "sh", "-c", mount, str(self.runner_dir),
        ]  # fmt: skip

    def runner_dir_seen(self) -> Path | None:
        """The run directory's base as the current incarnation sees it (its own mount
        namespace's, when it has one); None when there is no small filesystem to fill."""
        if self.mounted:
            return self.runner_dir
        current = self.current()
        if not self.prefix or current is None or not current.alive():
            return None
        return Path(f"/proc/{current.pid}/root") / str(self.runner_dir).lstrip("/")

    # -- processes ----------------------------------------------------------------------

    def current(self) -> Incarnation | None:
        return self.incarnations[-1] if self.incarnations else None

    def command(self) -> list[str]:
        o = self.options
        command = [
            *self.prefix, sys.executable, "-m", "runner.cli", "run",
            "--watches-file", "watches.yaml", "--zap-encoder", "json",
            "--ansible-backend", "fast",
            "--max-concurrent-reconciles", str(o.max_concurrent_reconciles),
            "--graceful-shutdown-timeout", f"{o.graceful_shutdown:g}s",
            "--max-artifacts-bytes", "8Mi",
            "--proxy-port", "0", "--metrics-bind-address", "0",
            "--health-probe-bind-address", "0", "--user-metrics-bind-address", "127.0.0.1:0",
        ]  # fmt: skip
        timing = [o.lease_duration, o.renew_deadline, o.retry_period]
        if o.sharding:
            names = ("lease-duration", "renew-deadline", "retry-period")
            command += [
                "--sharding",
                "--sharding-ring",
                RING,
                "--sharding-namespace",
                SYSTEM_NAMESPACE,
            ]
            command += [f"--sharding-{n}={v:g}s" for n, v in zip(names, timing, strict=True)]
        else:
            names = ("lease-duration", "renew-deadline", "retry-period")
            command += ["--leader-elect", "--leader-election-id", ELECTION_ID]
            command += ["--leader-election-namespace", SYSTEM_NAMESPACE]
            command += [f"--leader-elect-{n}={v:g}s" for n, v in zip(names, timing, strict=True)]
        return command

    def start(self) -> Incarnation:
        with self._lock:
            number = len(self.incarnations) + 1
            marker = f"{self.token}/{self.name}{number}"
            env = {
                **os.environ,
                "KUBECONFIG": str(self.kubeconfig),
                "WATCH_NAMESPACE": NAMESPACE,
                "ANSIBLE_OPERATOR_RUNNER_DIR": str(self.runner_dir),
                "TMPDIR": str(self.dir / "tmp"),
                "ANSIBLE_GATHERING": "explicit",  # the roles use no facts
                "POD_NAME": f"soak-{self.name}",
                INCARNATION_ENV: marker,
            }
            (self.dir / "tmp").mkdir(exist_ok=True)
            log = self.dir / f"op-{number}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    self.command(),
                    cwd=self.project,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            incarnation = Incarnation(
                replica=self.name,
                number=number,
                process=process,
                log=log,
                started=time.time(),
                sampler=TreeSampler(process.pid),
            )
            self.incarnations.append(incarnation)
        self._on_event("start", f"{incarnation.id} (pid {process.pid})")
        threading.Thread(
            target=self._wait, args=(incarnation,), name=f"soak-{incarnation.id}", daemon=True
        ).start()
        return incarnation

    def _wait(self, incarnation: Incarnation) -> None:
        code = incarnation.process.wait()
        incarnation.exited = time.time()
        incarnation.code = code
        marker = f"{self.token}/{incarnation.id}"
        deadline = time.monotonic() + GONE_TIMEOUT
        while marked_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        incarnation.gone = time.time() if not marked_processes(marker) else None
        why = incarnation.signalled or ("lost its Lease" if code == 1 else f"exit {code}")
        self._on_event("exit", f"{incarnation.id} ({why}, code {code})")
        if self.stopping:
            return
        time.sleep(RESTART_DELAY)
        if not self.stopping:
            self.start()

    def send(self, signum: int, fault: str) -> Incarnation | None:
        """Send `signum` to the current incarnation's operator process (only that
        process: what it started must end by itself); the waiter restarts it."""
        with self._lock:
            current = self.current()
            if current is None or not current.alive():
                return None
            current.signalled = fault
            current.signalled_at = time.time()
            with contextlib.suppress(ProcessLookupError):
                os.kill(current.pid, signum)
            return current

    def stop(self) -> None:
        """Stop for good: SIGTERM the current incarnation, wait, unmount, close."""
        self.stopping = True
        current = self.current()
        if current is not None and current.alive():
            with contextlib.suppress(ProcessLookupError):
                current.process.send_signal(signal.SIGTERM)
            try:
                current.process.wait(timeout=self.options.graceful_shutdown + 30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(current.pid, signal.SIGKILL)
                current.process.wait()
        for incarnation in self.incarnations:
            for pid in marked_processes(f"{self.token}/{incarnation.id}"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.forwarder.resume()
        self._stack.close()
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.runner_dir)], check=False)
            self.mounted = False


@dataclass
class Replicas:
    """Every replica of the soak, by name."""

    by_name: dict[str, Replica] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Replica]:
        return iter(self.by_name.values())

    def __getitem__(self, name: str) -> Replica:
        return self.by_name[name]

    def incarnations(self) -> list[Incarnation]:
        return [i for replica in self for i in replica.incarnations]

    def incarnation(self, ident: str) -> Incarnation | None:
        return next((i for i in self.incarnations() if i.id == ident), None)

    def stop(self) -> None:
        threads = [threading.Thread(target=replica.stop) for replica in self]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
