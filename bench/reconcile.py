"""Reconcile benchmark: N Memcached CRs created at once on the local cluster.

Prints p50/p95 create -> Successful, total time to converge, runs per second, the
operator's peak RSS (the operator process; Ansible's own processes are not in it), and
what the roles asked of the API through the proxy: requests per run and the share the
informer cache answered. Usage: .venv/bin/python bench/reconcile.py [--count 50]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Run as a script, sys.path[0] is bench/, whose queue.py would hide the standard
# library's `queue` (which the Kubernetes client imports).
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == REPO / "bench":
    del sys.path[0]
sys.path.insert(0, str(REPO / "tests"))

from kubernetes import client, config  # noqa: E402
from support.kube import create_cr, release_custom_resources  # noqa: E402
from support.operator import OperatorProcess, install_crd  # noqa: E402

from runner.devtools.cluster.layout import default_state_dir  # noqa: E402
from runner.devtools.cluster.local import LocalCluster  # noqa: E402


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _successful_since(item: dict) -> str | None:
    for cond in (item.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Successful" and cond.get("status") == "True":
            return str(cond.get("lastTransitionTime"))
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()

    cluster = LocalCluster(default_state_dir())
    cluster.up(progress=lambda m: print(m, file=sys.stderr))
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    import yaml
    from kubernetes.dynamic import DynamicClient

    dyn = DynamicClient(api)
    memcached = install_crd(
        dyn,
        yaml.safe_load((REPO / "config/crd/bases/cache.example.com_memcacheds.yaml").read_text()),
    )
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    work = Path(tempfile.mkdtemp(prefix="bench-"))
    operator = OperatorProcess(
        REPO,
        kubeconfig=cluster.kubeconfig,
        log=work / "operator.log",
        env={"WATCH_NAMESPACE": namespace},
    )
    try:
        time.sleep(2)  # let the informer sync before the burst
        created: dict[str, float] = {}
        start = time.monotonic()
        for index in range(args.count):
            name = f"m-{index}"
            create_cr(memcached, name, namespace, {"size": 1})
            created[name] = time.monotonic()
        done: dict[str, float] = {}
        peak = 0
        while len(done) < args.count and time.monotonic() - start < args.timeout:
            now = time.monotonic()
            for item in memcached.get(namespace=namespace).to_dict()["items"]:
                name = item["metadata"]["name"]
                if name not in done and _successful_since(item):
                    done[name] = now
            peak = max(peak, _peak_rss_kib(operator.process.pid))
            time.sleep(0.2)
        total = time.monotonic() - start
        latencies = sorted(done[n] - created[n] for n in done)
        runs = operator.log().count("running Ansible")
        result = {
            "count": args.count,
            "converged": len(done),
            "p50_s": round(statistics.median(latencies), 2) if latencies else None,
            "p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2) if latencies else None,
            "total_s": round(total, 1),
            "runs": runs,
            "runs_per_s": round(runs / total, 2),
            "peak_rss_mib": round(peak / 1024, 1),
        }
    finally:
        operator.stop()
        release_custom_resources(dyn, namespace)
        core.delete_namespace(namespace)
    proxy = re.search(
        r"API proxy stopped: (\d+) requests, (\d+) answered from the cache", operator.log()
    )
    if proxy and runs:
        requests, hits = int(proxy[1]), int(proxy[2])
        result["api_requests_per_run"] = round(requests / runs, 1)
        result["cache_hit_ratio"] = round(hits / requests, 3) if requests else None
    print(
        "| CRs | converged | p50 create->Successful | p95 | total | runs | runs/s | peak RSS"
        " | API requests/run | cache hits |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {result['count']} | {result['converged']} | {result['p50_s']} s | {result['p95_s']} s"
        f" | {result['total_s']} s | {result['runs']} | {result['runs_per_s']} |"
        f" {result['peak_rss_mib']} MiB | {result.get('api_requests_per_run')} |"
        f" {result.get('cache_hit_ratio')} |"
    )
    out = REPO / "bench" / "results" / "reconcile.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["converged"] == args.count else 1


if __name__ == "__main__":
    sys.exit(main())
