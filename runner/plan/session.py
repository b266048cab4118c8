"""One planned reconcile, end to end: the composition behind `ansible-operator plan`.

1. An API proxy as `run` starts it, with the dry-run layer (`dryrun.py`) answering every
   request and upgrades (exec, attach, port-forward) refused unless side effects are
   allowed; no informer and no dependent watch is started. The fast backend starts
   warming up.
2. The CR as the reconcile would find it (`crinput.py`), the first entry of the overlay.
3. The operator's own `Reconciler`, unchanged, for the CR's watch: same extra-vars, same
   role or playbook (the finalizer's when deleting), same backend; its writes to the CR
   (finalizer, status conditions) go through that proxy too, over a client of its own.
   The run gets the preview hook (`runner.ansible.hooks.preview`) through its callback
   plugin directory and `ANSIBLE_OPERATOR_PLAN`.
4. The report: the overlay against the cluster, the run's summary and skipped tasks.

The run's data directory is a temporary one, removed at the end (`keep_artifacts`
keeps it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kubernetes_asyncio.client import ApiClient, Configuration

from runner.ansible import hooks
from runner.ansible.artifacts import latest_run
from runner.ansible.fastbackend import FastBackend
from runner.ansible.fastbackend.wire import Discovery
from runner.ansible.history import summarize_run
from runner.ansible.hooks.previewactions import PLAN_ENV, PlanMode
from runner.ansible.inputs import private_data_dir
from runner.ansible.runnerbackend import RunnerBackend
from runner.engine.outcome import Done, Outcome, RequeueAfter, Retry, Terminal
from runner.errors import ConfigError
from runner.k8s.client import KubeClient
from runner.operator.reconciler import Reconciler, RunSettings
from runner.plan.crinput import CRInput, prepare
from runner.plan.diff import change_of
from runner.plan.dryrun import DryRunAPI
from runner.plan.overlay import Overlay
from runner.plan.report import PlanReport, skipped_tasks
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.owner import KUBECTL_ENV, Owner, proxy_server
from runner.proxy.server import ProxyServer
from runner.structs import NamespacedName, bodies
from runner.structs.bodies import KubeObject
from runner.util.durations import format_duration
from runner.watches.model import Watch

__all__ = ["PlanSettings", "plan", "preview_callback_dir"]

log = logging.getLogger("ansible-operator.plan")

_PREVIEW_CALLBACKS = Path(hooks.__file__).resolve().parent / "preview_callback"
_DISCOVERED_KINDS = (("v1", "ConfigMap"), ("apps/v1", "Deployment"))
"""Looked up by the fast backend's zygote while it warms up, besides the watched kinds
(those `run` looks up, `runner.operator.run.DISCOVERED_KINDS`)."""


def preview_callback_dir() -> Path:
    """The directory of the callback plugin that installs the preview hook."""
    return _PREVIEW_CALLBACKS


@dataclass(frozen=True, kw_only=True)
class PlanSettings:
    watches: tuple[Watch, ...]
    kubeconfig: str | None = None
    backend: str = "fast"
    allow_side_effects: bool = False
    inject_owner_ref: bool = True
    ansible_args: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables every run gets on top of this process's environment (roles and
    collections paths)."""
    keep_artifacts: Path | None = None
    """Keep the run's data directory here instead of removing it."""
    show_secrets: bool = False
    """Print Secret data and credential-like values instead of masking them."""


