"""The engine tier's harness: the real engine (Controller, Manager, LeaderElector) in the
test's own event loop, against the real API server, with a scripted reconciler.

The engine knows nothing of Ansible, so neither does this: `ScriptedReconciler` returns,
for each reconcile of a key, the next outcome scripted for its name (Done, RequeueAfter,
Retry, Terminal, a bug, or hold until the test lets it go). Informers, work queues,
metrics and Leases are the real ones, so what the engine does with an outcome is seen as
it is, in seconds. `Tier` (the objects of the test's kind, its metrics, its controllers)
is shared with the operator tier (tests/support/operatortier.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from runner.engine.controller import ConcurrencyLimiter, Controller, EventPredicate, ObjectFilter
from runner.engine.outcome import Done, Outcome, Reconciler
from runner.k8s.client import KubeClient
from runner.k8s.informer import Informer
from runner.observability.metrics import OperatorMetrics
from runner.structs import GVK, NamespacedName

T = TypeVar("T")

Step = Callable[[NamespacedName], Awaitable[Outcome]]
"""One scripted reconcile: the outcome it returns (or what it raises) for the key."""


def returns(outcome: Outcome) -> Step:
    """A reconcile that returns `outcome` at once."""

    async def step(_key: NamespacedName) -> Outcome:
        return outcome

    return step


def raises(error: Exception) -> Step:
    """A reconcile that raises `error` (a bug: reconcilers return their failures)."""

    async def step(_key: NamespacedName) -> Outcome:
        raise error

    return step


def holds(gate: asyncio.Event, then: Outcome | None = None) -> Step:
    """A reconcile that lasts until the test sets `gate`, then returns `then` (Done)."""

    async def step(_key: NamespacedName) -> Outcome:
        await gate.wait()
        return then or Done()

    return step


class ScriptedReconciler:
    """A `Reconciler` that does nothing but count: each reconcile of a key takes the next
    step scripted for its name (`script`), or `default` when none is left."""

    def __init__(self) -> None:
        self.keys: list[NamespacedName] = []
        self.cancelled: list[str] = []
        self.finished: list[str] = []
        self.default: Step = returns(Done())
        self.in_flight = 0
        self.most_in_flight = 0
        self._steps: dict[str, deque[Step]] = defaultdict(deque)

    def script(self, name: str, *steps: Step) -> None:
        self._steps[name].extend(steps)

    def runs(self, name: str) -> int:
        """How many reconciles of the object `name` have started."""
        return sum(1 for key in self.keys if key.name == name)

    async def reconcile(self, key: NamespacedName) -> Outcome:
        self.keys.append(key)
        steps = self._steps.get(key.name)
        step = steps.popleft() if steps else self.default
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            outcome = await step(key)
        except asyncio.CancelledError:
            self.cancelled.append(key.name)
            raise
        finally:
            self.in_flight -= 1
        self.finished.append(key.name)
        return outcome


async def until(probe: Callable[[], T | None], *, timeout: float = 15, message: str) -> T:
    """Wait until `probe()` is truthy, checking at every turn of the loop's clock (10 ms),
    and return its value; fail naming `message` and the last value after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s: {message}; last: {value!r}")
        await asyncio.sleep(0.01)


@dataclass
class Tier:
    """One test's view: its kind and namespace on the real API server, its metrics, and
    the controllers made for them (stopped when the test ends)."""

    client: KubeClient
    gvk: GVK
    namespace: str
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    controllers: list[Controller] = field(default_factory=list)

    async def started(self, controller: Controller) -> Controller:
        """`controller`, started and synced with the API server (stopped at the end)."""
        self.controllers.append(controller)
        await controller.start()
        await asyncio.wait_for(controller.wait_synced(), timeout=30)
        return controller

    async def stop(self) -> None:
        for controller in self.controllers:
            await controller.stop(timeout=0)

    # -- the test's objects, through the real API --------------------------------------

    async def create(
        self, name: str, spec: Mapping[str, Any] | None = None, **metadata: Any
    ) -> dict[str, Any]:
        return await self.client.create(
            self.gvk,
            {
                "apiVersion": f"{self.gvk.group}/{self.gvk.version}",
                "kind": self.gvk.kind,
                "metadata": {"name": name, "namespace": self.namespace, **metadata},
                "spec": dict(spec or {}),
            },
        )

    async def get(self, name: str) -> dict[str, Any]:
        return await self.client.get(self.gvk, name=name, namespace=self.namespace)

    async def patch(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.client.patch(self.gvk, name=name, namespace=self.namespace, body=body)

    async def delete(self, name: str) -> None:
        await self.client.delete(self.gvk, name=name, namespace=self.namespace)

    def key(self, name: str) -> NamespacedName:
        return NamespacedName(self.namespace, name)

    # -- the engine's own counters -----------------------------------------------------

    def metric(self, metric: str, /, **labels: str) -> float:
        """A sample of the engine's metrics (0 when it has none yet)."""
        return self.metrics.registry.get_sample_value(metric, labels) or 0.0


@dataclass
class Engine(Tier):
    """The engine tier: controllers of the test's kind driving a scripted reconciler."""

    reconciler: ScriptedReconciler = field(default_factory=ScriptedReconciler)

    def make_controller(
        self,
        *,
        reconciler: Reconciler | None = None,
        workers: int = 1,
        predicate: EventPredicate | None = None,
        selects: ObjectFilter | None = None,
        global_limit: asyncio.Semaphore | None = None,
        prioritized: bool = True,
        limiter: ConcurrencyLimiter | None = None,
    ) -> Controller:
        """A controller of the test's kind in its namespace (not started)."""
        name = f"{self.gvk.kind.lower()}-engine-tier"
        return Controller(
            name=name,
            gvk=self.gvk,
            informer=Informer(self.client, self.gvk, namespaces=[self.namespace]),
            reconciler=reconciler or self.reconciler,
            workers=workers,
            predicate=predicate,
            selects=selects,
            global_limit=global_limit,
            metrics=self.metrics.controller(name, gvk=self.gvk, workers=workers),
            prioritized=prioritized,
            limiter=limiter,
        )

    async def controller(self, **options: Any) -> Controller:
        """A started controller of `make_controller(**options)`, synced with the API."""
        return await self.started(self.make_controller(**options))


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The condition `kind` of `obj`'s status, if it has one."""
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return None
