"""The in-process tier's harness: the real engine (Controller, Manager, LeaderElector) in
the test's own event loop, against the real API server, with a scripted Ansible backend.

Only the Ansible step is a stand-in: `ScriptedBackend` returns, for each run, the next
step scripted for its CR (succeed, fail, ask for a requeue, report no result, or hold
until the test lets it go). Informers, work queues, status writes, finalizers, Events
and Leases all go through the real API server, so what the engine does with an outcome
is seen as it is, in seconds and without an operator process to poll.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from runner.ansible.events import FailedTask, RunResult
from runner.ansible.inputs import RunRequest
from runner.engine.controller import Controller
from runner.engine.reconciler import RunSettings
from runner.errors import AnsibleRunError
from runner.k8s.client import KubeClient
from runner.observability.events import EventRecorder
from runner.observability.metrics import OperatorMetrics
from runner.structs import GVK, NamespacedName
from runner.watches import Watch

T = TypeVar("T")

Step = Callable[[RunRequest], Awaitable[RunResult]]
"""One scripted Ansible run: what it returns (or raises) for the request."""


def ok(*, changed: int = 0, requeue_after: float | None = None) -> Step:
    """A run that succeeds (optionally asking for a requeue, as `requeue_after` tasks do)."""

    async def step(_request: RunRequest) -> RunResult:
        return RunResult(
            ok=1 + changed,
            changed=changed,
            requeue_after=requeue_after,
            has_stats=True,
            completion=datetime.now(UTC),
        )

    return step


def failed(message: str) -> Step:
    """A run in which one task failed with `message`."""

    async def step(_request: RunRequest) -> RunResult:
        return RunResult(
            ok=1,
            failures=1,
            failed_tasks=(FailedTask("scripted task", message),),
            has_stats=True,
            completion=datetime.now(UTC),
        )

    return step


def no_result(message: str) -> Step:
    """A run that could not start or report (a missing role, no stats event)."""

    async def step(_request: RunRequest) -> RunResult:
        raise AnsibleRunError(message)

    return step


def held(gate: asyncio.Event, then: Step | None = None) -> Step:
    """A run that lasts until the test sets `gate`, then does `then` (succeeds)."""

    async def step(request: RunRequest) -> RunResult:
        await gate.wait()
        return await (then or ok())(request)

    return step


class ScriptedBackend:
    """An `AnsibleBackend` that runs nothing: each run of a CR takes the next step
    scripted for its name (`script`), or `default` when none is left."""

    def __init__(self) -> None:
        self.requests: list[RunRequest] = []
        self.cancelled: list[str] = []
        self.finished: list[str] = []
        self.forgotten: list[NamespacedName] = []
        self.default: Step = ok()
        self.in_flight = 0
        self._steps: dict[str, deque[Step]] = defaultdict(deque)

    def script(self, name: str, *steps: Step) -> None:
        self._steps[name].extend(steps)

    def runs(self, name: str) -> int:
        """How many runs of the CR `name` have started."""
        return sum(1 for request in self.requests if request.name == name)

    async def run(self, request: RunRequest, *, on_event: Any = None) -> RunResult:
        self.requests.append(request)
        steps = self._steps.get(request.name)
        step = steps.popleft() if steps else self.default
        self.in_flight += 1
        try:
            result = await step(request)
        except asyncio.CancelledError:
            self.cancelled.append(request.name)
            raise
        finally:
            self.in_flight -= 1
        self.finished.append(request.name)
        return result

    async def forget(self, gvk: GVK, namespace: str, name: str) -> None:
        self.forgotten.append(NamespacedName(namespace, name))

    async def close(self) -> None:
        return None


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
class Engine:
    """One test's view: its kind and namespace on the real API server, the scripted
    backend, and controllers made for them (stopped when the test ends)."""

    client: KubeClient
    gvk: GVK
    namespace: str
    backend: ScriptedBackend = field(default_factory=ScriptedBackend)
    metrics: OperatorMetrics = field(default_factory=OperatorMetrics)
    controllers: list[Controller] = field(default_factory=list)

    def watch(self, **fields: Any) -> Watch:
        """A watch of the test's kind; its role is never read (the backend is scripted)."""
        return Watch(gvk=self.gvk, role=Path("/scripted/role"), **fields)

    async def controller(self, **watch_fields: Any) -> Controller:
        """A started controller of `watch(**watch_fields)`, synced with the API server."""
        controller = Controller(
            watch=self.watch(**watch_fields),
            client=self.client,
            backend=self.backend,
            settings=RunSettings(),
            namespaces=[self.namespace],
            metrics=self.metrics,
            events=EventRecorder(self.client),
        )
        self.controllers.append(controller)
        await controller.start()
        await asyncio.wait_for(controller.wait_synced(), timeout=30)
        return controller

    async def stop(self) -> None:
        for controller in self.controllers:
            await controller.stop(timeout=0)

    # -- the test's CRs, through the real API ------------------------------------------

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

    # -- the operator's own counters ---------------------------------------------------

    def metric(self, metric: str, /, **labels: str) -> float:
        """A sample of the engine's metrics (0 when it has none yet)."""
        return self.metrics.registry.get_sample_value(metric, labels) or 0.0


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    """The condition `kind` of `obj`'s status, if it has one."""
    for found in (obj.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return None
