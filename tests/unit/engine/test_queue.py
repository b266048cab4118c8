"""WorkQueue: dedup, in-flight guard, re-add while processing, delays, backoff, shutdown,
and priorities: order, raising, aging, what re-adds keep, FIFO mode, metrics by priority."""

from __future__ import annotations

import asyncio
import random
from collections import deque

import pytest

from runner.engine.queue import Priority, QueueShutDown, TokenBucket, WorkQueue

HIGH, LOW = Priority.HIGH, Priority.LOW


async def next_key(queue: WorkQueue[str], timeout: float = 1.0) -> str:
    return await asyncio.wait_for(queue.get(), timeout)


async def nothing_ready(queue: WorkQueue[str], wait: float = 0.05) -> bool:
    try:
        key = await asyncio.wait_for(queue.get(), wait)
    except TimeoutError:
        return True
    queue.done(key)
    return False


async def test_duplicates_coalesce() -> None:
    queue: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "a", "b"):
        queue.add(key)
    assert len(queue) == 2
    assert queue.len() == 2
    assert [await next_key(queue), await next_key(queue)] == ["a", "b"]
    assert await nothing_ready(queue)


async def test_key_in_process_is_not_handed_out_again() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    assert await next_key(queue) == "a"
    queue.add("a")
    assert len(queue) == 0
    assert await nothing_ready(queue)
    queue.done("a")
    assert await next_key(queue) == "a"


async def test_readded_while_processing_runs_once_more() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    key = await next_key(queue)
    for _ in range(5):
        queue.add("a")
    queue.done(key)
    assert await next_key(queue) == "a"
    queue.done("a")
    assert await nothing_ready(queue)


async def test_done_without_readd_does_not_requeue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.done(await next_key(queue))
    assert await nothing_ready(queue)


async def test_waiting_getter_is_woken_by_add() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("a")
    assert await asyncio.wait_for(getter, 1) == "a"


async def test_workers_never_share_a_key() -> None:
    queue: WorkQueue[int] = WorkQueue()
    running: set[int] = set()
    overlaps: list[int] = []
    handled: list[int] = []

    async def worker() -> None:
        while True:
            key = await queue.get()
            if key in running:
                overlaps.append(key)
            running.add(key)
            await asyncio.sleep(0.001)
            handled.append(key)
            running.discard(key)
            queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for round_ in range(20):
        for key in range(3):
            queue.add(key)
        await asyncio.sleep(0.0005 * (round_ % 3))
    while len(queue) or queue.processing:
        await asyncio.sleep(0.005)
    queue.shutdown()
    await asyncio.gather(*workers, return_exceptions=True)
    assert overlaps == []
    assert set(handled) == {0, 1, 2}


async def test_cancelled_getter_does_not_lose_a_wakeup() -> None:
    queue: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("a")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs
    assert await asyncio.wait_for(second, 1) == "a"


async def test_add_after_delays() -> None:
    queue: WorkQueue[str] = WorkQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    queue.add_after("a", 0.05)
    assert len(queue) == 0
    assert queue.delayed == 1
    assert await next_key(queue) == "a"
    assert loop.time() - start >= 0.04
    assert queue.delayed == 0


async def test_add_after_keeps_earliest() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 10)
    queue.add_after("a", 0.02)
    queue.add_after("a", 5)
    assert queue.delayed == 1
    assert await next_key(queue) == "a"
    queue.done("a")
    assert await nothing_ready(queue)
    assert queue.delayed == 0


async def test_add_after_zero_is_immediate() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0)
    assert len(queue) == 1


@pytest.mark.parametrize(
    ("base", "cap", "expected"),
    [
        pytest.param(1.0, 300.0, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300], id="default"),
        pytest.param(0.005, 0.02, [0.005, 0.01, 0.02, 0.02], id="small-cap"),
    ],
)
def test_backoff_doubles_up_to_cap(base: float, cap: float, expected: list[float]) -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=base, max_delay=cap)
    assert [queue.backoff(n) for n in range(len(expected))] == pytest.approx(expected)
    assert queue.backoff(10_000) == cap


