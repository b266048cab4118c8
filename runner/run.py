"""`ansible-operator run`: build settings from flags and environment, then serve.

The only place that reads the process environment for the runtime; everything below
gets explicit values.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import re
import signal
import socket
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runner import watches as watches_mod
from runner.ansible import hooks, requirements
from runner.ansible.backend import RunnerBackend
from runner.ansible.fast import FastBackend
from runner.ansible.fastwire import Discovery
from runner.ansible.inputs import runner_dir
from runner.ansible.rundir import RunDirectory, claim, remove_abandoned
from runner.collections_path import bundled_collections_path
from runner.durations import parse_duration
from runner.engine.controller import Controller
from runner.engine.leader import LeaderElector, LeaderSettings
from runner.engine.manager import Manager
from runner.engine.reconciler import RunSettings
from runner.engine.reload import Reloader
from runner.errors import ConfigError
from runner.k8s.client import KubeClient
from runner.k8s.kubeconfig import locate as locate_kubeconfig
from runner.observability import logging as logs
from runner.observability.events import EventRecorder
from runner.observability.metrics import OperatorMetrics
from runner.observability.serving import (
    HealthServer,
    KubeAuthorizer,
    MetricsServer,
    parse_bind_address,
    tls_context,
)
from runner.observability.usermetrics import ADDRESS_ENV as USER_METRICS_ADDRESS_ENV
from runner.observability.usermetrics import UserMetrics, UserMetricsServer
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.owner import KUBECTL_ENV, Owner, proxy_server
from runner.proxy.server import ProxyServer
from runner.sharding.membership import RingSettings, member_lease
from runner.sharding.metrics import ShardMetrics
from runner.sharding.ring import check_ring_name, new_member, shard_label
from runner.sharding.sharder import Sharder
from runner.structs import GVK, NamespacedName, bodies
from runner.webhookserver import runtime as webhook_runtime

log = logging.getLogger("ansible-operator")

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_COLLECTIONS_PATH = "/usr/share/ansible/collections:~/.ansible/collections"
DISCOVERED_KINDS = (("v1", "ConfigMap"), ("apps/v1", "Deployment"))
"""Looked up at start (besides the watched kinds) to fill the modules' discovery caches:
the core group and apps, where most of what operator roles manage lives."""


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
    reconcile_timeout = _duration("--reconcile-timeout", args.reconcile_timeout)
    if reconcile_timeout < 0:
        raise ConfigError(f"--reconcile-timeout: must not be negative: {args.reconcile_timeout}")
    # Every setting is checked before the first log line: a mistake is one line.
    endpoints(args)
    leader_settings(args, environ, watch_namespaces(environ))
    sharding_settings(args, environ, watch_namespaces(environ))

    warned: set[str] = set()

    def load_watches() -> tuple[watches_mod.Watch, ...]:
        loaded = watches_mod.load(
            args.watches_file,
            environ=dict(environ),
            cwd=Path.cwd(),
            default_reconcile_period=reconcile_period,
            default_max_concurrent_reconciles=args.max_concurrent_reconciles,
            default_ansible_verbosity=args.ansible_verbosity,
            default_reconcile_timeout=reconcile_timeout,
        )
        # Once per process: a live reload re-reads the file but does not repeat them.
        for message in (message for watch in loaded for message in watch.warnings):
            if message not in warned:
                warned.add(message)
                log.warning("%s", message)
        return loaded

    loaded = load_watches()
    locate_kubeconfig(_kubeconfig(environ), environ)
    for watch in loaded:
        target = watch.playbook or watch.role
        log.info("watching %s with %s", watch.gvk, target)
        warning = watches_mod.spec_template_warning(watch)
        if warning is not None:
            log.warning("%s", warning)
    for message in collection_warnings((Path.cwd() / args.watches_file).parent, environ):
        log.warning("%s", message)
    webhook_settings = webhook_runtime.settings_from(args)
    webhooks = webhook_runtime.load(webhook_settings, environ)
    return asyncio.run(
        _serve(
            args,
            loaded,
            webhooks=(webhooks, webhook_settings),
            namespaces=watch_namespaces(environ),
            graceful=graceful,
            load_watches=load_watches,
        )
    )


def collection_warnings(project: Path, environ: Mapping[str, str]) -> list[str]:
    """What the project's requirements.yml asks for that the collections Ansible would
    load do not give (see `runner.ansible.requirements`); never fatal."""
    path = project / requirements.FILE_NAME
    try:
        wanted = requirements.parse(path.read_text(encoding="utf-8"), source=str(path))
    except FileNotFoundError:
        return []
    except (OSError, ValueError, yaml.YAMLError) as err:
        return [f"{path}: not checked against the installed collections: {err}"]
    scan_sys_path = environ.get("ANSIBLE_COLLECTIONS_SCAN_SYS_PATH", "true").lower()
    paths = requirements.search_paths(
        environ.get("ANSIBLE_COLLECTIONS_PATH", ""),
        sys.path if scan_sys_path not in ("0", "false", "no", "off", "n", "f") else (),
    )
    installed = requirements.installed_versions([r.name for r in wanted], paths)
    return requirements.check(wanted, installed, source=str(path))


def _kubeconfig(environ: Mapping[str, str]) -> str | None:
    return environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None


def _kubeconfig_vars(kubeconfig: str | None) -> dict[str, str]:
    """Webhook roles talk to the API server with the operator's own credentials."""
    path = str(Path(kubeconfig).resolve()) if kubeconfig else ""
    return {"K8S_AUTH_KUBECONFIG": path, "KUBECONFIG": path} if path else {}


