"""The operators under comparison, started the same way: operator-sdk's Go
ansible-operator (v1.42.0, built by `runner.devtools.cluster.components`, cached) and
ours with either backend, each over the same project, environment and flags, watching the
namespaces of one phase of the suite.

The Go operator binds 8888 (its API proxy: the kubeconfig it gives Ansible hard-codes
it) and 5050 (its osdk_metric endpoint) and exits if either is taken: it runs while
this process holds `/tmp/ao-go-operator.lock` (bench/compare takes it too), once both
ports are free. It finds `ansible-runner` on `PATH` (the virtualenv's, with the
`ansible-runner-http` plugin it reads job events through) and keeps each CR's runs under
`/tmp/ansible-operator/runner/<group>/<version>/<kind>/<namespace>/<name>` (fixed).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.devtools.cluster import build
from runner.devtools.cluster.components import go_ansible_operator
from runner.devtools.cluster.processes import free_port

from .fixtures import REPO

GO_LOCK = Path("/tmp/ao-go-operator.lock")
GO_PORTS = (8888, 5050)
GO_RUNNER_DIR = Path("/tmp/ansible-operator/runner")
TOKEN_ENV = "DIFF_OPERATOR_TOKEN"
"""Set in each operator's environment: its leftover Ansible processes carry it."""
PYTHON_ENV = "ANSIBLE_OPERATOR_TEST_PYTHON"
KINDS = ("runner", "fast", "go")
"""The phases in order: the Go operator's last, so that ours run while another process
(bench/compare, another checkout's suite) holds the Go-operator lock."""


def test_python() -> Path:
    """The interpreter of the virtualenv both operators run Ansible from (the ansible-core
    line under test): `$ANSIBLE_OPERATOR_TEST_PYTHON`, else the tests' own."""
    return Path(os.environ.get(PYTHON_ENV) or sys.executable)


def venv_of(python: Path) -> Path:
    return python.parent.parent


def go_binary() -> Path:
    """The cached Go ansible-operator; a clear failure when it was never built (it
    takes a quarter of an hour: `make binaries` builds it)."""
    component = go_ansible_operator()
    root = build.cache_root()
    if build.missing([component], root):
        raise RuntimeError(
            "the Go ansible-operator is not built yet: run `make binaries` (or "
            "`ansible-operator cluster up --build-only`) once"
        )
    return build.binary_path(component, root)


def core_version(python: Path) -> str:
    done = subprocess.run(
        [str(python), "-c", "from ansible.release import __version__; print(__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def check_runner_http(python: Path) -> None:
    done = subprocess.run(
        [str(python), "-c", "import ansible_runner_http"], capture_output=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{venv_of(python)} has no ansible-runner-http, which the Go operator reads "
            "Ansible's events through: `make bench-compare-deps` (or `make venv-core218`) "
            "installs it (the `go-operator` extra)"
        )


def _port_taken(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


@contextlib.contextmanager
def go_lock(timeout: float = 1800) -> Iterator[None]:
    """Hold the machine-wide Go-operator lock, and wait for its fixed ports to be free."""
    with GO_LOCK.open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{GO_LOCK} held by another process for {timeout} s"
                    ) from None
                time.sleep(1)
        try:
            while busy := [port for port in GO_PORTS if _port_taken(port)]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"ports {busy} stay taken; the Go operator needs them")
                time.sleep(1)
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\}\s+(\S+)$", re.M)
_BUSY_METRICS = ("controller_runtime_active_workers", "workqueue_depth")