def test_defaults_start_at_one_second() -> None:
    queue: WorkQueue[str] = WorkQueue()
    assert queue.backoff(0) == 1.0
    assert queue.backoff(100) == 300.0


async def test_rate_limited_grows_caps_and_forget_resets() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.001, max_delay=0.004)
    delays = []
    for _ in range(5):
        delays.append(queue.add_rate_limited("a"))
        queue.done(await next_key(queue))
    assert delays == pytest.approx([0.001, 0.002, 0.004, 0.004, 0.004])
    assert queue.num_requeues("a") == 5
    assert queue.num_requeues("b") == 0
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    assert queue.add_rate_limited("a") == pytest.approx(0.001)


async def test_rate_limit_is_per_key() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.001, max_delay=1)
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")
    assert queue.add_rate_limited("b") == pytest.approx(0.001)
    assert queue.num_requeues("a") == 2


async def test_shutdown_wakes_getters_and_ignores_adds() -> None:
    queue: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    queue.add_after("later", 0.01)
    queue.shutdown()
    results = await asyncio.gather(*getters, return_exceptions=True)
    assert all(isinstance(r, QueueShutDown) for r in results)
    assert queue.shutting_down
    queue.add("a")
    queue.add_after("b", 0.001)
    assert len(queue) == 0
    assert queue.delayed == 0
    with pytest.raises(QueueShutDown):
        await queue.get()


async def test_done_after_shutdown_does_not_requeue() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    key = await next_key(queue)
    queue.add("a")
    queue.shutdown()
    queue.done(key)
    assert len(queue) == 0


def test_rejects_bad_delays() -> None:
    with pytest.raises(ValueError):
        WorkQueue(base_delay=0)
    with pytest.raises(ValueError):
        WorkQueue(base_delay=2, max_delay=1)


def test_token_bucket_allows_a_burst_then_spaces_retries() -> None:
    bucket = TokenBucket(rate=10.0, burst=3)
    delays = [bucket.reserve() for _ in range(5)]
    assert delays[:3] == [0.0, 0.0, 0.0]
    assert 0.09 <= delays[3] <= 0.1
    assert 0.19 <= delays[4] <= 0.2


async def test_rate_limited_adds_respect_the_overall_bucket() -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.001, bucket=TokenBucket(rate=10.0, burst=1))
    assert queue.add_rate_limited("a") == 0.001
    assert queue.add_rate_limited("b") >= 0.09  # the bucket, not the key's own backoff
    queue.shutdown()


# -- priorities -----------------------------------------------------------------------


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """QueueMetrics that keeps the last depth and every wait per priority label."""

    def __init__(self) -> None:
        self.adds = 0
        self.retries = 0
        self.depths: dict[str, int] = {}
        self.waits: list[tuple[str, float]] = []

    def added(self) -> None:
        self.adds += 1

    def depth(self, keys: int, priority: str = "") -> None:
        self.depths[priority] = keys

    def waited(self, seconds: float, priority: str = "") -> None:
        self.waits.append((priority, seconds))

    def retried(self) -> None:
        self.retries += 1


async def drain(queue: WorkQueue[str]) -> list[tuple[str, Priority]]:
    """Every ready key in the order handed out (each done at once), with its priority."""
    served = []
    while len(queue):
        key, priority = await asyncio.wait_for(queue.get_with_priority(), 1)
        queue.done(key)
        served.append((key, priority))
    return served