async def _own_run_directory(args: argparse.Namespace, environ: Mapping[str, str]) -> RunDirectory:
    """This process's fresh, private run directory under the base (`rundir.py`); the
    directories earlier processes of this operator left behind are removed first."""
    base = runner_dir(environ)
    identity = str(Path(args.watches_file).resolve())
    own = await asyncio.to_thread(claim, base, identity=identity)
    removed = await asyncio.to_thread(remove_abandoned, base, identity=identity)
    if removed:
        log.info("removed %d run directories of earlier processes of this operator", len(removed))
    log.info("Ansible runs of this process are under %s", own.path)
    return own


def search_paths(environ: Mapping[str, str]) -> list[Path]:
    """The user's roles and collections paths (what a live reload watches besides the
    watches' own roles and playbooks); our bundled collection is not theirs to edit."""
    bundled = str(bundled_collections_path())
    entries = environ.get("ANSIBLE_ROLES_PATH", "").split(":")
    entries += environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(":")
    return [Path(e).expanduser() for e in entries if e and e != bundled]


def owner_of(obj: Mapping[str, Any]) -> Owner:
    """The owner identity of a CR, as its runs' kubeconfigs carry it."""
    return Owner(
        api_version=str(obj.get("apiVersion") or ""),
        kind=str(obj.get("kind") or ""),
        name=bodies.name(obj),
        uid=bodies.uid(obj),
        namespace=bodies.namespace(obj),
    )


def leader_settings(
    args: argparse.Namespace, environ: Mapping[str, str], namespaces: list[str] | None
) -> LeaderSettings | None:
    """The Lease to elect a leader with, or None without `--leader-elect`."""
    if not (args.leader_elect or args.enable_leader_election):
        return None
    name = args.leader_election_id or environ.get("OPERATOR_NAME", "")
    if not name:
        # Replicas of one operator run in the same directory layout: derive the id from it.
        slug = re.sub(r"[^a-z0-9-]+", "-", Path.cwd().name.lower()).strip("-") or "operator"
        name = f"{slug}-ansible-operator-lock"
    namespace = args.leader_election_namespace or environ.get("POD_NAMESPACE", "")
    if not namespace and SERVICE_ACCOUNT_NAMESPACE.is_file():
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
    if not namespace and namespaces:
        namespace = namespaces[0]
    if not namespace:
        raise ConfigError(
            "--leader-elect: no namespace for the Lease; outside a pod pass "
            "--leader-election-namespace (or set WATCH_NAMESPACE)"
        )
    settings = LeaderSettings(
        name=name,
        namespace=namespace,
        lease_duration=_duration("--leader-elect-lease-duration", args.leader_elect_lease_duration),
        renew_deadline=_duration("--leader-elect-renew-deadline", args.leader_elect_renew_deadline),
        retry_period=_duration("--leader-elect-retry-period", args.leader_elect_retry_period),
    )
    check_leader_durations(settings)
    return settings