async def plan(settings: PlanSettings, cr_input: CRInput) -> PlanReport:
    """Plan one reconcile (see the module docstring). ConfigError for bad input."""
    started = time.monotonic()
    core = hooks.plan(hooks.installed_core_version())
    if not core.uses("preview") and not settings.allow_side_effects:
        raise ConfigError(
            f"ansible-core {core.core_version or '(none)'} is not a version the plan's task "
            "filter was tested with, so a plan cannot skip the tasks that act outside the "
            "Kubernetes API; pass --allow-side-effects to run every task"
        )
    async with contextlib.AsyncExitStack() as stack:
        client = await KubeClient.connect(kubeconfig=settings.kubeconfig)
        stack.push_async_callback(client.close)
        overlay = Overlay()
        dry = DryRunAPI(client, overlay)
        cache = InformerCache(client, namespaces=None)  # never started: no informer
        stack.push_async_callback(cache.close)
        proxy = ProxyServer(
            client,
            watches=settings.watches,
            namespaces=None,
            cache=cache,
            dependents=DependentWatches(cache, enqueue=lambda _gvk, _key: None),
            inject_owner_ref=settings.inject_owner_ref,
            port=0,
            intercept=dry,
            upgrades=settings.allow_side_effects,
        )
        await proxy.start()
        stack.push_async_callback(proxy.stop)
        base = settings.keep_artifacts or Path(tempfile.mkdtemp(prefix="ansible-operator-plan-"))
        if settings.keep_artifacts is None:
            stack.callback(shutil.rmtree, base, True)
        record = base / "preview-record.jsonl"
        backend, backend_name = _backend(settings, base, record=record)
        stack.push_async_callback(backend.close)
        run_env = {key: value for key, value in KUBECTL_ENV.items() if key not in os.environ}
        if isinstance(backend, FastBackend):
            # Warms up while the CR is read and planned, as `run` warms up while its
            # informers sync; it discovers the API through the proxy.
            backend.start(
                envvars=run_env,
                discovery=Discovery(
                    url=proxy_server(port=proxy.port),
                    kinds=(
                        *_DISCOVERED_KINDS,
                        *((w.gvk.api_version, w.gvk.kind) for w in settings.watches),
                    ),
                    authorization=proxy.authorization(),
                ),
            )
        cr = await prepare(
            client,
            dry.upstream,
            overlay,
            watches=settings.watches,
            kubeconfig=settings.kubeconfig,
            cr_input=cr_input,
        )
        target = str(cr.watch.playbook or cr.watch.role or "")
        finalizer = cr.watch.finalizer
        if cr.deleting and finalizer is not None and (finalizer.role or finalizer.playbook):
            target = str(finalizer.playbook or finalizer.role)
        if cr.deleting and finalizer is None:
            return PlanReport(
                cr=change_of(
                    overlay.begin(cr.key, cr.live),
                    show_secrets=settings.show_secrets,
                    without_status=True,
                ),
                cr_status=None,
                changes=(),
                target=target,
                backend=backend_name,
                namespace=cr.key.namespace,
                deleting=True,
                ran=False,
                outcome="done",
                seconds=time.monotonic() - started,
                notes=(
                    f"{cr.watch.gvk} has no finalizer in the watches file: deleting the CR "
                    "runs nothing (Kubernetes garbage collection removes what it owns)",
                ),
            )
        own = _client_through(proxy)
        stack.push_async_callback(own.close)
        reconciler = Reconciler(
            watch=cr.watch,
            client=own,
            backend=backend,
            settings=RunSettings(
                run_kubeconfig=lambda obj: proxy.kubeconfig(_owner(obj)),
                ansible_args=settings.ansible_args,
                environ=run_env,
            ),
            read=lambda _key: cast(KubeObject | None, overlay.lookup(cr.key)[1]),
        )
        name = NamespacedName(namespace=cr.key.namespace, name=cr.key.name)
        outcome = await reconciler.reconcile(name)
        run = latest_run(private_data_dir(base, cr.watch.gvk, cr.key.namespace, cr.key.name))
        summary = summarize_run(run) if run is not None else None
        cr_entry = overlay.begin(cr.key, cr.live)
        failed, failure, said = _outcome(outcome)
        return PlanReport(
            cr=change_of(cr_entry, show_secrets=settings.show_secrets, without_status=True),
            cr_status=_status(cr_entry.current),
            changes=tuple(
                change_of(entry, show_secrets=settings.show_secrets)
                for entry in overlay.entries()
                if entry.key != cr.key
            ),
            target=target,
            backend=backend_name,
            namespace=cr.key.namespace,
            deleting=cr.deleting,
            outcome=said,
            failed=failed,
            failure=failure,
            run=summary,
            skipped=skipped_tasks(_records(record)),
            refused=(*proxy.refused_upgrades, *dry.refused),
            unvalidated=tuple(dry.unvalidated),
            dry_runs=dry.upstream.dry_runs,
            seconds=time.monotonic() - started,
        )
    raise AssertionError("not reached")  # the stack's body returns


# -- the run ----------------------------------------------------------------------------


def _backend(
    settings: PlanSettings, base: Path, *, record: Path
) -> tuple[RunnerBackend | FastBackend, str]:
    core = hooks.plan(hooks.installed_core_version())
    fast = settings.backend == "fast" and core.uses("zygote")
    mode = PlanMode(allow_side_effects=settings.allow_side_effects, record=str(record))
    callbacks = os.environ.get("ANSIBLE_CALLBACK_PLUGINS", "")
    env = {
        **settings.env,
        PLAN_ENV: mode.encode(),
        "ANSIBLE_CALLBACK_PLUGINS": os.pathsep.join(
            [str(_PREVIEW_CALLBACKS), *(p for p in callbacks.split(os.pathsep) if p)]
        ),
    }
    options: dict[str, Any] = {
        "env": env,
        "log_events": "nothing",
        "share_payloads": core.uses("payloads"),
        "max_artifacts_bytes": 0,
    }
    if fast:
        return FastBackend(base, **options), "fast"
    return RunnerBackend(base, **options), "runner"


def _records(path: Path) -> list[dict[str, Any]]:
    """The preview hook's record (`PlanMode.record`); unreadable lines are left out."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    records = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                records.append(record)
    return records


def _client_through(proxy: ProxyServer) -> KubeClient:
    """A client of the reconciler's own that talks to `proxy` (as runs do)."""
    configuration = Configuration(host=f"http://127.0.0.1:{proxy.port}")
    configuration.api_key = {"BearerToken": proxy.authorization()}
    return KubeClient(ApiClient(configuration=configuration))


def _owner(obj: Mapping[str, Any]) -> Owner:
    return Owner(
        api_version=str(obj.get("apiVersion") or ""),
        kind=str(obj.get("kind") or ""),
        name=bodies.name(obj),
        uid=bodies.uid(obj),
        namespace=bodies.namespace(obj),
    )


def _outcome(outcome: Outcome) -> tuple[bool, str, str]:
    """(failed, why, what the operator would do next)."""
    match outcome:
        case Retry(reason=reason):
            return True, reason, "retried with backoff"
        case Terminal(reason=reason):
            return True, reason, "not retried until the CR changes"
        case RequeueAfter(delay=delay):
            return False, "", f"reconciled again in {format_duration(delay)}"
        case Done():
            return False, "", "done"
    return False, "", str(outcome)


def _status(obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if obj is None:
        return None
    status = obj.get("status")
    return status if isinstance(status, Mapping) else None
