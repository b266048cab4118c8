"""Scale mode with replicas: N no-op CRs exist before the operator starts, served by 1 or
more replicas with `--sharding` (fast backend).

For each replica count: the time from the start until every CR is `Successful`, each
replica's peak RSS (its operator process) and CPU seconds (its whole process tree), how
many CRs each owns, the keys moved while the replicas joined, and — with more than one
replica — what a `kill -9` of one costs: the time until all its keys carry another
member's label, and until each was reconciled by its new owner.

Usage: .venv/bin/python bench/sharding.py --kubeconfig PATH [--count 10000]
       [--replicas 1,3] [--timeout 3600] [--gather-facts] [--spec-bytes 0]

The replicas run with `ANSIBLE_GATHERING=explicit`, as the scaffolded manager's
Deployment sets it, unless `--gather-facts` is given. Each CR's spec is `{index: N}`;
`--spec-bytes B` adds about B bytes of settings (16 strings), for CRs of a real size.

Uses a namespace and a CRD of its own on the cluster the kubeconfig names, and removes
both at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

REPO = Path(__file__).resolve().parents[1]
GROUP = "shardbench.example.com"
KIND = "Load"
PLURAL = "loads"
RING = "shardbench"
LABEL = f"shard.sharding.ansible-operator/{RING}"
PAGE = os.sysconf("SC_PAGE_SIZE")
CLK_TCK = os.sysconf("SC_CLK_TCK")
MEMBER = re.compile(r"joining the ring \S+ as member ([a-z0-9-]+)")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _stat(pid: int) -> tuple[float, int] | None:
    """(CPU seconds incl. reaped children, RSS bytes) of one process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return sum(int(v) for v in fields[11:15]) / CLK_TCK, int(fields[21]) * PAGE


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{current}/task"):
                with contextlib.suppress(OSError):
                    children = Path(f"/proc/{current}/task/{tid}/children").read_text()
                    todo += [int(c) for c in children.split()]
    return found


class Replica:
    def __init__(
        self,
        name: str,
        project: Path,
        kubeconfig: Path,
        namespace: str,
        work: Path,
        *,
        gather_facts: bool = False,
    ) -> None:
        self.name = name
        self.dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=work))
        self.log_path = self.dir / "op.log"
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "WATCH_NAMESPACE": namespace,
            "ANSIBLE_OPERATOR_RUNNER_DIR": str(self.dir / "runner"),
            "TMPDIR": str(self.dir),
        }
        if not gather_facts:
            # As the scaffolded manager's Deployment runs it: a no-op role's play gathers
            # no facts, which would otherwise be most of a run's CPU.
            env["ANSIBLE_GATHERING"] = "explicit"
        command = [
            sys.executable, "-m", "runner.cli", "run", "--watches-file", "watches.yaml",
            "--ansible-backend", "fast", "--zap-encoder", "json",
            "--max-concurrent-reconciles", "4", "--proxy-port", "0",
            "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
            "--user-metrics-bind-address", "127.0.0.1:0",
            "--sharding", "--sharding-ring", RING, "--sharding-namespace", namespace,
        ]  # fmt: skip
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            command, cwd=project, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        self.peak_rss = 0
        self.cpu = 0.0
        self.member = ""

    def sample(self) -> None:
        if self.proc.poll() is not None:
            return
        root = _stat(self.proc.pid)
        if root is not None:
            self.peak_rss = max(self.peak_rss, root[1])
        # Each live process with the children it has reaped: every CPU second of the tree
        # is counted once, by itself while it lives and by its parent after.
        total = sum(stat[0] for pid in _tree(self.proc.pid) if (stat := _stat(pid)))
        self.cpu = max(self.cpu, total)

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def count(self, needle: str) -> int:
        return self.text().count(needle)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._log.close()


def project_dir(work: Path) -> Path:
    root = Path(tempfile.mkdtemp(prefix="project-", dir=work))
    (root / "watches.yaml").write_text(
        f"- version: v1alpha1\n  group: {GROUP}\n  kind: {KIND}\n  role: noop\n"
    )
    tasks = root / "roles" / "noop" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(
        textwrap.dedent("""\
        - name: Nothing to do
          ansible.builtin.debug:
            msg: ok
        """)
    )
    return root