@pytest.mark.parametrize(
    ("adds", "expected"),
    [
        pytest.param(
            [("a", LOW), ("b", HIGH), ("c", LOW), ("d", HIGH)],
            [("b", HIGH), ("d", HIGH), ("a", LOW), ("c", LOW)],
            id="high-first-then-fifo-within-each",
        ),
        pytest.param(
            [("a", HIGH), ("b", HIGH), ("c", HIGH)],
            [("a", HIGH), ("b", HIGH), ("c", HIGH)],
            id="fifo-within-high",
        ),
        pytest.param(
            [("a", LOW), ("b", LOW), ("c", LOW)],
            [("a", LOW), ("b", LOW), ("c", LOW)],
            id="fifo-within-low",
        ),
        pytest.param(
            [("a", LOW), ("b", LOW), ("b", HIGH)],
            [("b", HIGH), ("a", LOW)],
            id="high-add-raises-a-waiting-low-key",
        ),
        pytest.param(
            [("a", LOW), ("b", HIGH), ("a", HIGH), ("c", HIGH)],
            [("b", HIGH), ("a", HIGH), ("c", HIGH)],
            id="raised-key-is-ordered-by-when-it-was-raised",
        ),
        pytest.param(
            [("a", HIGH), ("b", LOW), ("a", LOW)],
            [("a", HIGH), ("b", LOW)],
            id="low-add-never-lowers",
        ),
        pytest.param(
            [("a", LOW), ("a", HIGH), ("a", LOW), ("a", HIGH), ("b", LOW)],
            [("a", HIGH), ("b", LOW)],
            id="raised-key-keeps-one-place",
        ),
        pytest.param(
            [("a", HIGH), ("a", HIGH), ("b", LOW), ("b", LOW)],
            [("a", HIGH), ("b", LOW)],
            id="duplicates-coalesce-per-priority",
        ),
    ],
)
async def test_order_by_priority_then_age(
    adds: list[tuple[str, Priority]], expected: list[tuple[str, Priority]]
) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=Clock())
    for key, priority in adds:
        queue.add(key, priority)
    assert len(queue) == len(expected)
    assert await drain(queue) == expected
    assert await nothing_ready(queue)


def test_add_defaults_to_high_and_reports_where_a_key_waits() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add("a")
    queue.add("b", LOW)
    assert (queue.priority("a"), queue.priority("b"), queue.priority("c")) == (HIGH, LOW, None)
    assert (queue.depth(HIGH), queue.depth(LOW)) == (1, 1)
    queue.add("b", HIGH)
    assert (queue.depth(HIGH), queue.depth(LOW)) == (2, 0)


@pytest.mark.parametrize(
    ("waited", "max_low_wait", "lows", "expected"),
    [
        pytest.param(299.0, 300.0, ["l1"], ["h1", "h2", "h3", "l1"], id="young-low-waits"),
        pytest.param(300.0, 300.0, ["l1"], ["l1", "h1", "h2", "h3"], id="aged-low-served"),
        pytest.param(
            301.0,
            300.0,
            ["l1", "l2", "l3", "l4"],
            ["l1", "h1", "l2", "h2", "l3", "h3", "l4"],
            id="aged-lows-take-turns-with-high",
        ),
        pytest.param(
            0.0, 0.0, ["l1", "l2"], ["l1", "h1", "l2", "h2", "h3"], id="no-grace-alternates"
        ),
        pytest.param(
            60.0, 60.0, ["l1", "l2"], ["l1", "h1", "l2", "h2", "h3"], id="configurable-bound"
        ),
    ],
)
async def test_aged_low_keys_are_served_as_if_high(
    waited: float, max_low_wait: float, lows: list[str], expected: list[str]
) -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, max_low_wait=max_low_wait)
    for key in lows:
        queue.add(key, LOW)
    clock.now += waited
    for key in ("h1", "h2", "h3"):
        queue.add(key, HIGH)
    served = await drain(queue)
    assert [key for key, _ in served] == expected
    # Served as if HIGH, still counted as what it is.
    assert {priority for key, priority in served if key in lows} == {LOW}


@pytest.mark.parametrize(
    ("max_low_wait", "served_within"),
    [
        pytest.param(10.0, 12, id="aging-serves-the-low-key"),
        # What controller-runtime does: no bound, a LOW key starves under steady HIGH load.
        pytest.param(1e9, None, id="without-aging-it-starves"),
    ],
)
async def test_steady_high_load_does_not_starve_a_low_key(
    max_low_wait: float, served_within: int | None
) -> None:
    clock = Clock()
    queue: WorkQueue[str] = WorkQueue(clock=clock, max_low_wait=max_low_wait)
    queue.add("low", LOW)
    served_at = None
    for n in range(100):
        queue.add(f"h{n}", HIGH)  # one new HIGH key per hand-out: the HIGH line never empties
        clock.now += 1.0
        key = await next_key(queue)
        queue.done(key)
        if key == "low":
            served_at = n
            break
    if served_within is None:
        assert served_at is None
    else:
        assert served_at is not None and served_at <= served_within


