"""Plan vs reconcile: `ansible-operator plan` of a CR against the reconcile `run` makes of it.

The project is --project DIR (its watches.yaml, roles and CRDs under config/crd) with the CR
--cr FILE, e.g. the realroles suite's installer (bench/realroles, 239 task events a run);
without them, a generated role of --tasks N tasks (default 150: ConfigMaps created and
read back, facts set, a status written). For each backend of --backends and --runs times,
in a fresh namespace:

  first    `plan CR -n NS` (nothing exists yet), then the operator (`run`, same backend,
           started and ready first) reconciles the CR created for real: its first run;
  steady   the operator reconciles the CR again once the first run's follow-ups settled
           (an annotation triggers it: the copy of the project watches annotation
           changes), then, with the operator stopped, `plan --cr KIND/NAME -n NS`.

Figures: the plan's wall time (the whole command: Python start, the CR's dry run, the API
proxy, a cold backend: the fast backend's zygote warms up inside it) and its reconcile
(the reconciler's own "succeeded in X s": the same code path as the operator's, which
is the operator's figure); tasks of the run; writes the plan sent as dry runs. Waits
(`k8s` with `wait: true`) are performed by the operator and turned off in a plan.

Run under the machine-wide benchmark lock: flock /tmp/ao-bench.lock .venv/bin/python
bench/plan.py [--project DIR --cr FILE] [--runs 3] [--backends fast,runner]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Run as `python bench/plan.py`, bench/ itself would come first on the path, where its
# queue.py hides the standard library's queue.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
sys.path.insert(0, str(REPO / "tests"))

import yaml  # noqa: E402
from kubernetes import client, config  # noqa: E402
from kubernetes.dynamic import DynamicClient  # noqa: E402
from support.kube import release_custom_resources  # noqa: E402
from support.operator import crd, install_crd  # noqa: E402

from runner.devtools.cluster.layout import default_state_dir  # noqa: E402
from runner.devtools.cluster.local import LocalCluster  # noqa: E402

_SUCCEEDED = re.compile(
    r"reconcile (\S+) (\S+): succeeded in ([0-9.]+) s \(ok=(\d+) changed=(\d+) skipped=(\d+)"
)


def generated_project(root: Path, tasks: int) -> tuple[Path, Path]:
    """A project whose role runs `tasks` tasks; its CR file."""
    body: list[dict[str, Any]] = []
    objects = max(1, tasks // 5)
    for index in range(objects):
        body.append(
            {
                "name": f"ConfigMap {index}",
                "kubernetes.core.k8s": {
                    "definition": {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {
                            "name": f"{{{{ ansible_operator_meta.name }}}}-{index}",
                            "namespace": "{{ ansible_operator_meta.namespace }}",
                            "labels": {"bench": "plan"},
                        },
                        "data": {"index": str(index), "size": "{{ size | string }}"},
                    }
                },
            }
        )
        body.append(
            {
                "name": f"Read {index}",
                "kubernetes.core.k8s_info": {
                    "kind": "ConfigMap",
                    "name": f"{{{{ ansible_operator_meta.name }}}}-{index}",
                    "namespace": "{{ ansible_operator_meta.namespace }}",
                },
                "register": "found",
            }
        )
        body.append(
            {
                "name": f"Remember {index}",
                "ansible.builtin.set_fact": {f"seen_{index}": "{{ found.resources | length }}"},
            }
        )
        body.append(
            {
                "name": f"Check {index}",
                "ansible.builtin.assert": {"that": [f"seen_{index} | int == 1"]},
            }
        )
        body.append(
            {"name": f"Say {index}", "ansible.builtin.debug": {"msg": f"{index}", "verbosity": 2}}
        )
    while len(body) < tasks - 1:
        body.append(
            {"name": f"Fact {len(body)}", "ansible.builtin.set_fact": {"filler": len(body)}}
        )
    body.append(
        {
            "name": "Status",
            "operator_sdk.util.k8s_status": {
                "api_version": "bench.example.com/v1alpha1",
                "kind": "Bulk",
                "name": "{{ ansible_operator_meta.name }}",
                "namespace": "{{ ansible_operator_meta.namespace }}",
                "status": {"objects": objects},
            },
        }
    )
    (root / "roles" / "bulk" / "tasks").mkdir(parents=True)
    (root / "roles" / "bulk" / "tasks" / "main.yml").write_text(
        yaml.safe_dump(body, sort_keys=False)
    )
    (root / "watches.yaml").write_text(
        yaml.safe_dump(
            [
                {
                    "version": "v1alpha1",
                    "group": "bench.example.com",
                    "kind": "Bulk",
                    "role": "bulk",
                    "watchAnnotationsChanges": True,
                }
            ]
        )
    )
    (root / "config" / "crd").mkdir(parents=True)
    (root / "config" / "crd" / "bulk.yaml").write_text(
        yaml.safe_dump(crd(group="bench.example.com", kind="Bulk"))
    )
    cr = root / "cr.yaml"
    cr.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "bench.example.com/v1alpha1",
                "kind": "Bulk",
                "metadata": {"name": "bulk"},
                "spec": {"size": 2},
            }
        )
    )
    return root, cr


def copied_project(source: Path, root: Path) -> Path:
    """`source` copied to `root`, its watches told to reconcile on annotation changes."""
    shutil.copytree(source, root, ignore=shutil.ignore_patterns("molecule", ".git"))
    watches = yaml.safe_load((root / "watches.yaml").read_text())
    for watch in watches:
        watch["watchAnnotationsChanges"] = True
    (root / "watches.yaml").write_text(yaml.safe_dump(watches, sort_keys=False))
    return root


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def environment(kubeconfig: Path, scratch: Path) -> dict[str, str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "TMPDIR": str(scratch)}
    env.pop("WATCH_NAMESPACE", None)
    return env


def plan(project: Path, args: list[str], env: dict[str, str]) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", "plan", *args, "-o", "json", "--log-level", "info"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    wall = time.monotonic() - started
    if done.returncode not in (0, 2):
        raise RuntimeError(
            f"plan failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    report = json.loads(done.stdout)
    found = _SUCCEEDED.search(done.stderr)
    return {
        "wall_s": round(wall, 2),
        "plan_s": report["seconds"],
        "reconcile_s": float(found[3]) if found else None,
        "tasks": report["tasks"]["ok"] + report["tasks"]["skipped"] + report["tasks"]["failed"],
        "changed_tasks": report["tasks"]["changed"],
        "changes": len(report["changes"]),
        "dry_runs": report["dryRunWrites"],
        "not_previewable": len(report["notPreviewable"]),
    }


class Operator:
    def __init__(
        self, project: Path, env: dict[str, str], backend: str, namespace: str, log: Path
    ) -> None:
        self.port = free_port()
        self.log_path = log
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "runner.cli",
                "run",
                "--watches-file",
                "watches.yaml",
                "--ansible-backend",
                backend,
                "--proxy-port",
                "0",
                "--metrics-bind-address",
                "0",
                "--health-probe-bind-address",
                f"127.0.0.1:{self.port}",
                "--zap-encoder",
                "console",
            ],
            cwd=project,
            env={
                **env,
                "WATCH_NAMESPACE": namespace,
                "ANSIBLE_OPERATOR_RUNNER_DIR": str(log.parent / "runner"),
            },
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as answer,
            ):
                if answer.status == 200:
                    return
            time.sleep(0.5)
        raise RuntimeError(f"the operator was not ready:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def runs(self) -> list[re.Match[str]]:
        return list(_SUCCEEDED.finditer(self.log()))

    def next_run(self, after: int, timeout: float = 1800) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.runs()
            if len(found) > after:
                return found[after]
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"no run ended:\n{self.log()[-3000:]}")

    def settle(self, quiet: float = 15) -> int:
        """Wait until no run ended for `quiet` seconds; the number of runs so far."""
        count, since = len(self.runs()), time.monotonic()
        while time.monotonic() - since < quiet:
            time.sleep(1)
            now = len(self.runs())
            if now != count:
                count, since = now, time.monotonic()
        return count

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, 15)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
            self.process.wait()
        self._log.close()


def measure(
    project: Path, cr_file: Path, backend: str, kubeconfig: Path, dyn: Any, work: Path
) -> dict[str, Any]:
    cr = yaml.safe_load(cr_file.read_text())
    kind, name = cr["kind"], cr["metadata"]["name"]
    namespace = f"plan-bench-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(dyn.client)
    core.create_namespace({"metadata": {"name": namespace}})
    scratch = work / f"{backend}-{namespace}"
    scratch.mkdir(parents=True)
    env = environment(kubeconfig, scratch)
    resource = dyn.resources.get(api_version=cr["apiVersion"], kind=kind)
    result: dict[str, Any] = {"backend": backend, "load_before": os.getloadavg()}
    try:
        result["plan_first"] = plan(
            project, [str(cr_file), "-n", namespace, "--ansible-backend", backend], env
        )
        operator = Operator(project, env, backend, namespace, scratch / "operator.log")
        try:
            operator.wait_ready()
            resource.create(
                body={**cr, "metadata": {**cr["metadata"], "namespace": namespace}},
                namespace=namespace,
            )
            first = operator.next_run(0)
            result["reconcile_first"] = _run(first)
            count = operator.settle()
            resource.patch(
                name=name,
                namespace=namespace,
                body={"metadata": {"annotations": {"bench": uuid.uuid4().hex}}},
                content_type="application/merge-patch+json",
            )
            result["reconcile_steady"] = _run(operator.next_run(count))
            operator.settle()
        finally:
            operator.stop()
        result["plan_steady"] = plan(
            project, ["--cr", f"{kind}/{name}", "-n", namespace, "--ansible-backend", backend], env
        )
    finally:
        release_custom_resources(dyn, namespace)
        core.delete_namespace(namespace)
    result["load_after"] = os.getloadavg()
    return result


def _run(found: re.Match[str]) -> dict[str, Any]:
    ok, changed, skipped = int(found[4]), int(found[5]), int(found[6])
    return {"reconcile_s": float(found[3]), "tasks": ok + skipped, "changed_tasks": changed}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--project", type=Path)
    parser.add_argument("--cr", type=Path)
    parser.add_argument("--tasks", type=int, default=150)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", default="fast,runner")
    args = parser.parse_args()

    cluster = LocalCluster(default_state_dir())
    cluster.up(progress=lambda m: print(m, file=sys.stderr))
    dyn = DynamicClient(config.new_client_from_config(config_file=str(cluster.kubeconfig)))
    work = Path(tempfile.mkdtemp(prefix="plan-bench-"))
    if args.project:
        project = copied_project(args.project.resolve(), work / "project")
        cr_file = (args.cr or next((project / "config" / "samples").glob("*.yaml"))).resolve()
    else:
        project, cr_file = generated_project(work / "project", args.tasks)
    for path in sorted((project / "config" / "crd").rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                install_crd(dyn, doc)
    results = []
    for _ in range(args.runs):
        for backend in args.backends.split(","):
            one = measure(project, cr_file, backend, cluster.kubeconfig, dyn, work)
            print(json.dumps(one), file=sys.stderr)
            results.append(one)
    what = args.project or f"generated, {args.tasks} tasks"
    print(f"project: {what}; CR {cr_file.name}; runs {args.runs}")
    print(
        "| backend | scenario | plan wall s | plan's reconcile s | operator's reconcile s "
        "| tasks (plan/operator) |"
    )
    print("|---|---|---|---|---|---|")
    for backend in args.backends.split(","):
        mine = [r for r in results if r["backend"] == backend]
        for scenario in ("first", "steady"):
            plans = [r[f"plan_{scenario}"] for r in mine]
            runs = [r[f"reconcile_{scenario}"] for r in mine]
            planned = _median(p["reconcile_s"] for p in plans)
            reconciled = _median(r["reconcile_s"] for r in runs)
            print(
                f"| {backend} | {scenario} | {_median(p['wall_s'] for p in plans)} "
                f"| {planned} | {reconciled} | {plans[0]['tasks']}/{runs[0]['tasks']} |"
            )
    out = REPO / "bench" / "results" / f"plan-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"raw figures: {out}")
    return 0


def _median(values: Any) -> str:
    found = [value for value in values if value is not None]
    if not found:
        return "-"
    low, high = min(found), max(found)
    return f"{statistics.median(found):.1f} ({low:.1f}-{high:.1f})"


if __name__ == "__main__":
    sys.exit(main())