def sharding_settings(
    args: argparse.Namespace, environ: Mapping[str, str], namespaces: list[str] | None
) -> RingSettings | None:
    """The ring this replica joins, or None without `--sharding`."""
    if not args.sharding:
        return None
    ring = args.sharding_ring or environ.get("OPERATOR_NAME", "")
    if not ring:
        ring = re.sub(r"[^a-z0-9-]+", "-", Path.cwd().name.lower()).strip("-")[:50] or "operator"
    problem = check_ring_name(ring)
    if problem is not None:
        raise ConfigError(f"--sharding-ring: {problem}")
    namespace = args.sharding_namespace or environ.get("POD_NAMESPACE", "")
    if not namespace and SERVICE_ACCOUNT_NAMESPACE.is_file():
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
    if not namespace and namespaces:
        namespace = namespaces[0]
    if not namespace:
        raise ConfigError(
            "--sharding: no namespace for the ring's Leases; outside a pod pass "
            "--sharding-namespace (or set WATCH_NAMESPACE)"
        )
    lease = LeaderSettings(
        name=ring,
        namespace=namespace,
        lease_duration=_duration("--sharding-lease-duration", args.sharding_lease_duration),
        renew_deadline=_duration("--sharding-renew-deadline", args.sharding_renew_deadline),
        retry_period=_duration("--sharding-retry-period", args.sharding_retry_period),
    )
    try:
        check_leader_durations(lease)
    except ConfigError as err:
        raise ConfigError(str(err).replace("--leader-elect-", "--sharding-")) from None
    return RingSettings(
        ring=ring,
        namespace=namespace,
        member=new_member(environ.get("POD_NAME") or socket.gethostname()),
        lease_duration=lease.lease_duration,
        renew_deadline=lease.renew_deadline,
        retry_period=lease.retry_period,
    )


def check_leader_durations(settings: LeaderSettings) -> None:
    """client-go's rules for an elector (the Go operator fails on them at start):
    lease > renew deadline > 1.2 x retry period > 0."""
    lease, renew, retry = settings.lease_duration, settings.renew_deadline, settings.retry_period
    problem = ""
    if retry <= 0:
        problem = "--leader-elect-retry-period must be above 0"
    elif lease <= renew:
        problem = "--leader-elect-lease-duration must be longer than --leader-elect-renew-deadline"
    elif renew <= 1.2 * retry:
        problem = (
            "--leader-elect-renew-deadline must be longer than 1.2 x --leader-elect-retry-period"
        )
    if problem:
        raise ConfigError(
            f"{problem} (lease {lease:g}s, renew deadline {renew:g}s, retry period {retry:g}s)"
        )


@dataclass(frozen=True)
class _Endpoints:
    metrics: tuple[str, int] | None
    health: tuple[str, int] | None
    user_metrics: tuple[str, int] | None


def endpoints(args: argparse.Namespace) -> _Endpoints:
    if args.metrics_require_rbac and not args.metrics_secure:
        raise ConfigError("--metrics-require-rbac needs --metrics-secure")
    return _Endpoints(
        metrics=parse_bind_address("--metrics-bind-address", args.metrics_bind_address),
        health=parse_bind_address("--health-probe-bind-address", args.health_probe_bind_address),
        user_metrics=parse_bind_address(
            "--user-metrics-bind-address", args.user_metrics_bind_address
        ),
    )


