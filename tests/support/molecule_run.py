"""`molecule test` of projects' scenarios on the tests' cluster, a few at a time, each
wall time printed.

Most of a scenario's time is Ansible starting up and the operator reconciling, so
scenarios of different projects (and different scenarios of one project: each has its
own test namespace, RBAC names and Molecule ephemeral directory) run side by side.
What they share on the cluster, a CRD two of them install, must be installed before
they start: a scenario removes at cleanup the CRDs its prepare created, and would pull
one from under another scenario still using it. A scenario that changes such a CRD
(a conversion webhook on it) runs alone, with `molecule_test`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
TAIL_LINES = 120
TIMEOUT = 1700


@dataclass(frozen=True)
class ScenarioRun:
    """How one `molecule test` ended."""

    project: Path
    scenario: str
    returncode: int
    seconds: float
    log: Path

    def tail(self) -> str:
        lines = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(lines[-TAIL_LINES:])


def environ(kubeconfig: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        # molecule runs ansible-playbook, and the scenarios ansible-operator, from PATH.
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "NO_COLOR": "1",
        "ANSIBLE_NOCOLOR": "1",
    }
    env.pop("WATCH_NAMESPACE", None)
    return env


class MoleculeRuns:
    """`molecule test` runs started with `start`, at most `workers` at once; `result`
    waits for one. `close` kills what still runs (a failed or interrupted session) and
    waits for the pool: use it as a fixture's tear-down."""

    def __init__(self, kubeconfig: Path, logs: Path, *, workers: int) -> None:
        self._env = environ(kubeconfig)
        self._logs = logs
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="molecule")
        self._runs: dict[tuple[Path, str], Future[ScenarioRun]] = {}
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._closed = False

    def start(self, project: Path, scenario: str) -> None:
        self._runs[(project, scenario)] = self._pool.submit(self._run, project, scenario)

    def result(self, project: Path, scenario: str) -> ScenarioRun:
        return self._runs[(project, scenario)].result(timeout=TIMEOUT * len(self._runs))

    def _run(self, project: Path, scenario: str) -> ScenarioRun:
        log = self._logs / f"{project.name}-{scenario}.log"
        # Its own ephemeral directory (Molecule's default is named after the project
        # directory, which other checkouts on the machine may share).
        ephemeral = self._logs / f"{project.name}-{scenario}"
        env = {**self._env, "MOLECULE_EPHEMERAL_DIRECTORY": str(ephemeral)}
        started = time.monotonic()
        with log.open("wb") as out:
            with self._lock:
                if self._closed:
                    return ScenarioRun(project, scenario, -1, 0.0, log)
                proc = subprocess.Popen(
                    [str(BIN / "molecule"), "test", "--scenario-name", scenario],
                    cwd=project,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                self._running.add(proc)
            try:
                returncode = proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                _kill(proc)
                returncode = proc.wait()
            finally:
                if proc.returncode != 0:
                    _stop_operator(ephemeral)
                with self._lock:
                    self._running.discard(proc)
        return ScenarioRun(project, scenario, returncode, time.monotonic() - started, log)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for proc in self._running:
                _kill(proc)
        self._pool.shutdown(wait=True, cancel_futures=True)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Molecule and its ansible-playbook (the process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _stop_operator(ephemeral: Path) -> None:
    """The operator a converge started in a session of its own (`operator.pid` in the
    ephemeral directory), when a killed or failed scenario left it running."""
    try:
        pid = int((ephemeral / "operator.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if b"runner.cli" in cmdline or b"ansible-operator" in cmdline:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)


def workers() -> int:
    """Scenarios run at once: one per core, at least two (they wait a good part of their
    time), at most three."""
    return max(2, min(3, os.cpu_count() or 1))


def molecule_test(
    project: Path, scenario: str, *, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One `molecule test`, alone (a scenario that must not run beside others, e.g. one
    that installs a CRD of the same name with a conversion webhook); fail with the end of
    Molecule's output unless it passes."""
    started = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "molecule"), "test", "--scenario-name", scenario],
        cwd=project,
        env=environ(kubeconfig),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(
            f"\nmolecule test -s {scenario} ({project.name}): {elapsed:.0f} s wall time "
            f"(exit {proc.returncode})"
        )
    tail = "\n".join(proc.stdout.splitlines()[-TAIL_LINES:])
    assert proc.returncode == 0, f"molecule test -s {scenario} failed; its output ends:\n{tail}"
