"""WorkQueue: dedup, in-flight guard, re-add while processing, delays, backoff, shutdown."""

from __future__ import annotations

import asyncio

import pytest

from runner.engine.queue import QueueShutDown, TokenBucket, WorkQueue


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
