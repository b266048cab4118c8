"""`ansible-operator run`: serve with the settings the CLI built (`runner.operator.settings`).

Besides those settings, the only place that reads the process environment for the
runtime; everything below gets explicit values.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from runner.ansible import coreconfig, hooks, requirements
from runner.ansible.bundledcollection import bundled_collections_path
from runner.ansible.fastbackend import FastBackend
from runner.ansible.fastbackend.wire import Discovery
from runner.ansible.inputs import runner_dir
from runner.ansible.rundir import RunDirectory, claim, remove_abandoned
from runner.ansible.runnerbackend import RunnerBackend
from runner.devtools.cluster.trust import local_cluster_signer
from runner.engine.controller import Controller
from runner.engine.leader import LeaderElector
from runner.engine.manager import Manager
from runner.k8s.client import KubeClient
from runner.k8s.kubeconfig import locate as locate_kubeconfig
from runner.observability import logging as logs
from runner.observability.kubeevents import EventRecorder
from runner.observability.metrics import OperatorMetrics
from runner.observability.serving import HealthServer, KubeAuthorizer, MetricsServer, tls_context
from runner.observability.usermetrics import ADDRESS_ENV as USER_METRICS_ADDRESS_ENV
from runner.observability.usermetrics import UserMetrics, UserMetricsServer
from runner.operator.absent import AbsentSweep
from runner.operator.builder import ControllerBuilder
from runner.operator.memory import memory_limiter
from runner.operator.reconciler import RunSettings
from runner.operator.settings import Settings
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.owner import KUBECTL_ENV, Owner, proxy_server
from runner.proxy.server import ProxyServer
from runner.sharding.membership import member_lease
from runner.sharding.ring import shard_label
from runner.sharding.ringmetrics import ShardMetrics
from runner.sharding.sharder import Sharder
from runner.structs import GVK, NamespacedName, bodies
from runner.util.heaptrim import trim_periodically
from runner.watches import model as watches_mod
from runner.webhooks.server import runtime as webhook_runtime

log = logging.getLogger("ansible-operator")

DEFAULT_COLLECTIONS_PATH = "/usr/share/ansible/collections:~/.ansible/collections"
DISCOVERED_KINDS = (("v1", "ConfigMap"), ("apps/v1", "Deployment"))
"""Looked up at start (besides the watched kinds) to fill the modules' discovery caches:
the core group and apps, where most of what operator roles manage lives."""


def prepare_environment(settings: Settings, environ: MutableMapping[str, str]) -> str | None:
    """Set what ansible-runner's children inherit: roles and collections paths, and the
    ansible-core settings that run roles written for 2.18 unchanged (`coreconfig`; set
    before any Ansible process starts, as each reads them once). Returns the notice to
    log about those settings, if any."""
    notice = coreconfig.allow_broken_conditionals(hooks.installed_core_version(), environ)
    if settings.ansible_roles_path:
        environ["ANSIBLE_ROLES_PATH"] = settings.ansible_roles_path
    collections = settings.ansible_collections_path or environ.get(
        "ANSIBLE_COLLECTIONS_PATH", DEFAULT_COLLECTIONS_PATH
    )
    # Users' entries come first; our operator_sdk.util is the fallback.
    environ["ANSIBLE_COLLECTIONS_PATH"] = f"{collections}:{bundled_collections_path()}"
    return notice


def run(settings: Settings) -> int:
    # Every setting was checked when `settings` was built, before this first log line.
    logs.configure(
        level=settings.logging.level, encoder=settings.logging.encoder, devel=settings.logging.devel
    )
    environ = os.environ
    notice = prepare_environment(settings, environ)

    warned: set[str] = set()

    def load_watches() -> tuple[watches_mod.Watch, ...]:
        loaded = watches_mod.load(
            settings.watches_file,
            environ=dict(environ),
            cwd=Path.cwd(),
            default_reconcile_period=settings.reconcile_period,
            default_max_concurrent_reconciles=settings.max_concurrent_reconciles,
            default_ansible_verbosity=settings.ansible_verbosity,
            default_reconcile_timeout=settings.reconcile_timeout,
        )
        # Once per process: a live reload re-reads the file but does not repeat them.
        for message in (message for watch in loaded for message in watch.warnings):
            if message not in warned:
                warned.add(message)
                log.warning("%s", message)
        return loaded

    loaded = load_watches()
    locate_kubeconfig(settings.kubeconfig, environ)
    # After the inputs are read: a bad watches file stays a one-line error.
    if notice is not None:
        log.info("%s", notice)
    for watch in loaded:
        target = watch.playbook or watch.role
        log.info("watching %s with %s", watch.gvk, target)
        warning = watches_mod.spec_template_warning(watch)
        if warning is not None:
            log.warning("%s", warning)
    for message in collection_warnings((Path.cwd() / settings.watches_file).parent, environ):
        log.warning("%s", message)
    webhooks = webhook_runtime.load(settings.webhooks, environ)
    return asyncio.run(_serve(settings, loaded, webhooks=webhooks, load_watches=load_watches))


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


def _kubeconfig_vars(kubeconfig: str | None) -> dict[str, str]:
    """Webhook roles talk to the API server with the operator's own credentials."""
    path = str(Path(kubeconfig).resolve()) if kubeconfig else ""
    return {"K8S_AUTH_KUBECONFIG": path, "KUBECONFIG": path} if path else {}


