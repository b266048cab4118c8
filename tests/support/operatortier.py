"""The operator tier's harness: the Ansible operator's controllers (the real engine and
reconciler, built per watch as `run` builds them) in the test's own event loop, against
the real API server, with a scripted Ansible backend.

Only the Ansible step is a stand-in: `ScriptedBackend` returns, for each run, the next
step scripted for its CR (succeed, fail, ask for a requeue, report no result, or hold
until the test lets it go). Informers, work queues, status writes, finalizers, Events
and Leases all go through the real API server, so what a reconcile does is seen as it
is, in seconds and without an operator process to poll.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import FailedTask, RunResult
from runner.engine.controller import Controller
from runner.errors import AnsibleRunError
from runner.observability.kubeevents import EventRecorder
from runner.operator.builder import ControllerBuilder
from runner.operator.reconciler import RunSettings
from runner.structs import GVK, NamespacedName
from runner.watches.model import Watch
from support.engine import Tier, condition, until

__all__ = [
    "OperatorTier",
    "ScriptedBackend",
    "condition",
    "failed",
    "held",
    "no_result",
    "ok",
    "until",
]

Step = Callable[[RunRequest], Awaitable[RunResult]]
"""One scripted Ansible run: what it returns (or raises) for the request."""


def ok(
    *, changed: int = 0, requeue_after: float | None = None, requeue_error: str | None = None
) -> Step:
    """A run that succeeds (optionally asking for a requeue, as `requeue_after` tasks do,
    or with a `requeue_after` period that could not be read)."""

    async def step(_request: RunRequest) -> RunResult:
        return RunResult(
            ok=1 + changed,
            changed=changed,
            requeue_after=requeue_after,
            requeue_error=requeue_error,
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


@dataclass
class OperatorTier(Tier):
    """The operator tier: controllers of watches of the test's kind, with a scripted
    Ansible backend."""

    backend: ScriptedBackend = field(default_factory=ScriptedBackend)

    def watch(self, **fields: Any) -> Watch:
        """A watch of the test's kind; its role is never read (the backend is scripted)."""
        return Watch(gvk=self.gvk, role=Path("/scripted/role"), **fields)

    def builder(self, backend: ScriptedBackend | None = None) -> ControllerBuilder:
        """Builds controllers as `run` does, for the test's namespace."""
        return ControllerBuilder(
            client=self.client,
            backend=backend or self.backend,
            settings=RunSettings(),
            namespaces=[self.namespace],
            metrics=self.metrics,
            events=EventRecorder(self.client),
        )

    async def controller(self, **watch_fields: Any) -> Controller:
        """A started controller of `watch(**watch_fields)`, synced with the API server."""
        return await self.started(self.builder().build(self.watch(**watch_fields)))
