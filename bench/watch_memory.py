"""Memory per watched object: what an informer's store costs per 1,000 objects.

Creates `--count` Memcached CRs (with a status as the operator writes it) and as many
Deployments owned by them (the memcached role's dependents, `replicas: 0` so no pod
starts) in a fresh namespace of the local cluster, then, for each kind and each way of
keeping them (`full`: whole objects less managedFields, as the controllers' and the
proxy cache's informers keep them; `metadata`: metadata-only, as the sharder's informer
of unowned CRs keeps them), starts an informer in a fresh child process and reports
the growth of that process's RSS (bench/compare/sampling.py) from before the list to
after it, per 1,000 objects. Each figure is the median of `--repeat` child processes.

Usage: .venv/bin/python bench/watch_memory.py [--count 2000] [--repeat 3] [--json out]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# bench/ holds modules named like the standard library's (queue.py): not on the path.
sys.path[:1] = [str(REPO)]

from bench.compare.base import GROUP, KIND, VERSION  # noqa: E402
from bench.compare.sampling import _stat  # noqa: E402
from runner.devtools.cluster.layout import default_state_dir  # noqa: E402
from runner.devtools.cluster.local import LocalCluster  # noqa: E402
from runner.k8s.client import KubeClient  # noqa: E402
from runner.k8s.informer import Informer  # noqa: E402
from runner.structs import GVK  # noqa: E402

MEMCACHED = GVK(GROUP, VERSION, KIND)
DEPLOYMENT = GVK("apps", "v1", "Deployment")
NAMESPACE = GVK("", "v1", "Namespace")
KINDS = {"crs": MEMCACHED, "dependents": DEPLOYMENT}


def cr(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name, "labels": {"app": "memcached", "tier": "cache"}},
        "spec": {"size": 1},
    }


def cr_status(generation: int) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "status": {
            "conditions": [
                {
                    "type": "Successful",
                    "status": "True",
                    "reason": "Successful",
                    "message": "",
                    "lastTransitionTime": now,
                    "ansibleResult": {"ok": 4, "changed": 0, "skipped": 0, "failures": 0},
                },
                {
                    "type": "Running",
                    "status": "False",
                    "reason": "Successful",
                    "message": "Awaiting next reconciliation",
                    "lastTransitionTime": now,
                },
            ],
            "observedGeneration": generation,
        }
    }


def deployment(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    labels = {"app": "memcached", "memcached_cr": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": KIND,
                    "name": name,
                    "uid": owner["metadata"]["uid"],
                }
            ],
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "memcached",
                            "image": "docker.io/memcached:1.6.23-alpine",
                            "command": ["memcached", "-m=64", "-o", "modern", "-v"],
                            "ports": [{"containerPort": 11211, "name": "memcached"}],
                        }
                    ]
                },
            },
        },
    }


async def populate(kubeconfig: Path, namespace: str, count: int) -> None:
    async with await KubeClient.connect(kubeconfig=str(kubeconfig)) as kube:
        await kube.create(
            NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )

        async def one(index: int) -> None:
            name = f"m-{index}"
            made = await kube.create(MEMCACHED, {**cr(name)}, namespace=namespace)
            await kube.patch(
                MEMCACHED,
                name=name,
                namespace=namespace,
                body=cr_status(made["metadata"].get("generation", 1)),
                subresource="status",
            )
            await kube.create(DEPLOYMENT, deployment(name, made), namespace=namespace)

        for start in range(0, count, 50):
            await asyncio.gather(*(one(i) for i in range(start, min(start + 50, count))))


def rss() -> int:
    gc.collect()
    found = _stat(os.getpid())
    return found[1] if found else 0


async def measure(kubeconfig: Path, namespace: str, kind: str, mode: str) -> dict[str, Any]:
    """In this (child) process: RSS growth of one informer's list."""
    async with await KubeClient.connect(kubeconfig=str(kubeconfig)) as kube:
        gvk = KINDS[kind]
        await kube.resource(gvk)
        informer = Informer(kube, gvk, namespaces=[namespace], metadata_only=mode == "metadata")
        before = rss()
        task = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.synced.wait(), timeout=600)
        after = rss()
        count = len(informer)
        informer.stop()
        await task
    return {"objects": count, "rss_growth_bytes": after - before}


def child(args: argparse.Namespace) -> int:
    result = asyncio.run(measure(args.kubeconfig, args.namespace, args.kind, args.mode))
    print(json.dumps(result))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--modes", default="full,metadata")
    parser.add_argument("--namespace", help="reuse objects made by an earlier run")
    parser.add_argument("--keep", action="store_true", help="keep the namespace")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.kind, args.mode = args.child
        return child(args)

    cluster = LocalCluster(default_state_dir())
    if not cluster.is_up():
        cluster.up(progress=lambda message: print(message, file=sys.stderr))
    kubeconfig = cluster.kubeconfig
    namespace = args.namespace or f"watch-mem-{uuid.uuid4().hex[:5]}"
    if not args.namespace:
        began = time.monotonic()
        asyncio.run(populate(kubeconfig, namespace, args.count))
        print(f"created {args.count} CRs and Deployments in {time.monotonic() - began:.0f} s")
    results: dict[str, Any] = {"count": args.count, "namespace": namespace, "load": os.getloadavg()}
    try:
        for kind in KINDS:
            for mode in args.modes.split(","):
                growths = []
                for _ in range(args.repeat):
                    out = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--child",
                            kind,
                            mode,
                            "--kubeconfig",
                            str(kubeconfig),
                            "--namespace",
                            namespace,
                        ],
                        check=True,
                        capture_output=True,
                        text=True,
                    ).stdout
                    measured = json.loads(out.strip().splitlines()[-1])
                    growths.append(measured["rss_growth_bytes"] / measured["objects"] * 1000)
                per_1000 = statistics.median(growths)
                results[f"{kind}_{mode}_mib_per_1000"] = round(per_1000 / 2**20, 2)
                print(
                    f"{kind:10} {mode:8}: {per_1000 / 2**20:6.2f} MiB per 1,000 objects "
                    f"(runs: {', '.join(f'{g / 2**20:.2f}' for g in growths)})"
                )
    finally:
        if not args.keep and not args.namespace:
            asyncio.run(_delete(kubeconfig, namespace))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


async def _delete(kubeconfig: Path, namespace: str) -> None:
    async with await KubeClient.connect(kubeconfig=str(kubeconfig)) as kube:
        await kube.delete(NAMESPACE, name=namespace, namespace=None)


if __name__ == "__main__":
    raise SystemExit(main())
