"""Where a test run's time went, per test module: printed after pytest's own
`--durations` list (whose lines are single set-ups, calls and tear-downs), so that a
module that grows slow shows in CI's log even when no single step of it is slow."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

MODULES_SHOWN = 20


def seconds_per_module(reports: Iterable[Any]) -> dict[str, float]:
    """Set-up, call and tear-down seconds of `reports` summed by test module path."""
    totals: dict[str, float] = defaultdict(float)
    for report in reports:
        duration = getattr(report, "duration", None)
        if duration is not None and getattr(report, "when", None):
            totals[report.nodeid.split("::")[0]] += duration
    return dict(totals)


def summary(totals: dict[str, float], *, shown: int = MODULES_SHOWN) -> list[str]:
    """The slowest `shown` modules, with their share of the run, slowest first."""
    whole = sum(totals.values()) or 1.0
    ranked = sorted(totals.items(), key=lambda item: item[1], reverse=True)[:shown]
    return [f"{seconds:8.1f} s {seconds / whole:6.1%}  {module}" for module, seconds in ranked]