async def _serve(
    args: argparse.Namespace,
    loaded: tuple[watches_mod.Watch, ...],
    *,
    namespaces: list[str] | None,
    graceful: float,
    load_watches: Callable[[], tuple[watches_mod.Watch, ...]],
    webhooks: tuple[Sequence[Any], webhook_runtime.WebhookSettings],
) -> int:
    environ = os.environ
    served = endpoints(args)
    leadership = leader_settings(args, environ, namespaces)
    ring = sharding_settings(args, environ, namespaces)
    if ring is not None:
        if leadership is not None:
            log.info("--sharding: every replica works on its share; no leader is elected")
        leadership = None
        log.info("joining the sharding ring %s/%s as %s", ring.namespace, ring.ring, ring.member)
    kubeconfig = _kubeconfig(environ)
    async with contextlib.AsyncExitStack() as stack:
        own_dir = await _own_run_directory(args, environ)
        stack.callback(own_dir.release)
        client = await KubeClient.connect(kubeconfig=kubeconfig)
        stack.push_async_callback(client.close)
        metrics = OperatorMetrics()
        run_env = {key: value for key, value in KUBECTL_ENV.items() if key not in environ}
        if served.user_metrics is not None:
            user_metrics = UserMetricsServer(
                UserMetrics(metrics.registry),
                host=served.user_metrics[0],
                port=served.user_metrics[1],
            )
            try:
                await user_metrics.start()
                stack.push_async_callback(user_metrics.stop)
                run_env[USER_METRICS_ADDRESS_ENV] = user_metrics.address
            except OSError as err:
                log.warning("osdk_metric endpoint disabled: cannot listen: %s", err)

        own_shard = (shard_label(ring.ring), ring.member) if ring is not None else None
        cache = InformerCache(
            client,
            namespaces=namespaces,
            label_selector=f"{own_shard[0]}={own_shard[1]}" if own_shard else None,
        )
        stack.push_async_callback(cache.close)
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
            shard_label=own_shard,
        )
        port = await proxy.start()
        stack.push_async_callback(proxy.stop)
        backend_type, share_payloads = _backend_choice(args.ansible_backend)
        backend = backend_type(
            base_dir=own_dir.path,
            log_events=args.ansible_log_events,
            debug_logs=environ.get("ANSIBLE_DEBUG_LOGS", "").lower() in ("1", "true"),
            max_artifacts_bytes=args.max_artifacts_bytes,
            share_payloads=share_payloads,
        )
        stack.push_async_callback(backend.close)
        discovered = (*DISCOVERED_KINDS, *((w.gvk.api_version, w.gvk.kind) for w in loaded))
        prefetch = asyncio.create_task(_prefetch_discovery(client, discovered))
        stack.push_async_callback(_cancelled, prefetch)
        if isinstance(backend, FastBackend):
            # Warms up while the watches sync, and discovers the API through the proxy.
            backend.start(
                envvars=run_env,
                discovery=Discovery(
                    url=proxy_server(port=port),
                    kinds=discovered,
                    authorization=proxy.authorization(),
                ),
            )
        await stack.enter_async_context(
            webhook_runtime.running(
                *webhooks,
                client=client,
                backend=webhook_runtime.BackendChoice(
                    backend_type, share_payloads, args.ansible_log_events
                ),
                registry=metrics.registry,
                run_dir=own_dir.path,
                options=webhook_runtime.RunOptions(
                    envvars={**run_env, **_kubeconfig_vars(kubeconfig)},
                    verbosity=args.ansible_verbosity,
                    ansible_args=args.ansible_args,
                ),
            )
        )
        settings = RunSettings(
            kubeconfig=kubeconfig,
            run_kubeconfig=lambda obj: proxy.kubeconfig(owner_of(obj)),
            ansible_args=args.ansible_args,
            environ=run_env,
        )
        manager = Manager(
            client=client,
            watches=loaded,
            backend=backend,
            settings=settings,
            namespaces=namespaces,
            max_workers=args.max_workers,
            graceful_shutdown_timeout=graceful,
            metrics=metrics,
            events=EventRecorder(client),
            leader=(
                member_lease(client, ring)
                if ring is not None
                else LeaderElector(client, leadership)
                if leadership
                else None
            ),
        )
        sharder: Sharder | None = None
        if ring is not None:
            sharder = Sharder(
                client=client,
                settings=ring,
                namespaces=namespaces,
                metrics=ShardMetrics(metrics.registry),
                cache=cache,
            )
        share_informers(manager, cache, sharder)
        if args.reload or environ.get("ANSIBLE_OPERATOR_RELOAD", "").lower() in ("1", "true"):
            reloader = Reloader(
                manager,
                client=client,
                watches_file=Path(args.watches_file),
                load_watches=load_watches,
                shared_paths=search_paths(environ),
                on_watches=proxy.set_watches,
                environ=dict(environ),
            )
            reloader.start()
            stack.push_async_callback(reloader.stop)
        if served.health is not None:
            health = HealthServer(served.health, ready=lambda: _ready(manager, backend))
            await health.start()
            stack.push_async_callback(health.stop)
        if served.metrics is not None:
            metrics_server = MetricsServer(
                metrics.registry,
                served.metrics,
                authorize=KubeAuthorizer(client) if args.metrics_require_rbac else None,
            )
            tls = tls_context(args.metrics_cert_path) if args.metrics_secure else None
            await metrics_server.start(ssl_context=tls)
            stack.push_async_callback(metrics_server.stop)

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        if sharder is not None:
            sharding = asyncio.create_task(_shard_while_member(sharder, manager, stop))
            stack.push_async_callback(_cancelled, sharding)
        return await manager.run(stop)
    return 0  # not reached: the stack's body returns


