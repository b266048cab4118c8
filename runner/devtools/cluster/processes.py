"""Start, watch and stop the control plane's processes, and probe their endpoints.

Processes start in their own session so they outlive `cluster up`; a pid file per
component records them. Stopping checks that the pid still runs our binary before
signalling it, so a reused pid is never killed by mistake.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.errors import ClusterError

LOOPBACK = "127.0.0.1"


# Ports we choose lie below the kernel's ephemeral range: a port from that range, free
# when probed, can be given to any outgoing connection's socket before our server binds
# it (CI saw etcd's peer port taken so while other clusters' clients were busy).
_LOWEST_PORT = 20000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()


def ephemeral_range_start() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port() -> int:
    """A loopback TCP port free now, outside the ephemeral range, not given out before
    by this process (a server started in another process may still take it: rarely, as
    the choice is random among thousands)."""
    highest = ephemeral_range_start()
    if highest - _LOWEST_PORT < 1000:  # an unusual range: let the kernel choose
        return _kernel_port()
    for _attempt in range(200):
        port = random.randrange(_LOWEST_PORT, highest)
        if port not in _handed_out and not port_in_use(port):
            _handed_out.add(port)
            return port
    return _kernel_port()


def _kernel_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return True
        return False


@dataclass(frozen=True)
class RunningProcess:
    """A started component: what runs, where it logs."""

    name: str
    pid: int
    binary: str
    log: Path


def start(
    name: str,
    argv: Sequence[str],
    *,
    log: Path,
    pid_file: Path,
    env: Mapping[str, str] | None = None,
) -> RunningProcess:
    log.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=None if env is None else dict(env),
        )
    pid_file.write_text(f"{proc.pid}\n", encoding="utf-8")
    return RunningProcess(name=name, pid=proc.pid, binary=argv[0], log=log)


def _reap(pid: int) -> None:
    # A child of this very process (tests start and stop in one process) stays a zombie
    # until waited for.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def is_running(pid: int, binary: str) -> bool:
    """True when `pid` is alive and runs `binary` (not a zombie, not a reused pid)."""
    _reap(pid)
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    if state == "Z":
        return False
    if cmdline[0]:
        return cmdline[0].decode(errors="replace") == binary
    # An empty cmdline is seen for a moment while a process execs or, on a loaded
    # machine, while its memory is being set up: fall back to the executable's path.
    try:
        return Path(f"/proc/{pid}/exe").resolve() == Path(binary).resolve()
    except OSError:
        return True


def stop(process: RunningProcess, *, grace: float) -> bool:
    """SIGTERM, wait up to `grace` seconds, then SIGKILL. Returns whether it was running."""
    if not is_running(process.pid, process.binary):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not is_running(process.pid, process.binary):
            return True
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while is_running(process.pid, process.binary) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        content = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(content[-lines:])


@dataclass(frozen=True)
class Endpoint:
    """An HTTP(S) endpoint on loopback and how to authenticate to it."""

    url: str
    ca_file: Path | None = None
    token: str | None = None
    verify: bool = True

    def _context(self) -> ssl.SSLContext | None:
        if not self.url.startswith("https"):
            return None
        if not self.verify:
            return ssl._create_unverified_context()
        return ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)

    def request(
        self, path: str, *, method: str = "GET", body: Any = None, timeout: float = 2.0
    ) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self._context()) as resp:
                return int(resp.status), bytes(resp.read())
        except urllib.error.HTTPError as err:
            return int(err.code), err.read()

    def ok(self, path: str) -> bool:
        # Generous: an API server starved of CPU while it bootstraps can take seconds to
        # answer, and a shorter timeout would count every answer as "not ready".
        try:
            status, _ = self.request(path, timeout=5.0)
        except (OSError, urllib.error.URLError):
            return False
        return status == 200


def poll_while_running(
    process: RunningProcess,
    ready: Callable[[], bool],
    *,
    timeout: float,
    interval: float = 0.1,
    exited: str | None = None,
) -> bool:
    """Call `ready` every `interval` seconds until it is true (True) or `timeout` passes
    (False); fail at once, with the log's last lines, if `process` exits meanwhile.
    `exited` is the start of that error (default: "<name> exited during start-up")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        if not is_running(process.pid, process.binary):
            raise ClusterError(
                f"{exited or f'{process.name} exited during start-up'}; last lines of "
                f"{process.log}:\n{log_tail(process.log)}"
            )
        time.sleep(interval)
    return False


def wait_until_ready(
    process: RunningProcess, endpoint: Endpoint, path: str, *, timeout: float
) -> None:
    """Poll `path` until it answers 200; fail early, with the log, if the process exits."""
    if poll_while_running(process, lambda: endpoint.ok(path), timeout=timeout):
        return
    raise ClusterError(
        f"{process.name} did not answer {endpoint.url}{path} within {timeout:.0f} s"
        f"{failing_checks(endpoint, path)}; last lines of {process.log}:\n{log_tail(process.log)}"
    )


def failing_checks(endpoint: Endpoint, path: str) -> str:
    """The checks a Kubernetes-style health endpoint reports failing (its `?verbose`
    lines that start with `[-]`), as " (failing: a, b)", or "" when it cannot tell."""
    try:
        _, body = endpoint.request(f"{path}?verbose", timeout=5.0)
    except (OSError, urllib.error.URLError):
        return ""
    failing = [
        line[3:].split(" ", 1)[0]
        for line in body.decode(errors="replace").splitlines()
        if line.startswith("[-]")
    ]
    return f" (failing: {', '.join(failing)})" if failing else ""
