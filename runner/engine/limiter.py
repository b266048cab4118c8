"""A concurrency limiter that admits a reconcile only when a budget allows it.

The controller awaits its limiter's `slot(name)` before it takes a key (so that what is
held back stays queued, in priority order). `AdmissionLimiter` asks an `Admission` (the
Ansible operator's: memory, `runner.operator.memory`) whether one more reconcile of
controller `name` fits now; when it does not, the worker waits: on every reconcile that
ends, and every `recheck` seconds (what is measured may go down by itself). Waiting
workers are admitted first come, first served, and a reconcile is always admitted when
none runs: the limit can slow the operator down, never stop it.

It says so: a gauge of the workers waiting and a counter of waits (`LimiterMetrics`), and
one log line when an episode of waiting starts (the first worker held back while none
was) and one when it ends, not one per key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

log = logging.getLogger("ansible-operator.limiter")


class Admission(Protocol):
    """What the limiter asks."""

    def admits(self, name: str, running: Mapping[str, int]) -> bool:
        """Whether one more reconcile of controller `name` may start, `running` being
        the reconciles admitted and not ended, by controller (never asked when none)."""
        ...

    def why_not(self, name: str) -> str:
        """Why the last `admits(name, ...)` said no, for the log."""
        ...


class LimiterMetrics(Protocol):
    def waiting(self, count: int) -> None: ...
    def held(self) -> None: ...


class AdmissionLimiter:
    """A `ConcurrencyLimiter` (`runner.engine.controller`) driven by an `Admission`."""

    def __init__(
        self,
        admission: Admission,
        *,
        metrics: LimiterMetrics | None = None,
        recheck: float = 0.25,
        what: str = "reconciles",
    ) -> None:
        self._admission = admission
        self._metrics = metrics
        self._recheck = recheck
        self._what = what
        self._running: dict[str, int] = {}
        self._queue: deque[asyncio.Event] = deque()
        self._episode_started: float | None = None
        self.admitted = 0
        self.held_back = 0

    @property
    def running(self) -> int:
        return sum(self._running.values())

    @property
    def waiting(self) -> int:
        return len(self._queue)

    @contextlib.asynccontextmanager
    async def slot(self, name: str) -> AsyncIterator[None]:
        await self._acquire(name)
        try:
            yield
        finally:
            self._running[name] -= 1
            if not self._running[name]:
                del self._running[name]
            self._wake_first()

    async def _acquire(self, name: str) -> None:
        if not self._queue and self._fits(name):
            self._admit(name)
            return
        loop = asyncio.get_running_loop()
        turn = asyncio.Event()
        self._queue.append(turn)
        self.held_back += 1
        if self._metrics is not None:
            self._metrics.held()
        self._report()
        if self._episode_started is None:
            self._episode_started = loop.time()
            log.warning(
                "holding %s back: %s; they wait in the queue (%d running)",
                self._what,
                self._admission.why_not(name),
                self.running,
            )
        try:
            while not (self._queue[0] is turn and self._fits(name)):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(turn.wait(), timeout=self._recheck)
                turn.clear()
        finally:
            self._leave(turn)
        self._admit(name)
        self._wake_first()  # the next in line may fit too

    def _leave(self, turn: asyncio.Event) -> None:
        with contextlib.suppress(ValueError):
            self._queue.remove(turn)
        self._report()
        if not self._queue and self._episode_started is not None:
            waited = asyncio.get_running_loop().time() - self._episode_started
            self._episode_started = None
            log.info("%s no longer held back (after %.1f s)", self._what, waited)

    def _fits(self, name: str) -> bool:
        return not self._running or self._admission.admits(name, self._running)

    def _admit(self, name: str) -> None:
        self._running[name] = self._running.get(name, 0) + 1
        self.admitted += 1

    def _wake_first(self) -> None:
        if self._queue:
            self._queue[0].set()

    def _report(self) -> None:
        if self._metrics is not None:
            self._metrics.waiting(len(self._queue))


__all__ = ["Admission", "AdmissionLimiter", "LimiterMetrics"]