async def _shard_while_member(sharder: Sharder, manager: Manager, stop: asyncio.Event) -> None:
    """Claim and hand off keys once the controllers run (the member's Lease is held), until
    the stop: a stopping replica takes no new keys."""
    while not manager.ready()[0] and not stop.is_set():
        await asyncio.sleep(0.2)
    await sharder.run(stop)


def share_informers(manager: Manager, cache: InformerCache, sharder: Sharder | None = None) -> None:
    """The proxy's cache serves each primary kind from its controller's informer, from the
    controller's start until a live reload stops it (sharded: narrowed to this replica's
    share first)."""

    def on_controller(controller: Controller) -> None:
        if sharder is not None:
            sharder.attach(controller)
        cache.adopt(controller.informer)

    manager.on_controller = on_controller
    manager.on_controller_stopped = lambda controller: cache.release(controller.informer)


async def _prefetch_discovery(client: KubeClient, kinds: Sequence[tuple[str, str]]) -> None:
    """Look up, in the background, the kinds runs most likely touch first: the proxy then
    has their paths when the first run asks (best effort)."""
    for api_version, kind in kinds:
        with contextlib.suppress(Exception):
            await client.resource(GVK.from_api_version(api_version, kind))


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


def _backend_choice(requested: str) -> tuple[type[RunnerBackend], bool]:
    """The backend class for `--ansible-backend` and whether runs share module payloads,
    after the start-up check of the ansible-core hooks (one warning when some are left
    out: the run then goes the plain ansible-runner way for them)."""
    core = hooks.plan(hooks.installed_core_version())
    warning = core.warning(requested)
    if warning is not None:
        log.warning(warning)
    fast = requested == "fast" and core.uses("zygote")
    return (FastBackend if fast else RunnerBackend), core.uses("payloads")


def _ready(manager: Manager, backend: RunnerBackend) -> tuple[bool, str]:
    """/readyz: the manager's answer, and not while the fast backend warms up."""
    ready, reason = manager.ready()
    if ready and isinstance(backend, FastBackend) and backend.warming():
        return False, "the Ansible backend is warming up"
    return ready, reason
