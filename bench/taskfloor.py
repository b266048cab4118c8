"""The cost of one task of each kind in the fast backend, measured in isolation.

For each kind, a role of N identical tasks (and a role of none, the run's fixed cost)
runs --runs times through the fast backend (`FastBackend`, the operator's own backend,
without the operator): a task of that kind costs (run with N tasks - empty run) / N, in
wall time and in CPU (the run's process, its module forks and the operator side's
event handling: this process and the zygote's reaped children). Kinds:

  skipped       `ansible.builtin.debug` with `when: false`
  set_fact      a small fact from a template (`{{ base ~ item_name }}`)
  set_fact_big  a fact merging two large dicts (`combine`, as real roles do with defaults)
  debug         `ansible.builtin.debug: msg=...` with a template
  k8s_info      `kubernetes.core.k8s_info` of one ConfigMap (the local cluster's API
                server, admin kubeconfig: no operator proxy)
  k8s           `kubernetes.core.k8s` apply of an unchanged ConfigMap (ok, not changed)

The Kubernetes kinds need the local cluster (started if not running).

Usage: .venv/bin/python -m bench.taskfloor [--tasks 100] [--runs 5] [--kind skipped ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:1] = [str(REPO)]

from runner.ansible.bundledcollection import bundled_collections_path  # noqa: E402
from runner.ansible.fastbackend import FastBackend  # noqa: E402
from runner.ansible.inputs import RunRequest  # noqa: E402
from runner.structs.gvk import GVK  # noqa: E402

GVK_ = GVK("bench.example.com", "v1alpha1", "Floor")

BIG_DEFAULTS = {
    f"component{index}": {
        "enabled": index % 2 == 0,
        "replicas": index,
        "image": {"repository": f"registry.example.com/c{index}", "tag": "1.2.3"},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "env": {f"VAR_{key}": f"value-{key}" for key in range(10)},
    }
    for index in range(20)
}

TASKS = {
    "skipped": """- name: skipped {n}
  ansible.builtin.debug:
    msg: "never {{{{ base }}}}"
  when: flag_off | bool
""",
    "set_fact": """- name: fact {n}
  ansible.builtin.set_fact:
    fact_{n}: "{{{{ base ~ '-{n}' }}}}"
""",
    "set_fact_big": """- name: big fact {n}
  ansible.builtin.set_fact:
    merged_{n}: "{{{{ big_defaults | combine(big_overrides, recursive=True) }}}}"
""",
    "debug": """- name: debug {n}
  ansible.builtin.debug:
    msg: "task {n} of {{{{ base }}}}"
""",
    "k8s_info": """- name: info {n}
  kubernetes.core.k8s_info:
    api_version: v1
    kind: ConfigMap
    namespace: "{{{{ ns }}}}"
    name: floor
""",
    "k8s": """- name: apply {n}
  kubernetes.core.k8s:
    state: present
    apply: true
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: floor
        namespace: "{{{{ ns }}}}"
      data:
        key: "{{{{ base }}}}"
""",
}
KUBE_KINDS = {"k8s_info", "k8s"}


def _cpu() -> float:
    """CPU of this process, its reaped children and its live children's trees (the
    zygote's reaped runs are in its cutime/cstime)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    ticks = os.sysconf("SC_CLK_TCK")
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            total += sum(int(value) for value in fields[11:15]) / ticks
    return total


def _role(root: Path, name: str, body: str) -> Path:
    role = root / name
    (role / "tasks").mkdir(parents=True, exist_ok=True)
    (role / "tasks" / "main.yml").write_text("---\n" + body if body else "---\n[]\n")
    return role


def _cluster(namespace: str) -> Path:
    from kubernetes import client, config

    from runner.devtools.cluster.layout import default_state_dir
    from runner.devtools.cluster.local import LocalCluster

    cluster = LocalCluster(default_state_dir())
    cluster.up(progress=lambda message: print(message, file=sys.stderr))
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "floor"}, "data": {"key": "bench"}}
    )
    return Path(cluster.kubeconfig)


