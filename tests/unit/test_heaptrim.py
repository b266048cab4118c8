"""The periodic heap trim: it gives freed C-heap pages back, on a timer, off the loop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path

import pytest

from runner.util import heaptrim


def rss_anon_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_malloc_trim_returns_the_free_pages_of_a_fragmented_heap() -> None:
    trim = heaptrim.malloc_trim()
    assert trim is not None, "glibc has malloc_trim"
    blocks = [bytearray(20_000) for _ in range(3000)]  # malloc'd, below the mmap threshold
    kept = blocks[::10]  # every tenth stays: the freed rest cannot shrink the heap's top
    del blocks
    before = rss_anon_mib()
    trim(0)
    assert before - rss_anon_mib() > 20, "about 50 MiB of freed chunks go back"
    assert len(kept) == 300


async def test_trims_on_a_timer_in_another_thread_until_cancelled() -> None:
    calls: list[tuple[int, bool]] = []

    def trim(pad: int) -> int:
        calls.append((pad, threading.current_thread() is threading.main_thread()))
        return 1

    task = asyncio.create_task(heaptrim.trim_periodically(0.01, trim))
    while len(calls) < 3:
        await asyncio.sleep(0.01)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    count = len(calls)
    await asyncio.sleep(0.05)
    assert len(calls) == count, "no trim after the cancel"
    assert set(calls) == {(0, False)}, "malloc_trim(0), never on the event loop's thread"


async def test_without_malloc_trim_it_ends_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heaptrim, "malloc_trim", lambda: None)
    await asyncio.wait_for(heaptrim.trim_periodically(0.01), timeout=1)
