"""The work queue between informer events and reconcile workers, after client-go's and
controller-runtime's priority queue.

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

Priorities (`prioritized=True`, the default). Each add names a `Priority`: HIGH for news
(an object created, changed or deleted, a dependent changed, an explicit enqueue), LOW for
the rest (the initial list, resyncs, timers). `get` serves HIGH before LOW and, within a
priority, the key queued at it longest ago first. A key keeps one place, at the highest
priority it was added with: a HIGH add moves a waiting LOW key to the HIGH line; a key
re-added while processed is queued on `done` at the highest priority of those adds; the
pending timers of a key merge into the earliest time and the highest priority.

Defaults. `add`: HIGH. `add_after`: LOW, since a timer (reconcilePeriod, a role's
requeue_after) brings no news (controller-runtime's controller re-adds a RequeueAfter key
at the priority it was handed out with, so a resync chain begun by an edit stays HIGH).
`add_rate_limited`: the priority the key was handed out with (LOW when it is not in
process), as controller-runtime's controller does: the work asked for is not done yet.

No starvation. controller-runtime lets LOW keys wait as long as HIGH ones keep coming.
Here a LOW key that waited `max_low_wait` seconds is served as if HIGH by taking turns:
while the oldest LOW key is that old, `get` alternates between it and the HIGH line. Not
a merge into the HIGH line by age: the initial list queues thousands of LOW keys that all
age together, and every later HIGH event would then wait behind the rest of the list.
With turns a HIGH key waits at most twice as many hand-outs as without a LOW backlog. The
default, 300 s, is the default `max_delay` (priorities hold a LOW key back about as long
as backoff may hold a failing one), and leaves HIGH events first for the 5 minutes after a
restart's initial list.

Metrics: depth and queue wait per priority, labelled with controller-runtime's numbers
("0" HIGH, "-100" LOW; "" when `prioritized=False`, as it labels a plain queue).
`prioritized=False` is client-go's FIFO queue exactly; priorities passed are ignored.
Each priority is a deque with lazy deletion (a raised key leaves a stale entry, skipped
when it reaches the front): adds and gets are O(1) amortized.

Pure asyncio: no IO, no threads; all methods but `get` are synchronous and must be called
from the loop's thread.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import IntEnum
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)

DEFAULT_MAX_LOW_WAIT = 300.0


class Priority(IntEnum):
    """How soon a queued key is served. The values are controller-runtime's (its default
    priority and `handler.LowPriority`), and name the `priority` label of the metrics."""

    LOW = -100
    HIGH = 0

    @property
    def label(self) -> str:
        return str(int(self))


class QueueMetrics(Protocol):
    """What a queue reports (controller-runtime's workqueue metrics). `priority` is the
    label of the priority concerned ("" for a queue without priorities)."""

    def added(self) -> None: ...
    def depth(self, keys: int, priority: str = "") -> None: ...
    def waited(self, seconds: float, priority: str = "") -> None: ...
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


@dataclass(slots=True)
class _Waiting:
    """A queued key: its priority, its entry in that priority's line (`seq`), when it
    entered that line (`since`, for order and aging) and when it was queued at all
    (`queued_at`, for the wait metric)."""

    priority: Priority
    seq: int
    since: float
    queued_at: float


@dataclass(slots=True)
class _Timer:
    when: float
    priority: Priority
    handle: asyncio.TimerHandle


# Rebuild a line when this many of its entries are stale and they are most of it.
_COMPACT_AT = 1024
_HIGH, _LOW = Priority.HIGH, Priority.LOW


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, rate-limiting queue of keys, by priority."""

    def __init__(
        self,
        *,
        base_delay: float = 1.0,
        max_delay: float = 300.0,
        bucket: TokenBucket | None = None,
        metrics: QueueMetrics | None = None,
        prioritized: bool = True,
        max_low_wait: float = DEFAULT_MAX_LOW_WAIT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if base_delay <= 0 or max_delay < base_delay:
            raise ValueError("need 0 < base_delay <= max_delay")
        if max_low_wait < 0:
            raise ValueError("need max_low_wait >= 0")
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._bucket = bucket or TokenBucket()
        self._metrics = metrics
        self._prioritized = prioritized
        self._max_low_wait = max_low_wait
        self._clock = clock
        self._waiting: dict[K, _Waiting] = {}
        self._lines: dict[Priority, deque[tuple[int, K]]] = {p: deque() for p in Priority}
        self._counts: dict[Priority, int] = dict.fromkeys(Priority, 0)
        self._stale: dict[Priority, int] = dict.fromkeys(Priority, 0)
        self._seq = 0
        self._low_served_last = False
        self._dirty: dict[K, Priority] = {}  # added while processing: queue again on done
        self._processing: dict[K, Priority] = {}  # with the priority handed out at
        self._failures: dict[K, int] = {}
        self._timers: dict[K, _Timer] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._shut_down = False
        self._labels = {p: p.label if prioritized else "" for p in Priority}
        for priority in self._priorities():
            self._report_depth(priority)

    @property
    def prioritized(self) -> bool:
        return self._prioritized

    # -- adding -----------------------------------------------------------------------

    def add(self, key: K, priority: Priority = Priority.HIGH) -> None:
        """Queue `key` now at `priority` (raising it if it waits at a lower one; a no-op
        if it already waits at this or a higher one; deferred to `done` while it is being
        processed; ignored after `shutdown`)."""
        if self._shut_down:
            return
        if not self._prioritized:
            priority = _HIGH
        if key in self._processing:
            dirty = self._dirty.get(key)
            if dirty is None:
                if self._metrics is not None:
                    self._metrics.added()
                self._dirty[key] = priority
            elif priority > dirty:
                self._dirty[key] = priority
            return
        waiting = self._waiting.get(key)
        if waiting is None:
            if self._metrics is not None:
                self._metrics.added()
            self._enqueue(key, priority)
        elif priority > waiting.priority:
            self._raise(key, waiting, priority)

    def add_after(self, key: K, delay: float, priority: Priority = Priority.LOW) -> None:
        """Queue `key` at `priority` after `delay` seconds; of several pending adds of the
        same key, the earliest time and the highest priority win."""
        if self._shut_down:
            return
        if delay <= 0:
            self.add(key, priority)
            return
        priority = self._effective(priority)
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            pending.priority = max(pending.priority, priority)
            if pending.when <= when:
                return
            pending.handle.cancel()
            priority = pending.priority
        self._timers[key] = _Timer(when, priority, loop.call_at(when, self._fire, key))

    def add_rate_limited(self, key: K, priority: Priority | None = None) -> float:
        """Queue `key` after its next backoff delay, and return that delay. `priority`
        defaults to the one `key` was handed out with (LOW when it is not in process)."""
        if priority is None:
            priority = self._processing.get(key, Priority.LOW)
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = max(self.backoff(failures), self._bucket.reserve())
        if self._metrics is not None:
            self._metrics.retried()
        self.add_after(key, delay, priority)
        return delay

    def cancel_after(self, key: K) -> bool:
        """Drop the pending `add_after` of `key`; True when there was one. For a key whose
        object is gone: its resync timer would otherwise be held (10 hours by default)
        for every CR ever deleted, only to reconcile a name that no longer exists."""
        timer = self._timers.pop(key, None)
        if timer is None:
            return False
        timer.handle.cancel()
        return True

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
        return max(0.0, pending.when - asyncio.get_running_loop().time())

    def priority(self, key: K) -> Priority | None:
        """The priority `key` waits at: queued, or to be queued again on `done` (None when
        neither; a pending `add_after` does not count)."""
        waiting = self._waiting.get(key)
        return waiting.priority if waiting is not None else self._dirty.get(key)

    # -- processing -------------------------------------------------------------------

    async def get(self) -> K:
        """Wait for the next key and mark it being processed; call `done(key)` after.
        Raises QueueShutDown once the queue is shut down (keys still queued are dropped)."""
        if self._waiting and not self._shut_down:
            return self._pop()[0]  # no second coroutine when a key is ready
        key, _ = await self.get_with_priority()
        return key

    async def get_with_priority(self) -> tuple[K, Priority]:
        """`get`, and the priority the key was queued at (HIGH without priorities)."""
        await self.wait_ready()
        return self._pop()

    async def wait_ready(self) -> None:
        """Wait until a key is ready to be handed out, without taking it (a worker that
        must pass a limiter first leaves the key queued meanwhile). Raises QueueShutDown
        once the queue is shut down."""
        while True:
            if self._shut_down:
                raise QueueShutDown()
            if self._waiting:
                return
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
        self._processing.pop(key, None)
        priority = self._dirty.pop(key, None)
        if priority is not None and not self._shut_down:
            self._enqueue(key, priority)

    def shutdown(self) -> None:
        """Stop: drop delayed adds, ignore new adds, make every `get` raise QueueShutDown."""
        self._shut_down = True
        for timer in self._timers.values():
            timer.handle.cancel()
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
        return len(self._waiting)

    def len(self) -> int:
        """Same as `len(queue)`."""
        return len(self._waiting)

    def depth(self, priority: Priority) -> int:
        """Keys ready to be handed out at `priority` (all of them without priorities)."""
        return self._counts[self._effective(priority)]

    @property
    def processing(self) -> int:
        """How many keys are handed out and not yet done."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """How many keys wait on a timer."""
        return len(self._timers)

    # -- internals --------------------------------------------------------------------

    def _effective(self, priority: Priority) -> Priority:
        return priority if self._prioritized else Priority.HIGH

    def _priorities(self) -> tuple[Priority, ...]:
        return tuple(Priority) if self._prioritized else (Priority.HIGH,)

    def _report_depth(self, priority: Priority) -> None:
        if self._metrics is not None:
            self._metrics.depth(self._counts[priority], self._labels[priority])

    def _enqueue(self, key: K, priority: Priority) -> None:
        now = self._clock()
        self._seq += 1
        self._waiting[key] = _Waiting(priority, self._seq, now, now)
        self._lines[priority].append((self._seq, key))
        self._counts[priority] += 1
        if self._metrics is not None:
            self._report_depth(priority)
        if self._waiters:
            self._wake_one()

    def _raise(self, key: K, waiting: _Waiting, priority: Priority) -> None:
        old = waiting.priority
        self._seq += 1
        waiting.priority, waiting.seq, waiting.since = priority, self._seq, self._clock()
        self._lines[priority].append((self._seq, key))
        self._counts[old] -= 1
        self._counts[priority] += 1
        self._stale[old] += 1
        if self._stale[old] > _COMPACT_AT and 2 * self._stale[old] > len(self._lines[old]):
            self._compact(old)
        self._report_depth(old)
        self._report_depth(priority)

    def _compact(self, priority: Priority) -> None:
        self._lines[priority] = deque(e for e in self._lines[priority] if self._live(e))
        self._stale[priority] = 0

    def _live(self, entry: tuple[int, K]) -> bool:
        waiting = self._waiting.get(entry[1])
        return waiting is not None and waiting.seq == entry[0]

    def _front(self, priority: Priority) -> K | None:
        """The first live key of a line, dropping the stale entries before it."""
        line = self._lines[priority]
        if not self._counts[priority]:
            line.clear()  # only stale entries left, if any
            self._stale[priority] = 0
            return None
        while not self._live(line[0]):
            line.popleft()
            self._stale[priority] -= 1
        return line[0][1]

    def _pop(self) -> tuple[K, Priority]:
        high, low = self._front(_HIGH), self._front(_LOW)
        if low is not None and (
            high is None
            or (
                not self._low_served_last
                and self._clock() - self._waiting[low].since >= self._max_low_wait
            )
        ):
            line, key = _LOW, low
        else:
            assert high is not None  # get() checked that a key waits
            line, key = _HIGH, high
        self._low_served_last = line is _LOW
        self._lines[line].popleft()
        waiting = self._waiting.pop(key)
        self._counts[line] -= 1
        self._processing[key] = line
        if self._metrics is not None:
            self._report_depth(line)
            self._metrics.waited(self._clock() - waiting.queued_at, self._labels[line])
        return key, line

    def _fire(self, key: K) -> None:
        timer = self._timers.pop(key, None)
        self.add(key, timer.priority if timer is not None else Priority.LOW)

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


__all__ = [
    "DEFAULT_MAX_LOW_WAIT",
    "Priority",
    "QueueMetrics",
    "QueueShutDown",
    "TokenBucket",
    "WorkQueue",
]
