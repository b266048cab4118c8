"""Run `ansible-operator run` as a real subprocess against the test cluster, and build
throw-away operator projects (watches.yaml + roles + CRDs) for it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from support.kube import apply, wait_for

REPO = Path(__file__).resolve().parents[2]


def crd(
    *, group: str, kind: str, version: str = "v1alpha1", scope: str = "Namespaced"
) -> dict[str, Any]:
    plural = kind.lower() + "s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "plural": plural,
                "singular": kind.lower(),
                "listKind": kind + "List",
            },
            "scope": scope,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def install_crd(dyn: Any, body: dict[str, Any]) -> Any:
    """Create the CRD, wait until it is Established and served; return its resource."""
    apply(dyn, [body])
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")

    def established() -> bool:
        status = crds.get(name=body["metadata"]["name"]).to_dict().get("status") or {}
        conds = status.get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    wait_for(established, timeout=30, message=f"CRD {body['metadata']['name']} Established")
    spec = body["spec"]
    api_version = f"{spec['group']}/{spec['versions'][0]['name']}"

    def served() -> Any:
        try:
            return dyn.resources.get(api_version=api_version, kind=spec["names"]["kind"])
        except Exception:
            dyn.resources.invalidate_cache()
            return None

    return wait_for(served, timeout=30, message=f"{api_version} {spec['names']['kind']} served")


def write_project(
    root: Path,
    *,
    watches: list[dict[str, Any]],
    roles: dict[str, str] | None = None,
    playbooks: dict[str, str] | None = None,
) -> Path:
    """A project dir: watches.yaml plus roles/<name>/tasks/main.yml and playbooks."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "watches.yaml").write_text(yaml.safe_dump(watches, sort_keys=False))
    for name, tasks in (roles or {}).items():
        task_dir = root / "roles" / name / "tasks"
        task_dir.mkdir(parents=True, exist_ok=True)
        (task_dir / "main.yml").write_text(textwrap.dedent(tasks))
    for name, text in (playbooks or {}).items():
        (root / name).write_text(textwrap.dedent(text))
    return root


BACKEND_ENV = "ANSIBLE_OPERATOR_TEST_BACKEND"
"""`fast` or `runner`: the `--ansible-backend` of every operator the tests start."""


NO_FACTS = {"ANSIBLE_GATHERING": "explicit"}
"""The environment of an operator whose roles use no facts, as an operator image has it
(the scaffolded config/manager sets it): a role's play gathers none. Gathering them is
most of the CPU of a run of a few tasks, so tests that run many such runs set it."""


PYTHON_ENV = "ANSIBLE_OPERATOR_TEST_PYTHON"
"""The interpreter (of a virtualenv with the project installed) that runs every operator
the tests start, and so the ansible-core line they run on; default: the tests' own."""


def operator_python() -> str:
    """The interpreter operators under test run with (see `PYTHON_ENV`)."""
    return os.environ.get(PYTHON_ENV) or sys.executable


def backend_args(args: list[str]) -> list[str]:
    """`--ansible-backend` from `$ANSIBLE_OPERATOR_TEST_BACKEND`, unless `args` has one."""
    backend = os.environ.get(BACKEND_ENV, "")
    if not backend or any(arg.startswith("--ansible-backend") for arg in args):
        return []
    return ["--ansible-backend", backend]


class OperatorProcess:
    """`ansible-operator run` in `project`; always stopped by `stop()` (use as a fixture)."""

    def __init__(
        self,
        project: Path,
        *,
        kubeconfig: Path,
        log: Path,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        prefix: list[str] | None = None,
        python: str | None = None,
    ) -> None:
        """`prefix`: a command that runs the operator, e.g. in its own mount namespace;
        `python`: the interpreter whose `runner.cli` runs (default: `operator_python()`)."""
        self.project = project
        self.log_path = log
        # Temporary files (the zygote's store, Ansible's discovery cache) stay under the
        # test's directory, also when a test kills the operator with -9.
        scratch = log.parent / "tmp"
        scratch.mkdir(parents=True, exist_ok=True)
        environ = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "ANSIBLE_OPERATOR_RUNNER_DIR": str(log.parent / "runner"),
            "TMPDIR": str(scratch),
            **(env or {}),
        }
        if "WATCH_NAMESPACE" not in (env or {}):
            environ.pop("WATCH_NAMESPACE", None)  # the tests' own setting must not leak in
        command = [
            *(prefix or []),
            python or operator_python(),
            "-m",
            "runner.cli",
            "run",
            "--watches-file",
            "watches.yaml",
            "--zap-encoder",
            "console",
            "--max-concurrent-reconciles",
            "4",
            "--proxy-port",
            "0",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            "--user-metrics-bind-address",
            "127.0.0.1:0",
            *backend_args(args or []),
            *(args or []),
        ]
        self._log_file = log.open("wb")
        self.process = subprocess.Popen(
            command,
            cwd=project,
            env=environ,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self, *, timeout: float = 40) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log_file.close()
        return self.process.returncode


class Operators:
    """The operators one test starts (as a fixture's value): each logs to
    `<directory>/operator-<n>.log`; `stop_all` stops them and prints the end of each
    log (pytest shows it with a failing test)."""

    def __init__(self, *, kubeconfig: Path, directory: Path) -> None:
        self.kubeconfig = kubeconfig
        self.directory = directory
        self.started: list[OperatorProcess] = []

    def start(self, project: Path, **options: Any) -> OperatorProcess:
        """An `OperatorProcess` of `project` (`options`: its keyword arguments)."""
        log = self.directory / f"operator-{len(self.started)}.log"
        proc = OperatorProcess(project, kubeconfig=self.kubeconfig, log=log, **options)
        self.started.append(proc)
        return proc

    def stop_all(self, *, tail: int = 4000) -> None:
        for proc in self.started:
            proc.stop()
            print(proc.log()[-tail:])


@contextlib.contextmanager
def operator_running(
    project: Path,
    *,
    kubeconfig: Path,
    log: Path,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[OperatorProcess]:
    """An `OperatorProcess`, stopped on exit, the tail of its log printed (pytest shows
    it with a failing test)."""
    proc = OperatorProcess(project, kubeconfig=kubeconfig, log=log, args=args, env=env)
    try:
        yield proc
    finally:
        proc.stop()
        print(proc.log()[-5000:])