@dataclass
class Operator:
    kind: str  # go, runner, fast
    process: subprocess.Popen[bytes]
    log_path: Path
    health_port: int
    metrics_port: int
    token: str

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def busy(self, controllers: set[str]) -> bool:
        """Whether one of `controllers` (controller-runtime's names, which both operators
        use: `<kind>-<version>-controller`) has a reconcile running or keys waiting in its
        queue (not those waiting for a requeue delay); True when it cannot tell."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                text = answer.read().decode()
        except OSError:
            return True
        for name, labels, value in _SAMPLE.findall(text):
            if name not in _BUSY_METRICS or float(value) == 0:
                continue
            if any(f'"{controller}"' in labels for controller in controllers):
                return True
        return False

    def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the {self.kind} operator exited:\n{self.log()[-4000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the {self.kind} operator is not ready:\n{self.log()[-4000:]}")

    def stop(self, timeout: float = 40) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        _kill_leftovers(self.token)


def _kill_leftovers(token: str) -> None:
    """Ansible processes an operator started in sessions of their own (ansible-runner's
    pexpect) and left running: found by the token in their environment, killed by pid."""
    marker = f"{TOKEN_ENV}={token}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)


def environment(
    *,
    python: Path,
    kubeconfig: Path,
    namespaces: Sequence[str],
    recorder_namespace: str,
    work: Path,
) -> dict[str, str]:
    """What every operator under comparison gets (the same for all)."""
    venv = venv_of(python)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "K8S_AUTH_", "KUBE", "PYTEST", "DIFF_"))
        and key not in ("WATCH_NAMESPACE", "VIRTUAL_ENV", "PYTHONPATH")
    }
    scratch = work / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    env.update(
        {
            "KUBECONFIG": str(kubeconfig),
            "WATCH_NAMESPACE": ",".join(namespaces),
            # ansible_python_interpreter of both inventories is $VIRTUAL_ENV/bin/python3.
            "VIRTUAL_ENV": str(venv),
            "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_GATHERING": "explicit",
            "ANSIBLE_COLLECTIONS_PATH": str(REPO / "runner" / "collections"),
            "TMPDIR": str(scratch),
            "DIFF_RECORDER_KUBECONFIG": str(kubeconfig),
            "DIFF_RECORDER_NAMESPACE": recorder_namespace,
        }
    )
    return env


def start(
    kind: str,
    *,
    project: Path,
    env: dict[str, str],
    work: Path,
    python: Path,
) -> Operator:
    """Start the `kind` operator (`go`, or ours with the `runner` or `fast` backend)."""
    metrics_port, health_port = free_port(), free_port()
    common = [
        "--watches-file",
        "watches.yaml",
        "--max-concurrent-reconciles",
        "2",
        "--metrics-bind-address",
        f"127.0.0.1:{metrics_port}",
        "--health-probe-bind-address",
        f"127.0.0.1:{health_port}",
        "--leader-elect=false",
    ]
    token = uuid.uuid4().hex
    # Ours keeps its runs where this says; the Go operator ignores it (its place is
    # fixed), but has it too: the same environment names for both.
    environ = {**env, TOKEN_ENV: token, "ANSIBLE_OPERATOR_RUNNER_DIR": str(work / "runner")}
    if kind == "go":
        command = [str(go_binary()), "run", *common]
    else:
        command = [str(python), "-m", "runner.cli", "run", *common]
        command += ["--proxy-port", "0", "--user-metrics-bind-address", "127.0.0.1:0"]
        command += ["--zap-encoder", "console", "--ansible-backend", kind]
    log_path = work / f"operator-{kind}.log"
    with log_path.open("wb") as log_file:
        log_file.write(("$ " + " ".join(command) + "\n").encode())
        log_file.flush()
        process = subprocess.Popen(
            command,
            cwd=project,
            env=environ,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Operator(kind, process, log_path, health_port, metrics_port, token)


def clear_go_runs(group: str, namespaces: Sequence[str]) -> None:
    """The Go operator's data directories of the suite's group and namespaces (kept
    there by earlier runs: cluster-scoped CRs have no namespace in their path)."""
    shutil.rmtree(GO_RUNNER_DIR / group, ignore_errors=True)
    for namespace in namespaces:
        for path in GO_RUNNER_DIR.glob(f"*/*/{namespace}"):
            shutil.rmtree(path, ignore_errors=True)
        for path in GO_RUNNER_DIR.glob(f"*/*/*/{namespace}"):
            shutil.rmtree(path, ignore_errors=True)
