"""The operators under comparison: starting each (ours or the Go one) the same way,
waiting for it to be ready, counting its Ansible runs, stopping it and its leftovers.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.devtools.cluster.processes import free_port

from .base import REPO, VENV
from .sampling import TreeSampler

# The Go operator's proxy (hard-coded in the kubeconfig it gives Ansible) and its
# user-metrics listener (hard-coded localhost:5050).
GO_FIXED_PORTS = (8888, 5050)


def port_in_use(port: int) -> bool:
    for host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                return True
    return False


def wait_ports_free(ports: tuple[int, ...], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while busy := [port for port in ports if port_in_use(port)]:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"port(s) {busy} in use for {timeout:.0f} s; the Go operator needs 8888 (its "
                "proxy: the kubeconfig it gives Ansible hard-codes http://localhost:8888) "
                "and 5050 (its user-metrics listener, hard-coded too)"
            )
        time.sleep(2)


def compile_bytecode(repo: Path = REPO) -> None:
    """Byte-compile our `runner` package as installing it would (pip compiles a wheel's
    modules; the image's package has its .pyc files). The development checkout is an
    editable install, and with PYTHONDONTWRITEBYTECODE set every operator and every
    zygote would compile its modules at each start, which no installed operator does."""
    subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "compileall", "-q", str(repo / "runner")],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def our_backends(venv: Path = VENV) -> list[str]:
    """The --ansible-backend choices `ansible-operator run` offers ([] without the flag)."""
    text = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "runner.cli", "run", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    match = re.search(r"--ansible-backend \{([^}]*)\}", text)
    if match:
        return [choice.strip() for choice in match.group(1).split(",")]
    return ["runner", "fast"] if "--ansible-backend" in text else []


_OUR_RUN_END = re.compile(r"reconcile \S+ \S+: (?:succeeded|failed) in ")


@dataclass
class OperatorSpec:
    key: str  # go, runner, fast
    label: str
    kind: str  # go or ours
    backend: str | None = None


@dataclass
class Running:
    spec: OperatorSpec
    process: subprocess.Popen[bytes]
    log_path: Path
    metrics_port: int
    health_port: int
    sampler: TreeSampler
    runner_dir: Path
    namespace: str
    started: float
    rusage: Any = None
    returncode: int | None = None
    log_file: Any = None
    _offset: int = 0
    _started: int = 0
    _finished: int = 0

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()

    def _scan(self) -> None:
        """Count run starts and ends in the log lines written since the last call."""
        with self.log_path.open("rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read()
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        for raw in chunk[:end].splitlines():
            line = raw.decode(errors="replace")
            if self.spec.kind == "ours":
                if "running Ansible" in line:
                    self._started += 1
                elif _OUR_RUN_END.search(line):
                    self._finished += 1
            elif '"logger":"runner"' in line and (
                "Ansible-runner exited" in line or '"level":"error"' in line
            ):
                self._finished += 1

    def runs(self) -> int:
        """Ansible runs started so far: ours from the log, the Go operator's from its
        `ansible_operator_reconciles` histogram (it times runner.Run, which starts one
        ansible-runner per call)."""
        self._scan()
        if self.spec.kind == "ours":
            return self._started
        text = self.metrics()
        found = re.findall(r"^ansible_operator_reconciles_count\{[^}]*\}\s+(\S+)$", text, re.M)
        return int(sum(float(value) for value in found))

    def finished(self) -> int:
        """Ansible runs finished so far (from the log)."""
        self._scan()
        return self._finished

    def alive(self) -> bool:
        """Without reaping it: stop_operator() reaps with wait4 to get the rusage."""
        if self.returncode is not None:
            return False
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, self.process.pid, flags) is None


def operator_env(
    namespace: str, kubeconfig: Path, runner_dir: Path, venv: Path = VENV
) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "K8S_AUTH_", "KUBE"))
        and key not in ("WATCH_NAMESPACE", "VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(
        {
            "KUBECONFIG": str(kubeconfig),
            "WATCH_NAMESPACE": namespace,
            # Both put ansible_python_interpreter=$VIRTUAL_ENV/bin/python3 in the inventory.
            "VIRTUAL_ENV": str(venv),
            "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
            "ANSIBLE_GATHERING": "explicit",
            "ANSIBLE_COLLECTIONS_PATH": str(REPO / "runner" / "collections"),
            "ANSIBLE_OPERATOR_RUNNER_DIR": str(runner_dir),
        }
    )
    return env


def start_operator(
    spec: OperatorSpec,
    *,
    go_binary: Path,
    project: Path,
    namespace: str,
    kubeconfig: Path,
    work: Path,
    concurrency: int,
    venv: Path = VENV,
    extra_args: tuple[str, ...] = (),
    wrapper: tuple[str, ...] = (),
) -> Running:
    """Start `spec`'s operator out of cluster; `venv` is the Python environment of ours and
    of the Ansible both run (its `bin/` first on PATH, VIRTUAL_ENV); `extra_args` go after
    the common flags, `wrapper` before the command (e.g. a shell that moves itself into a
    cgroup, then execs the rest)."""
    metrics_port, health_port = free_port(), free_port()
    runner_dir = work / f"runner-{spec.key}"
    common = [
        "--watches-file",
        str(project / "watches.yaml"),
        "--max-concurrent-reconciles",
        str(concurrency),
        "--metrics-bind-address",
        f"127.0.0.1:{metrics_port}",
        "--health-probe-bind-address",
        f"127.0.0.1:{health_port}",
        "--leader-elect=false",
    ]
    if spec.kind == "go":
        wait_ports_free(GO_FIXED_PORTS)
        command = [str(go_binary), "run", *common]
    else:
        command = [
            str(venv / "bin" / "python"),
            "-m",
            "runner.cli",
            "run",
            *common,
            "--proxy-port",
            "0",
            "--user-metrics-bind-address",
            "127.0.0.1:0",
        ]
        if spec.backend:
            command += ["--ansible-backend", spec.backend]
    command = [*wrapper, *command, *extra_args]
    env = operator_env(namespace, kubeconfig, runner_dir, venv)
    if spec.kind == "ours":
        env["PYTHONPATH"] = str(REPO)
    log_path = work / f"operator-{spec.key}.log"
    log_file = log_path.open("wb")
    log_file.write(("$ " + " ".join(command) + "\n").encode())
    log_file.flush()
    process = subprocess.Popen(
        command,
        cwd=project,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    sampler = TreeSampler(process.pid)
    sampler.start()
    return Running(
        spec,
        process,
        log_path,
        metrics_port,
        health_port,
        sampler,
        runner_dir,
        namespace,
        time.monotonic(),
        log_file=log_file,
    )


def wait_ready(op: Running, timeout: float = 120) -> float:
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{op.health_port}/readyz"
    while time.monotonic() < deadline:
        if not op.alive():
            raise RuntimeError(f"{op.spec.label} exited early:\n{op.log()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - op.started
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{op.spec.label} not ready after {timeout:.0f} s:\n{op.log()[-3000:]}")


def stop_operator(op: Running, timeout: float = 40) -> None:
    """SIGTERM, then SIGKILL; reap with wait4 to get the tree's rusage; kill leftovers."""
    descendants = set(op.sampler.descendants)
    op.sampler.stop()
    pid = op.process.pid
    if op.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while True:
            done, status, rusage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                    os.kill(pid, signal.SIGKILL)
                done, status, rusage = os.wait4(pid, 0)
                break
            time.sleep(0.1)
        op.returncode = os.waitstatus_to_exitcode(status)
        op.process.returncode = op.returncode
        op.rusage = rusage
    # Children left behind (ansible-runner runs in their own sessions) must not go on
    # touching the cluster.
    for child in descendants:
        with contextlib.suppress(OSError):
            environ = Path(f"/proc/{child}/environ").read_bytes()
            if f"WATCH_NAMESPACE={op.namespace}".encode() in environ:
                os.kill(child, signal.SIGKILL)
    if op.log_file:
        op.log_file.close()