async def _own_run_directory(settings: Settings, environ: Mapping[str, str]) -> RunDirectory:
    """This process's fresh, private run directory under the base (`rundir.py`); the
    directories earlier processes of this operator left behind are removed first, their
    runs moved into it (`history` shows them).

    Not for a sharded replica: it joins the ring as a new member, its predecessor's CRs
    go to whichever members win them, and no sweep could tell which of their data
    directories outlived their CR (its informers see only its own share): carried over,
    they would stay for good."""
    base = runner_dir(environ)
    identity = str(Path(settings.watches_file).resolve())
    own = await asyncio.to_thread(claim, base, identity=identity)
    carry = settings.sharding is None
    removed = await asyncio.to_thread(
        remove_abandoned, base, identity=identity, keep_runs_in=own.path if carry else None
    )
    if removed:
        log.info(
            "removed %d run directories of earlier processes of this operator, %s",
            len(removed),
            "keeping their runs" if carry else "with their runs (a new ring member)",
        )
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


async def _serve(
    settings: Settings,
    loaded: tuple[watches_mod.Watch, ...],
    *,
    load_watches: Callable[[], tuple[watches_mod.Watch, ...]],
    webhooks: Sequence[Any],
) -> int:
    environ = os.environ
    namespaces = settings.watch_namespaces
    leadership = settings.leader
    ring = settings.sharding
    kubeconfig = settings.kubeconfig
    async with contextlib.AsyncExitStack() as stack:
        own_dir = await _own_run_directory(settings, environ)
        stack.callback(own_dir.release)
        client = await KubeClient.connect(kubeconfig=kubeconfig)
        stack.push_async_callback(client.close)
        metrics = OperatorMetrics()
        run_env = {key: value for key, value in KUBECTL_ENV.items() if key not in environ}
        if settings.user_metrics_address is not None:
            user_metrics = UserMetricsServer(
                UserMetrics(metrics.registry),
                host=settings.user_metrics_address[0],
                port=settings.user_metrics_address[1],
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
            inject_owner_ref=settings.inject_owner_ref,
            port=settings.proxy_port,
            shard_label=own_shard,
        )
        port = await proxy.start()
        stack.push_async_callback(proxy.stop)
        backend_type, share_payloads = _backend_choice(settings.ansible_backend)
        backend = backend_type(
            base_dir=own_dir.path,
            log_events=settings.ansible_log_events,
            debug_logs=settings.debug_logs,
            max_artifacts_bytes=settings.max_artifacts_bytes,
            share_payloads=share_payloads,
        )
        stack.push_async_callback(backend.close)
        discovered = (*DISCOVERED_KINDS, *((w.gvk.api_version, w.gvk.kind) for w in loaded))
        prefetch = asyncio.create_task(_prefetch_discovery(client, discovered))
        stack.push_async_callback(_cancelled, prefetch)
        zygote_discovery = Discovery(
            url=proxy_server(port=port), kinds=discovered, authorization=proxy.authorization()
        )
        kubeconfig_source = locate_kubeconfig(kubeconfig, environ)
        webhook_server = await stack.enter_async_context(
            webhook_runtime.running(
                webhooks,
                settings.webhooks,
                client=client,
                backend=webhook_runtime.BackendChoice(
                    backend_type, share_payloads, settings.ansible_log_events
                ),
                registry=metrics.registry,
                run_dir=own_dir.path,
                namespaces=namespaces,
                dev_certificates=local_cluster_signer(
                    client.configuration.ssl_ca_cert,
                    kubeconfig_source.path if kubeconfig_source else None,
                    environ,
                ),
                options=webhook_runtime.RunOptions(
                    envvars={**run_env, **_kubeconfig_vars(kubeconfig)},
                    verbosity=settings.ansible_verbosity,
                    ansible_args=settings.ansible_args,
                ),
            )
        )
        run_settings = RunSettings(
            kubeconfig=kubeconfig,
            run_kubeconfig=lambda obj: proxy.kubeconfig(owner_of(obj)),
            ansible_args=settings.ansible_args,
            environ=run_env,
        )
        lease = (
            member_lease(client, ring)
            if ring is not None
            else LeaderElector(client, leadership)
            if leadership
            else None
        )
        limited = memory_limiter(
            own_dir.path, fraction=settings.memory_limit_fraction, metrics=metrics.memory
        )
        if limited is not None:
            sampler = asyncio.create_task(limited[1].run(), name="run-memory")
            stack.push_async_callback(_cancelled, sampler)
        trimming = asyncio.create_task(trim_periodically(), name="heap-trim")
        stack.push_async_callback(_cancelled, trimming)
        builder = ControllerBuilder(
            client=client,
            backend=backend,
            settings=run_settings,
            namespaces=namespaces,
            global_limit=asyncio.Semaphore(settings.max_workers)
            if settings.max_workers > 0
            else None,
            metrics=metrics,
            events=EventRecorder(client),
            prioritized=settings.priority_queue,
            limiter=limited[0] if limited is not None else None,
            memory=limited[1] if limited is not None else None,
        )
        manager = Manager(
            controllers=[builder.build(watch) for watch in loaded],
            graceful_shutdown_timeout=settings.graceful_shutdown_timeout,
            leader=lease,
        )
        sharder: Sharder | None = None
        if ring is not None:
            sharder = Sharder(
                client=client,
                settings=ring,
                namespaces=namespaces,
                metrics=ShardMetrics(metrics.registry),
                cache=cache,
                lease=lease,
            )
            manager.before_stop = sharder.leave
        share_informers(manager, cache, sharder)
        if sharder is None:
            # A sharded replica's informers see only its share: others' CRs look deleted.
            sweep = AbsentSweep(
                manager, backend=backend, base_dir=own_dir.path, namespaces=namespaces
            )
            stack.push_async_callback(sweep.close)
        if settings.reload:
            # Imported when asked for: watchdog's observers serve only `--reload`.
            from runner.operator.reload import Reloader

            reloader = Reloader(
                manager,
                builder=builder,
                watches=loaded,
                namespaces=namespaces,
                client=client,
                watches_file=Path(settings.watches_file),
                load_watches=load_watches,
                shared_paths=search_paths(environ),
                on_watches=proxy.set_watches,
                environ=dict(environ),
            )
            reloader.start()
            stack.push_async_callback(reloader.stop)
        if settings.health_address is not None:
            health = HealthServer(
                settings.health_address, ready=lambda: _ready(manager, webhook_server)
            )
            await health.start()
            stack.push_async_callback(health.stop)
        if settings.metrics_address is not None:
            metrics_server = MetricsServer(
                metrics.registry,
                settings.metrics_address,
                authorize=KubeAuthorizer(client) if settings.metrics_require_rbac else None,
            )
            tls = tls_context(settings.metrics_cert_path) if settings.metrics_secure else None
            await metrics_server.start(ssl_context=tls)
            stack.push_async_callback(metrics_server.stop)

        if isinstance(backend, FastBackend):
            warm_up = asyncio.create_task(
                _start_zygote(manager, backend, envvars=run_env, discovery=zygote_discovery)
            )
            stack.push_async_callback(_cancelled, warm_up)
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
    the replica has left the ring (the manager makes it leave after the stop)."""
    while not manager.ready()[0] and not stop.is_set():
        await asyncio.sleep(0.2)
    await sharder.run()


def share_informers(manager: Manager, cache: InformerCache, sharder: Sharder | None = None) -> None:
    """The proxy's cache serves each primary kind from its controller's informer, from the
    controller's start until a live reload stops it (sharded: narrowed to this replica's
    share first)."""

    def on_controller(controller: Controller) -> None:
        if sharder is not None:
            sharder.attach(controller)
        cache.adopt(controller.informer)

    def on_controller_stopped(controller: Controller) -> None:
        if sharder is not None:
            sharder.detach(controller)
        cache.release(controller.informer)

    manager.on_controller = on_controller
    manager.on_controller_stopped = on_controller_stopped


ZYGOTE_START_WAIT = 1.0
"""How long the zygote's start waits for the informers' sync (a standby's wait for the
Lease)."""


async def _start_zygote(
    manager: Manager, backend: FastBackend, *, envvars: Mapping[str, str], discovery: Discovery
) -> None:
    """Start the zygote's warm-up once the informers have synced (the operator is ready:
    what the start takes, ansible-runner's import among it, is not on the way there), or
    after `ZYGOTE_START_WAIT` s. It warms up in its own process beside the first
    reconciles, which wait for it; it discovers the API through the proxy."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(manager.wait_synced(), ZYGOTE_START_WAIT)
    await asyncio.to_thread(backend.start, envvars=envvars, discovery=discovery)


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


def _backend_choice(requested: str) -> tuple[type[RunnerBackend | FastBackend], bool]:
    """The backend class for `--ansible-backend` and whether runs share module payloads,
    after the start-up check of the ansible-core hooks (one warning when some are left
    out: the run then goes the plain ansible-runner way for them)."""
    core = hooks.plan(hooks.installed_core_version())
    warning = core.warning(requested)
    if warning is not None:
        log.warning(warning)
    fast = requested == "fast" and core.uses("zygote")
    return (FastBackend if fast else RunnerBackend), core.uses("payloads")


def _ready(
    manager: Manager, webhooks: webhook_runtime.WebhookServer | None = None
) -> tuple[bool, str]:
    """/readyz: the manager's answer (the informers synced), and not while the webhooks'
    Ansible backend warms up (an admission has a deadline). The reconciles' zygote warms
    up beside it: a reconcile that comes before it is warm waits for it."""
    ready, reason = manager.ready()
    if ready and webhooks is not None and webhooks.warming():
        return False, "the webhooks' Ansible backend is warming up"
    return ready, reason