def install_crd(ext: client.ApiextensionsV1Api) -> None:
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "plural": PLURAL, "singular": "load", "listKind": "LoadList"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1alpha1",
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
    name = body["metadata"]["name"]
    deadline = time.monotonic() + 120
    while True:  # the previous run's CRD may still be going away with its CRs
        try:
            ext.create_custom_resource_definition(body)
            break
        except ApiException as error:
            if error.status != 409 or time.monotonic() > deadline:
                raise
            existing = ext.read_custom_resource_definition(name)
            if existing.metadata.deletion_timestamp is None:
                break  # left by a killed run: usable as it is
            time.sleep(1)
    while not any(
        c.type == "Established" and c.status == "True"
        for c in ext.read_custom_resource_definition(name).status.conditions or []
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {name} not Established after 120 s")
        time.sleep(0.5)


def list_all(crs: client.CustomObjectsApi, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        page = crs.list_namespaced_custom_object(
            GROUP, "v1alpha1", namespace, PLURAL, limit=2000, _continue=token
        )
        items += page["items"]
        token = page["metadata"].get("continue")
        if not token:
            return items


def successful(item: dict[str, Any]) -> bool:
    conditions = (item.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Successful" and c.get("status") == "True" for c in conditions)


def create_crs(
    crs: client.CustomObjectsApi, namespace: str, count: int, *, spec_bytes: int = 0
) -> None:
    def create(index: int) -> None:
        spec: dict[str, Any] = {"index": index}
        if spec_bytes > 0:
            value = f"{index:05d}".ljust(max(spec_bytes // 16, 5), "x")
            spec["settings"] = {f"setting{n:02d}": value for n in range(16)}
        body = {
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": KIND,
            "metadata": {"name": f"load-{index:05d}"},
            "spec": spec,
        }
        crs.create_namespaced_custom_object(GROUP, "v1alpha1", namespace, PLURAL, body)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(count)))


def run(
    replicas: int,
    *,
    count: int,
    kubeconfig: Path,
    timeout: float,
    work: Path,
    kill: bool = True,
    gather_facts: bool = False,
    spec_bytes: int = 0,
) -> dict[str, Any]:
    core, crs = client.CoreV1Api(), client.CustomObjectsApi()
    namespace = f"shardbench-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    project = project_dir(work)
    started: list[Replica] = []
    stop = threading.Event()
    figures: dict[str, Any] = {
        "replicas": replicas,
        "count": count,
        "gather_facts": gather_facts,
        "spec_bytes": spec_bytes,
    }
    try:
        began = time.monotonic()
        create_crs(crs, namespace, count, spec_bytes=spec_bytes)
        log(f"{count} CRs created in {time.monotonic() - began:.0f} s")
        start = time.monotonic()
        started = [
            Replica(f"r{i}", project, kubeconfig, namespace, work, gather_facts=gather_facts)
            for i in range(replicas)
        ]

        def sampler() -> None:
            while not stop.wait(0.5):
                for replica in started:
                    replica.sample()

        threading.Thread(target=sampler, daemon=True).start()
        done = 0
        while time.monotonic() - start < timeout:
            time.sleep(10)
            items = list_all(crs, namespace)
            done = sum(successful(item) for item in items)
            log(f"{replicas} replica(s): {done}/{count} Successful")
            if done == count:
                break
        figures["all_successful_s"] = round(time.monotonic() - start, 1) if done == count else None
        for replica in started:
            found = MEMBER.search(replica.text())
            replica.member = found.group(1) if found else ""
        # Let the hand-offs of the start settle, then count.
        time.sleep(10)
        items = list_all(crs, namespace)
        owners = Counter((i["metadata"].get("labels") or {}).get(LABEL, "") for i in items)
        figures["per_replica"] = [
            {
                "member": r.member,
                "keys": owners.get(r.member, 0),
                "peak_rss_mib": round(r.peak_rss / 2**20, 1),
                "cpu_s": round(r.cpu, 1),
                "runs": r.count("running Ansible"),
                "handed_off": r.count(" off to "),
                "claimed": r.count("took over "),
            }
            for r in started
        ]
        figures["keys_moved_while_joining"] = sum(r.count(" off to ") for r in started)
        if replicas > 1 and kill:
            figures["kill"] = kill_one(started, crs, namespace)
    finally:
        stop.set()
        for replica in started:
            replica.stop()
        with contextlib.suppress(ApiException):
            core.delete_namespace(namespace)
    return figures


def kill_one(
    started: list[Replica], crs: client.CustomObjectsApi, namespace: str
) -> dict[str, Any]:
    victim = started[0]
    mine = [
        i["metadata"]["name"]
        for i in list_all(crs, namespace)
        if (i["metadata"].get("labels") or {}).get(LABEL) == victim.member
    ]
    before = {r.name: r.count("running Ansible") for r in started[1:]}
    victim.kill()
    killed = time.monotonic()
    relabelled = None
    while time.monotonic() - killed < 600:
        time.sleep(1)
        labels = {
            i["metadata"]["name"]: (i["metadata"].get("labels") or {}).get(LABEL)
            for i in list_all(crs, namespace)
        }
        if all(labels.get(name) != victim.member for name in mine):
            relabelled = time.monotonic() - killed
            break
    served = None
    while relabelled is not None and time.monotonic() - killed < 900:
        runs = sum(r.count("running Ansible") - before[r.name] for r in started[1:])
        if runs >= len(mine):
            served = time.monotonic() - killed
            break
        time.sleep(1)
    return {
        "victim_keys": len(mine),
        "all_relabelled_s": round(relabelled, 1) if relabelled is not None else None,
        "all_reconciled_again_s": round(served, 1) if served is not None else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, default=Path(os.environ.get("KUBECONFIG", "")))
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--replicas", default="1,3")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument(
        "--no-kill",
        action="store_true",
        help="memory and CPU only: do not kill a replica to time the take-over",
    )
    parser.add_argument(
        "--gather-facts",
        action="store_true",
        help="let the no-op role's play gather facts (the scaffolded manager turns it off)",
    )
    parser.add_argument(
        "--spec-bytes",
        type=int,
        default=0,
        help="add about this many bytes of settings to each CR's spec (default: none)",
    )
    args = parser.parse_args()
    config.load_kube_config(config_file=str(args.kubeconfig))
    install_crd(client.ApiextensionsV1Api())
    results = []
    work = Path(tempfile.mkdtemp(prefix="shardbench-"))
    try:
        for replicas in (int(n) for n in args.replicas.split(",")):
            results.append(
                run(
                    replicas,
                    count=args.count,
                    kubeconfig=args.kubeconfig,
                    timeout=args.timeout,
                    work=work,
                    kill=not args.no_kill,
                    gather_facts=args.gather_facts,
                    spec_bytes=args.spec_bytes,
                )
            )
            print(json.dumps(results[-1], indent=2), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        with contextlib.suppress(ApiException):
            client.ApiextensionsV1Api().delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
