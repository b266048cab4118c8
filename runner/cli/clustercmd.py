"""`ansible-operator cluster ...` handlers (printing only; the work is in local.py)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from runner.devtools.cluster import build, registry
from runner.devtools.cluster.components import (
    go_ansible_operator,
    kubelet,
    olm_operators,
    olm_v1_operators,
    tools,
)
from runner.devtools.cluster.components import registry as registry_component
from runner.devtools.cluster.layout import default_state_dir
from runner.devtools.cluster.local import LocalCluster
from runner.errors import ClusterError


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _start_registry(cluster: LocalCluster, args: argparse.Namespace) -> registry.RegistryInfo:
    return registry.start(
        cluster, tls=args.registry_tls, port=args.registry_port, progress=_progress
    )


def dispatch(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir).resolve() if args.state_dir else default_state_dir()
    cluster = LocalCluster(state_dir)
    if args.action == "up":
        if args.build_only:
            # The kubelet, the registry, the OLM validators (operator-sdk, opm), both
            # OLMs' operators and the Go ansible-operator are built too: tests, `up
            # --real-node`, `up --registry`, `make bundle-validate`, `olm install [--v1]`
            # and the differential suite use them, `up` does not.
            built = cluster.build(progress=_progress)
            built |= build.ensure_built(
                [kubelet(), registry_component(), go_ansible_operator()],
                root=cluster.cache,
                progress=_progress,
            )
            built |= build.ensure_built(tools().values(), root=cluster.cache, progress=_progress)
            built |= build.ensure_built(
                olm_operators().values(), root=cluster.cache, progress=_progress
            )
            built |= build.ensure_built(
                olm_v1_operators().values(), root=cluster.cache, progress=_progress
            )
            for name, path in built.items():
                print(f"{name}: {path}")
            return 0
        cluster.up(progress=_progress, apiserver_port=args.apiserver_port, real_node=args.real_node)
        if args.registry:
            _start_registry(cluster, args)
        print(cluster.kubeconfig)
        return 0
    if args.action == "registry":
        if args.stop:
            if not registry.stop(cluster):
                _progress("no registry running")
            return 0
        print(_start_registry(cluster, args).address)
        return 0
    if args.action == "down":
        stopped = cluster.down(keep=args.keep, progress=_progress)
        if not stopped:
            _progress("no running cluster components found")
        return 0
    if args.action == "tools":
        built = build.ensure_built(tools().values(), root=cluster.cache, progress=_progress)
        for name, path in built.items():
            print(f"{name}: {path}")
        return 0
    if args.action == "status":
        print("\n".join(cluster.status()))
        serving = registry.info(cluster)
        if serving is not None:
            print(f"  registry {serving.url}: images {serving.address}/<name>:<tag>")
        return 0 if cluster.is_up() else 3
    if args.action == "kubectl":
        kubectl_args = list(args.kubectl_args)
        if kubectl_args[:1] == ["--"]:
            kubectl_args = kubectl_args[1:]
        return cluster.kubectl(kubectl_args, progress=_progress)
    if not cluster.kubeconfig.is_file():
        raise ClusterError(
            f"no cluster in {state_dir}; start one with `ansible-operator cluster up`"
        )
    if args.action == "kubeconfig":
        print(cluster.kubeconfig)
    else:
        print(f"export KUBECONFIG={shlex.quote(str(cluster.kubeconfig))}")
    return 0
