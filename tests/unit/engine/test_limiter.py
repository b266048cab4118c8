"""runner.engine.limiter: the AdmissionLimiter admits what its Admission allows, always at
least one, first come first served, and says when it holds reconciles back (a gauge, a
counter, one log line per episode)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import pytest

from runner.engine.limiter import AdmissionLimiter


class Budget:
    """Admits while fewer than `room` reconciles run."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.asked: list[tuple[str, dict[str, int]]] = []

    def admits(self, name: str, running: Mapping[str, int]) -> bool:
        self.asked.append((name, dict(running)))
        return sum(running.values()) < self.room

    def why_not(self, name: str) -> str:
        return f"no room for {name}"


class Counted:
    def __init__(self) -> None:
        self.gauge = 0
        self.held_count = 0

    def waiting(self, count: int) -> None:
        self.gauge = count

    def held(self) -> None:
        self.held_count += 1


async def hold(
    limiter: AdmissionLimiter, name: str, release: asyncio.Event, log: list[str]
) -> None:
    async with limiter.slot(name):
        log.append(name)
        await release.wait()


async def test_one_reconcile_is_always_admitted() -> None:
    budget = Budget(0)
    limiter = AdmissionLimiter(budget, recheck=0.01)
    async with limiter.slot("a"):
        assert limiter.running == 1
    assert budget.asked == [], "nothing runs: admitted without asking"
    assert limiter.running == 0


async def test_held_back_until_a_slot_frees_then_first_come_first_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "ansible-operator.limiter")
    metrics = Counted()
    limiter = AdmissionLimiter(Budget(1), metrics=metrics, recheck=0.01)
    started: list[str] = []
    releases = {name: asyncio.Event() for name in ("a", "b", "c")}
    first = asyncio.create_task(hold(limiter, "a", releases["a"], started))
    await asyncio.sleep(0.02)
    second = asyncio.create_task(hold(limiter, "b", releases["b"], started))
    await asyncio.sleep(0.02)
    third = asyncio.create_task(hold(limiter, "c", releases["c"], started))
    await asyncio.sleep(0.05)
    assert started == ["a"]
    assert (limiter.waiting, metrics.gauge, metrics.held_count) == (2, 2, 2)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "one line per episode, not per reconcile"
    assert "no room for b" in warnings[0].getMessage()

    releases["a"].set()
    await asyncio.sleep(0.05)
    assert started == ["a", "b"], "the first in line goes first"
    releases["b"].set()
    await asyncio.sleep(0.05)
    assert started == ["a", "b", "c"]
    assert (limiter.waiting, metrics.gauge) == (0, 0)
    assert any("no longer held back" in r.getMessage() for r in caplog.records)
    releases["c"].set()
    await asyncio.gather(first, second, third)
    assert limiter.running == 0


async def test_rechecks_without_a_release() -> None:
    budget = Budget(1)
    limiter = AdmissionLimiter(budget, recheck=0.01)
    started: list[str] = []
    release = asyncio.Event()
    first = asyncio.create_task(hold(limiter, "a", release, started))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(hold(limiter, "b", release, started))
    await asyncio.sleep(0.05)
    assert started == ["a"]
    budget.room = 2  # memory went down by itself
    await asyncio.sleep(0.05)
    assert started == ["a", "b"]
    release.set()
    await asyncio.gather(first, second)


async def test_a_cancelled_waiter_leaves_the_line() -> None:
    limiter = AdmissionLimiter(Budget(1), recheck=0.01)
    release = asyncio.Event()
    started: list[str] = []
    first = asyncio.create_task(hold(limiter, "a", release, started))
    await asyncio.sleep(0.01)
    waiter = asyncio.create_task(hold(limiter, "b", release, started))
    await asyncio.sleep(0.02)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert limiter.waiting == 0
    release.set()
    await first
    async with limiter.slot("c"):
        assert limiter.running == 1
