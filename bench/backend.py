"""Single-run latency of the Ansible backends: ansible-runner vs the fast backend.

Runs the same role N times through each backend (after one warm-up run that is not
counted) and prints wall time and CPU seconds (the backend's process and all its
children) per run. Two roles: a trivial one (debug + copy) and the memcached sample role
against the local cluster (3x kubernetes.core.k8s, k8s_info, operator_sdk.util.k8s_status),
both with ANSIBLE_GATHERING=explicit as an operator image sets it. The memcached runs talk
to the API server directly with the cluster's admin kubeconfig (no operator proxy).

Usage: .venv/bin/python bench/backend.py [--runs 10] [--backend runner --backend fast]
       [--role trivial --role memcached] [--json out.json]
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
sys.path.insert(0, str(REPO))

from runner.ansible.bundledcollection import bundled_collections_path  # noqa: E402
from runner.ansible.fastbackend import FastBackend  # noqa: E402
from runner.ansible.inputs import RunRequest  # noqa: E402
from runner.ansible.runnerbackend import RunnerBackend  # noqa: E402
from runner.structs.gvk import GVK  # noqa: E402

MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
TRIVIAL_TASKS = """\
- name: say hello
  ansible.builtin.debug:
    msg: "hello {{ ansible_operator_meta.name }}"
- name: write the CR's name
  ansible.builtin.copy:
    dest: "{{ out_dir }}/{{ ansible_operator_meta.name }}.txt"
    content: "{{ ansible_operator_meta.name }} {{ size }}"
"""


def _cpu() -> float:
    """CPU seconds of this process, its reaped children, and its live children's trees.

    The fast backend's runs are children of its zygote, which reaps them: their time is
    in the zygote's `cutime`/`cstime` until the zygote itself exits.
    """
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
        if int(fields[1]) == me:  # ppid; then utime, stime, cutime, cstime are fields 11-14
            total += sum(int(value) for value in fields[11:15]) / ticks
    return total


def _drop_namespace(kubeconfig: Path, namespace: str) -> None:
    """The bench CR has no operator to finalize it: release it, delete its namespace."""
    from kubernetes import client, config
    from kubernetes.dynamic import DynamicClient
    from support.kube import release_custom_resources

    api = config.new_client_from_config(config_file=str(kubeconfig))
    release_custom_resources(DynamicClient(api), namespace)
    client.CoreV1Api(api).delete_namespace(namespace)


def _cluster(namespace: str) -> Path:
    from kubernetes import client, config
    from kubernetes.dynamic import DynamicClient

    sys.path.insert(0, str(REPO / "tests"))
    import yaml
    from support.operator import install_crd

    from runner.devtools.cluster.layout import default_state_dir
    from runner.devtools.cluster.local import LocalCluster

    cluster = LocalCluster(default_state_dir())
    cluster.up(progress=lambda message: print(message, file=sys.stderr))
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    dyn = DynamicClient(api)
    crd = yaml.safe_load((REPO / "config/crd/bases/cache.example.com_memcacheds.yaml").read_text())
    memcached = install_crd(dyn, crd)
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    memcached.create(
        body={
            "apiVersion": "cache.example.com/v1alpha1",
            "kind": "Memcached",
            "metadata": {"name": "bench"},
            "spec": {"size": 1},
        },
        namespace=namespace,
    )
    return Path(cluster.kubeconfig)


async def _measure(
    backend_name: str, role_name: str, *, runs: int, work: Path, kubeconfig: Path | None, ns: str
) -> dict[str, Any]:
    env = {"ANSIBLE_GATHERING": "explicit"}
    backend_type = FastBackend if backend_name == "fast" else RunnerBackend
    backend = backend_type(work / f"runner-{backend_name}", env=env, log_events="nothing")
    if role_name == "trivial":
        role = work / "roles" / "trivial"
        (role / "tasks").mkdir(parents=True, exist_ok=True)
        (role / "tasks" / "main.yml").write_text(TRIVIAL_TASKS)
        namespace, envvars = "bench", {}
    else:
        role = REPO / "roles" / "memcached"
        assert kubeconfig is not None
        namespace, envvars = ns, {"K8S_AUTH_KUBECONFIG": str(kubeconfig)}
    extravars = {
        "ansible_operator_meta": {"name": "bench", "namespace": namespace},
        "size": 1,
        "out_dir": str(work),
    }

    def request() -> RunRequest:
        return RunRequest(
            gvk=MEMCACHED,
            namespace=namespace,
            name="bench",
            role=role,
            extravars=extravars,
            envvars=envvars,
        )

    walls: list[float] = []
    cpus: list[float] = []
    try:
        first_begin = time.monotonic()
        result = await backend.run(request())  # warm-up (the zygote starts here)
        first = time.monotonic() - first_begin
        assert not result.failed, result.failure_message
        for _ in range(runs):
            cpu, begin = _cpu(), time.monotonic()
            result = await backend.run(request())
            walls.append(time.monotonic() - begin)
            cpus.append(_cpu() - cpu)
            assert not result.failed, result.failure_message
    finally:
        await backend.close()
    return {
        "backend": backend_name,
        "role": role_name,
        "runs": runs,
        "first_run_s": round(first, 3),
        "wall_p50_s": round(statistics.median(walls), 3),
        "wall_min_s": round(min(walls), 3),
        "wall_max_s": round(max(walls), 3),
        "cpu_p50_s": round(statistics.median(cpus), 3),
    }


async def _main(args: argparse.Namespace) -> int:
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = ":".join(
        [
            os.environ.get("ANSIBLE_COLLECTIONS_PATH")
            or "/usr/share/ansible/collections:~/.ansible/collections",
            str(bundled_collections_path()),
        ]
    )
    work = Path(tempfile.mkdtemp(prefix="bench-backend-"))
    namespace = f"bench-backend-{uuid.uuid4().hex[:6]}"
    kubeconfig = _cluster(namespace) if "memcached" in args.role else None
    rows = []
    try:
        for role_name in args.role:
            for backend_name in args.backend:
                row = await _measure(
                    backend_name,
                    role_name,
                    runs=args.runs,
                    work=work,
                    kubeconfig=kubeconfig,
                    ns=namespace,
                )
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    finally:
        if kubeconfig is not None:
            _drop_namespace(kubeconfig, namespace)
        shutil.rmtree(work, ignore_errors=True)
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| role | backend | first run | wall p50 | wall min | wall max | CPU p50 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['role']} | {row['backend']} | {row['first_run_s']:.2f} s "
            f"| {row['wall_p50_s']:.2f} s | {row['wall_min_s']:.2f} s "
            f"| {row['wall_max_s']:.2f} s | {row['cpu_p50_s']:.2f} s |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"load": load, "rows": rows}, indent=2))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--backend", action="append", choices=("runner", "fast"))
    parser.add_argument("--role", action="append", choices=("trivial", "memcached"))
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    args.backend = args.backend or ["runner", "fast"]
    args.role = args.role or ["trivial", "memcached"]
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