async def _timed(backend: FastBackend, request: RunRequest) -> tuple[float, float]:
    cpu, begin = _cpu(), time.monotonic()
    result = await backend.run(request)
    wall = time.monotonic() - begin
    if result.failed:
        raise RuntimeError(result.failure_message)
    return wall, _cpu() - cpu


async def _main(args: argparse.Namespace) -> int:
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = str(bundled_collections_path())
    work = Path(tempfile.mkdtemp(prefix="bench-taskfloor-", dir=args.work_dir or None))
    namespace = f"floor-{uuid.uuid4().hex[:6]}"
    kubeconfig = _cluster(namespace) if KUBE_KINDS & set(args.kind) else None
    envvars = {"K8S_AUTH_KUBECONFIG": str(kubeconfig)} if kubeconfig else {}
    extravars: dict[str, Any] = {
        "ansible_operator_meta": {"name": "floor", "namespace": namespace},
        "ns": namespace,
        "base": "floor",
        "flag_off": False,
        "big_defaults": BIG_DEFAULTS,
        "big_overrides": {"component3": {"replicas": 7, "env": {"VAR_1": "x"}}},
    }
    env = {"ANSIBLE_GATHERING": "explicit"}
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        env["ANSIBLE_OPERATOR_ZYGOTE_PROFILE"] = str(Path(args.profile).resolve())
    backend = FastBackend(work / "runner", env=env, log_events="nothing")
    rows = []
    try:
        empty = _role(work / "roles", "empty", "")

        def request(role: Path) -> RunRequest:
            return RunRequest(
                gvk=GVK_,
                namespace=namespace,
                name="floor",
                role=role,
                extravars=extravars,
                envvars=envvars,
            )

        await backend.run(request(empty))  # the zygote starts
        for kind in args.kind:
            body = "".join(TASKS[kind].format(n=n) for n in range(args.tasks))
            role = _role(work / "roles", kind, body)
            await backend.run(request(role))  # warm-up, not counted
            full, base = [], []
            for _ in range(args.runs):
                base.append(await _timed(backend, request(empty)))
                full.append(await _timed(backend, request(role)))
            wall = statistics.median(w for w, _ in full) - statistics.median(w for w, _ in base)
            cpu = statistics.median(c for _, c in full) - statistics.median(c for _, c in base)
            row = {
                "kind": kind,
                "tasks": args.tasks,
                "runs": args.runs,
                "empty_run_wall_s": round(statistics.median(w for w, _ in base), 3),
                "wall_ms_per_task": round(1000 * wall / args.tasks, 2),
                "cpu_ms_per_task": round(1000 * cpu / args.tasks, 2),
                "run_wall_min_s": round(min(w for w, _ in full), 3),
            }
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    finally:
        await backend.close()
        shutil.rmtree(work, ignore_errors=True)
        if kubeconfig is not None:
            from kubernetes import client, config

            api = config.new_client_from_config(config_file=str(kubeconfig))
            client.CoreV1Api(api).delete_namespace(namespace)
    from ansible.release import __version__

    load = os.getloadavg()
    loads = " ".join(f"{value:.2f}" for value in load)
    print(f"\nansible-core {__version__}; load average at the end {loads}")
    print("| kind | ms/task (wall) | ms/task (CPU) | empty run (wall) |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['kind']} | {row['wall_ms_per_task']:.2f} | {row['cpu_ms_per_task']:.2f} "
            f"| {row['empty_run_wall_s']:.3f} s |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"load": load, "rows": rows}, indent=1))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--kind", action="append", choices=sorted(TASKS))
    parser.add_argument("--json", default="")
    parser.add_argument(
        "--work-dir",
        default="",
        help="where the runs' directories (artifacts, job events) go (default: the temp dir)",
    )
    parser.add_argument(
        "--profile", default="", help="a directory: each run writes its cProfile data there"
    )
    args = parser.parse_args()
    args.kind = args.kind or list(TASKS)
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