@pytest.mark.parametrize(
    ("handed_out_at", "adds_meanwhile", "requeued_at"),
    [
        pytest.param(LOW, [], None, id="not-added-not-requeued"),
        pytest.param(LOW, [LOW], LOW, id="low"),
        pytest.param(LOW, [LOW, HIGH, LOW], HIGH, id="highest-of-the-adds"),
        pytest.param(HIGH, [LOW], LOW, id="the-adds-not-the-first-run"),
        pytest.param(HIGH, [HIGH, HIGH], HIGH, id="high"),
    ],
)
async def test_readded_while_processing_keeps_the_highest_priority(
    handed_out_at: Priority, adds_meanwhile: list[Priority], requeued_at: Priority | None
) -> None:
    metrics = Recorder()
    queue: WorkQueue[str] = WorkQueue(clock=Clock(), metrics=metrics)
    queue.add("a", handed_out_at)
    assert await queue.get_with_priority() == ("a", handed_out_at)
    queue.add("other", LOW)  # waiting before `a` is done
    for priority in adds_meanwhile:
        queue.add("a", priority)
    assert queue.priority("a") == requeued_at
    assert metrics.adds == 2 + bool(adds_meanwhile)  # dirty counts as one add
    queue.done("a")
    served = await drain(queue)
    if requeued_at is None:
        assert served == [("other", LOW)]
    elif requeued_at is HIGH:
        assert served == [("a", HIGH), ("other", LOW)]
    else:
        assert served == [("other", LOW), ("a", LOW)]


@pytest.mark.parametrize(
    ("timers", "expected"),
    [
        pytest.param([(0.01, None)], LOW, id="default-low"),
        pytest.param([(0.01, HIGH)], HIGH, id="explicit-high"),
        pytest.param([(0.01, LOW), (5.0, HIGH)], HIGH, id="later-high-raises-earlier-low"),
        pytest.param([(5.0, HIGH), (0.01, LOW)], HIGH, id="earlier-low-keeps-pending-high"),
        pytest.param([(5.0, LOW), (0.01, LOW)], LOW, id="earliest-wins"),
    ],
)
async def test_add_after_merges_to_earliest_time_and_highest_priority(
    timers: list[tuple[float, Priority | None]], expected: Priority
) -> None:
    queue: WorkQueue[str] = WorkQueue()
    for delay, priority in timers:
        if priority is None:
            queue.add_after("a", delay)
        else:
            queue.add_after("a", delay, priority)
    assert queue.delayed == 1
    due = queue.due_in("a")
    assert due is not None and due <= 0.01
    assert await asyncio.wait_for(queue.get_with_priority(), 1) == ("a", expected)
    queue.shutdown()


async def test_add_after_zero_is_immediate_at_its_priority() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("a", 0)
    queue.add_after("b", 0, HIGH)
    assert await drain(queue) == [("b", HIGH), ("a", LOW)]


@pytest.mark.parametrize(
    ("handed_out_at", "passed", "expected"),
    [
        pytest.param(HIGH, None, HIGH, id="keeps-high-it-was-handed-out-with"),
        pytest.param(LOW, None, LOW, id="keeps-low-it-was-handed-out-with"),
        pytest.param(HIGH, LOW, LOW, id="explicit-priority-wins"),
        pytest.param(None, None, LOW, id="not-in-process-low"),
    ],
)
async def test_rate_limited_readd_keeps_the_priority_handed_out_with(
    handed_out_at: Priority | None, passed: Priority | None, expected: Priority
) -> None:
    queue: WorkQueue[str] = WorkQueue(base_delay=0.001, max_delay=0.001)
    if handed_out_at is not None:
        queue.add("a", handed_out_at)
        await next_key(queue)
    queue.add_rate_limited("a", passed)
    queue.done("a")
    assert await asyncio.wait_for(queue.get_with_priority(), 1) == ("a", expected)
    queue.shutdown()


