"""A controller of the generic engine for each watch of watches.yaml.

The engine's `Controller` is given an informer, a reconciler and a predicate; this is
where a `Watch` becomes them: the informer of its kind, the Ansible `Reconciler` reading
from that informer's store, the Go operator's predicates with the watch's selector and
`watchAnnotationsChanges`, its worker count, a reload gate, the operator's queue
priorities setting and memory limiter. The builder remembers each
controller's watch and gate for live reload.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial

from runner.ansible.backend import AnsibleBackend
from runner.engine.controller import ConcurrencyLimiter, Controller
from runner.engine.predicates import selected, should_reconcile
from runner.k8s.client import KubeClient
from runner.k8s.informer import Informer
from runner.observability.kubeevents import EventRecorder
from runner.observability.metrics import OperatorMetrics
from runner.operator.memory import RunMemory
from runner.operator.reconciler import Reconciler, RunSettings
from runner.operator.reloadgate import ReloadGate
from runner.structs import GVK
from runner.watches.model import Watch

__all__ = ["ControllerBuilder", "controller_name"]


def controller_name(gvk: GVK) -> str:
    """The Go operator's controller name (the `controller` label of its metrics)."""
    return f"{gvk.kind}-{gvk.version}-controller".lower()


class ControllerBuilder:
    """Builds the controller of a watch; everything but the watch is the operator's."""

    def __init__(
        self,
        *,
        client: KubeClient,
        backend: AnsibleBackend,
        settings: RunSettings,
        namespaces: Sequence[str] | None,
        global_limit: asyncio.Semaphore | None = None,
        metrics: OperatorMetrics | None = None,
        events: EventRecorder | None = None,
        prioritized: bool = True,
        limiter: ConcurrencyLimiter | None = None,
        memory: RunMemory | None = None,
    ) -> None:
        self._client = client
        self._backend = backend
        self._settings = settings
        self._namespaces = namespaces
        self._global_limit = global_limit
        self._metrics = metrics
        self._events = events
        self._prioritized = prioritized
        self._limiter = limiter
        self._memory = memory
        self._watches: dict[GVK, Watch] = {}
        self._gates: dict[GVK, ReloadGate] = {}

    def build(self, watch: Watch) -> Controller:
        """A new controller of `watch` (not started); it replaces any earlier of its kind
        in what the builder remembers."""
        name = controller_name(watch.gvk)
        workers = max(1, watch.max_concurrent_reconciles)
        # Live reload holds new runs here while it checks an edit of the watch's files.
        gate = ReloadGate(name)
        # The selector is applied by the predicate (as the original does), so the
        # informer sees every object and notices labels that start to match.
        informer = Informer(self._client, watch.gvk, namespaces=self._namespaces)
        reconciler = Reconciler(
            watch=watch,
            client=self._client,
            backend=self._backend,
            settings=self._settings,
            read=informer.get,
            events=self._events,
            gate=gate,
        )
        self._watches[watch.gvk] = watch
        self._gates[watch.gvk] = gate
        if self._memory is not None:
            self._memory.watch(name, watch.gvk)
        return Controller(
            name=name,
            gvk=watch.gvk,
            informer=informer,
            reconciler=reconciler,
            workers=workers,
            predicate=partial(
                should_reconcile,
                selector=watch.selector,
                watch_annotations=watch.watch_annotations_changes,
            ),
            selects=partial(selected, selector=watch.selector),
            gate=gate,
            global_limit=self._global_limit,
            prioritized=self._prioritized,
            limiter=self._limiter,
            metrics=self._metrics.controller(
                name, gvk=watch.gvk, workers=workers, manages_status=watch.manage_status
            )
            if self._metrics is not None
            else None,
        )

    def watch(self, gvk: GVK) -> Watch | None:
        """The watch the last controller built for `gvk` reconciles."""
        return self._watches.get(gvk)

    def gate(self, gvk: GVK) -> ReloadGate | None:
        """The reload gate of the last controller built for `gvk`."""
        return self._gates.get(gvk)
