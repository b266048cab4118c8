"""`ansible-operator run`: build settings from flags and environment, then serve.

The only place that reads the process environment for the runtime; everything below
gets explicit values.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

from runner import watches as watches_mod
from runner.ansible.backend import RunnerBackend
from runner.collections_path import bundled_collections_path
from runner.durations import parse_duration
from runner.engine.manager import Manager
from runner.engine.reconciler import RunSettings
from runner.errors import ConfigError
from runner.k8s.client import KubeClient
from runner.observability import logging as logs
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.owner import Owner, proxy_kubeconfig
from runner.proxy.server import ProxyServer
from runner.structs import GVK, NamespacedName

log = logging.getLogger("ansible-operator")

# The Go operator's base; a writable volume there keeps a read-only root fs working.
DEFAULT_RUNNER_DIR = "/tmp/ansible-operator/runner"
DEFAULT_COLLECTIONS_PATH = "/usr/share/ansible/collections:~/.ansible/collections"


def _duration(flag: str, value: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as err:
        raise ConfigError(f"{flag}: {err}") from None


def watch_namespaces(environ: Mapping[str, str]) -> list[str] | None:
    """WATCH_NAMESPACE: empty or unset = all namespaces, else a comma-separated list."""
    raw = environ.get("WATCH_NAMESPACE", "")
    names = [n.strip() for n in raw.split(",") if n.strip()]
    return names or None


def prepare_environment(args: argparse.Namespace, environ: MutableMapping[str, str]) -> None:
    """Set what ansible-runner's children inherit: roles and collections paths."""
    if args.ansible_roles_path:
        environ["ANSIBLE_ROLES_PATH"] = args.ansible_roles_path
    collections = args.ansible_collections_path or environ.get(
        "ANSIBLE_COLLECTIONS_PATH", DEFAULT_COLLECTIONS_PATH
    )
    # Users' entries come first; our operator_sdk.util is the fallback.
    environ["ANSIBLE_COLLECTIONS_PATH"] = f"{collections}:{bundled_collections_path()}"


def run(args: argparse.Namespace) -> int:
    logs.configure(level=args.zap_log_level, encoder=args.zap_encoder, devel=args.zap_devel)
    environ = os.environ
    prepare_environment(args, environ)
    reconcile_period = _duration("--reconcile-period", args.reconcile_period)
    graceful = _duration("--graceful-shutdown-timeout", args.graceful_shutdown_timeout)
    loaded = watches_mod.load(
        args.watches_file,
        environ=dict(environ),
        cwd=Path.cwd(),
        default_reconcile_period=reconcile_period,
        default_max_concurrent_reconciles=args.max_concurrent_reconciles,
        default_ansible_verbosity=args.ansible_verbosity,
    )
    for watch in loaded:
        target = watch.playbook or watch.role
        log.info("watching %s with %s", watch.gvk, target)
    return asyncio.run(
        _serve(
            args,
            loaded,
            namespaces=watch_namespaces(environ),
            graceful=graceful,
        )
    )


def owner_of(obj: Mapping[str, Any]) -> Owner:
    """The owner identity of a CR, as its runs' kubeconfigs carry it."""
    meta = obj.get("metadata") or {}
    return Owner(
        api_version=str(obj.get("apiVersion") or ""),
        kind=str(obj.get("kind") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        namespace=str(meta.get("namespace") or ""),
    )


async def _serve(
    args: argparse.Namespace,
    loaded: tuple[watches_mod.Watch, ...],
    *,
    namespaces: list[str] | None,
    graceful: float,
) -> int:
    kubeconfig = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None
    client = await KubeClient.connect(kubeconfig=kubeconfig)
    cache = InformerCache(client, namespaces=namespaces)
    manager: Manager | None = None

    def enqueue(gvk: GVK, key: NamespacedName) -> None:
        if manager is not None:
            manager.enqueue(gvk, key)

    proxy = ProxyServer(
        client,
        watches=loaded,
        namespaces=namespaces,
        cache=cache,
        dependents=DependentWatches(cache, enqueue=enqueue),
        inject_owner_ref=args.inject_owner_ref,
        port=args.proxy_port,
    )
    try:
        port = await proxy.start()
    except BaseException:
        await client.close()
        raise
    backend = RunnerBackend(
        base_dir=Path(
            os.environ.get("ANSIBLE_OPERATOR_RUNNER_DIR", "/tmp/ansible-operator/runner")
        ),
        log_events=args.ansible_log_events,
        debug_logs=os.environ.get("ANSIBLE_DEBUG_LOGS", "").lower() in ("1", "true"),
    )
    settings = RunSettings(
        kubeconfig=kubeconfig,
        run_kubeconfig=lambda obj: proxy_kubeconfig(owner_of(obj), port=port),
        ansible_args=args.ansible_args,
    )
    manager = Manager(
        client=client,
        watches=loaded,
        backend=backend,
        settings=settings,
        namespaces=namespaces,
        max_workers=args.max_workers,
        graceful_shutdown_timeout=graceful,
    )
    for controller in manager.controllers:
        cache.adopt(controller.informer)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await manager.run(stop)
    finally:
        await backend.close()
        await proxy.stop()
        await cache.close()
        await client.close()
    return 0