async def test_many_raises_keep_order_and_one_place_per_key() -> None:
    queue: WorkQueue[int] = WorkQueue(clock=Clock())
    count = 10_000
    for key in range(count):
        queue.add(key, LOW)
    raised = list(range(count - 1, -1, -3))
    for key in raised:
        queue.add(key, HIGH)
    for key in raised[::2]:
        queue.add(key, HIGH)  # already HIGH: no second entry
    assert len(queue) == count
    served = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        served.append(key)
    assert served == raised + [key for key in range(count) if key not in set(raised)]


# -- FIFO mode ----------------------------------------------------------------------------


class FifoModel:
    """client-go's queue, the reference `prioritized=False` must match."""

    def __init__(self) -> None:
        self.queue: deque[str] = deque()
        self.dirty: set[str] = set()
        self.processing: set[str] = set()

    def add(self, key: str) -> None:
        if key in self.dirty:
            return
        self.dirty.add(key)
        if key not in self.processing:
            self.queue.append(key)

    def get(self) -> str:
        key = self.queue.popleft()
        self.dirty.discard(key)
        self.processing.add(key)
        return key

    def done(self, key: str) -> None:
        self.processing.discard(key)
        if key in self.dirty:
            self.queue.append(key)


@pytest.mark.parametrize("seed", [pytest.param(seed, id=f"seed-{seed}") for seed in range(5)])
async def test_unprioritized_queue_is_client_go_fifo(seed: int) -> None:
    rng = random.Random(seed)
    clock = Clock()
    metrics = Recorder()
    queue: WorkQueue[str] = WorkQueue(prioritized=False, metrics=metrics, clock=clock)
    model = FifoModel()
    in_process: list[str] = []
    for _ in range(2000):
        clock.now += rng.choice((0.0, 1.0, 400.0))  # aging must not matter either
        op = rng.random()
        if op < 0.5:
            key = f"k{rng.randrange(20)}"
            queue.add(key, rng.choice((HIGH, LOW)))
            model.add(key)
        elif op < 0.8 and model.queue:
            key, priority = await queue.get_with_priority()
            assert key == model.get()
            assert priority is HIGH
            in_process.append(key)
        elif in_process:
            key = in_process.pop(rng.randrange(len(in_process)))
            queue.done(key)
            model.done(key)
        assert len(queue) == len(model.queue)
        assert queue.depth(LOW) == queue.depth(HIGH) == len(model.queue)
    assert set(metrics.depths) == {""}
    assert {label for label, _ in metrics.waits} == {""}


# -- metrics --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prioritized", "depths", "waits"),
    [
        pytest.param(
            True,
            {"0": 2, "-100": 1},
            # a waited 5 s (counted from when it was first queued, not from its raise).
            [("0", 3.0), ("0", 5.0), ("-100", 4.0)],
            id="by-priority",
        ),
        pytest.param(
            False, {"": 3}, [("", 5.0), ("", 4.0), ("", 3.0)], id="fifo-one-unlabelled-series"
        ),
    ],
)
async def test_metrics_by_priority(
    prioritized: bool, depths: dict[str, int], waits: list[tuple[str, float]]
) -> None:
    clock = Clock()
    metrics = Recorder()
    queue: WorkQueue[str] = WorkQueue(prioritized=prioritized, metrics=metrics, clock=clock)
    # Every series exists from the start.
    assert metrics.depths == dict.fromkeys(depths, 0)
    for key, priority in (("a", LOW), ("b", LOW), ("c", HIGH), ("a", HIGH), ("a", HIGH)):
        queue.add(key, priority)
        clock.now += 1.0
    assert metrics.adds == 3  # a raise is not an add
    assert metrics.depths == depths
    for _ in waits:
        await next_key(queue)
    assert metrics.waits == waits
    assert metrics.depths == dict.fromkeys(depths, 0)


async def test_cancel_after_drops_only_the_pending_add_of_that_key() -> None:
    queue: WorkQueue[str] = WorkQueue()
    queue.add_after("gone", 0.02)
    queue.add_after("kept", 0.02)
    assert queue.cancel_after("gone") is True
    assert queue.cancel_after("gone") is False, "nothing left to cancel"
    assert queue.delayed == 1
    assert await next_key(queue) == "kept"
    queue.done("kept")
    assert await nothing_ready(queue, wait=0.1), "the cancelled add never fires"
