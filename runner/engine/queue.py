"""The work queue between informer events and reconcile workers, after client-go's.

Events only say "look at this key again", so the queue holds keys, not events, and keeps
the guarantees the reconcile loop relies on:

- a key waiting to be processed is queued once, however many events name it;
- a key being processed (handed out by `get`, not yet `done`) is never handed out again;
  if it is added meanwhile it is marked dirty and queued once more on `done`;
- `add_after` uses the loop's timers (no polling); a key waiting for several timers keeps
  the earliest;
- `add_rate_limited` backs off per key exponentially (`base_delay` doubling up to
  `max_delay`) until `forget` says the key succeeded, and never faster than an overall
  token bucket allows.

Pure asyncio: no IO, no threads; all methods but `get` are synchronous and must be called
from the loop's thread.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)


class QueueMetrics(Protocol):
    """What a queue reports (controller-runtime's workqueue metrics)."""

    def added(self) -> None: ...
    def depth(self, keys: int) -> None: ...
    def waited(self, seconds: float) -> None: ...
    def retried(self) -> None: ...


class TokenBucket:
    """`rate` tokens a second, at most `burst` saved: the overall limit on retries, so
    that many failing keys at once cannot hammer the API (client-go's 10 qps / 100)."""

    def __init__(self, *, rate: float = 10.0, burst: int = 100) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._last = time.monotonic()

    def reserve(self) -> float:
        """Take a token; return how long to wait until it is really available."""
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._rate


class QueueShutDown(Exception):
    """`get` was called on (or was waiting in) a queue that has been shut down."""


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, rate-limiting queue of keys."""

    def __init__(
        self,
        *,
        base_delay: float = 1.0,
        max_delay: float = 300.0,
        bucket: TokenBucket | None = None,
        metrics: QueueMetrics | None = None,
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._bucket = bucket or TokenBucket()
        self._metrics = metrics
        self._queued_at: dict[K, float] = {}
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()  # queued, or to be queued again when done
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shut_down = False

    # -- adding -----------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Queue `key` now (a no-op if it is already queued; deferred to `done` while
        it is being processed; ignored after `shutdown`)."""
        if self._shut_down or key in self._dirty:
            return
        self._dirty.add(key)
        if self._metrics is not None:
            self._metrics.added()
        if key in self._processing:
            return
        self._enqueue(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` after `delay` seconds; an earlier pending add of the same key wins."""
        if self._shut_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= when:
                return
            pending[1].cancel()
        self._timers[key] = (when, loop.call_at(when, self._fire, key))

    def add_rate_limited(self, key: K) -> float:
        """Queue `key` after its next backoff delay, and return that delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = max(self.backoff(failures), self._bucket.reserve())
        if self._metrics is not None:
            self._metrics.retried()
        self.add_after(key, delay)
        return delay

    def backoff(self, failures: int) -> float:
        """The delay after `failures` earlier failures of a key."""
        return min(self._base_delay * 2.0 ** min(failures, 64), self._max_delay)

    def forget(self, key: K) -> None:
        """Reset the backoff of `key` (it succeeded, or will never be retried)."""
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        """How many rate-limited adds `key` had since it was last forgotten."""
        return self._failures.get(key, 0)

    def set_requeues(self, key: K, failures: int) -> None:
        """Carry on the back-off of `key` from `failures` (a key handed over by another
        replica keeps its back-off)."""
        if failures > 0:
            self._failures[key] = failures

    def in_flight(self, key: K) -> bool:
        """Whether `key` is handed out and not yet `done`."""
        return key in self._processing

    def due_in(self, key: K) -> float | None:
        """Seconds until the pending `add_after` of `key` fires (None when none waits)."""
        pending = self._timers.get(key)
        if pending is None:
            return None
        return max(0.0, pending[0] - asyncio.get_running_loop().time())

    # -- processing -------------------------------------------------------------------

    async def get(self) -> K:
        """Wait for the next key and mark it being processed; call `done(key)` after.
        Raises QueueShutDown once the queue is shut down (keys still queued are dropped)."""
        while True:
            if self._shut_down:
                raise QueueShutDown()
            if self._queue:
                key = self._queue.popleft()
                self._dirty.discard(key)
                self._processing.add(key)
                queued_at = self._queued_at.pop(key, None)
                if self._metrics is not None:
                    self._metrics.depth(len(self._queue))
                    if queued_at is not None:
                        self._metrics.waited(time.monotonic() - queued_at)
                return key
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # A wake-up meant for us must not be lost with us.
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()
                raise
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def done(self, key: K) -> None:
        """Processing of `key` ended; queue it again if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty and not self._shut_down:
            self._enqueue(key)

    def shutdown(self) -> None:
        """Stop: drop delayed adds, ignore new adds, make every `get` raise QueueShutDown."""
        self._shut_down = True
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    @property
    def shutting_down(self) -> bool:
        return self._shut_down

    def __len__(self) -> int:
        """Keys ready to be handed out (not those in process or waiting on a timer)."""
        return len(self._queue)

    def len(self) -> int:
        """Same as `len(queue)`."""
        return len(self._queue)

    @property
    def processing(self) -> int:
        """How many keys are handed out and not yet done."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """How many keys wait on a timer."""
        return len(self._timers)

    # -- internals --------------------------------------------------------------------

    def _enqueue(self, key: K) -> None:
        self._queue.append(key)
        self._queued_at[key] = time.monotonic()
        if self._metrics is not None:
            self._metrics.depth(len(self._queue))
        self._wake_one()

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


__all__ = ["QueueMetrics", "QueueShutDown", "TokenBucket", "WorkQueue"]
