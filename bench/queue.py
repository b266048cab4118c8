"""Time to add 10,000 keys to the work queue and hand every one out (get + done).

The initial list of a big cluster puts every CR on a controller's queue at once, on the
event loop, so this is what a restart costs before the first reconcile starts. Prints,
per scenario, the best of `--repeat` timings in milliseconds and microseconds per key:
the FIFO queue (`prioritized=False`), all HIGH, HIGH and LOW interleaved, an initial list
of LOW keys a quarter of which a HIGH event raises before it drains, and the last one
again with the controller's Prometheus metrics attached.

Usage: .venv/bin/python bench/queue.py [--keys 10000] [--repeat 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.engine.queue import Priority, QueueMetrics, WorkQueue  # noqa: E402
from runner.observability.metrics import OperatorMetrics  # noqa: E402

Adds = Callable[[WorkQueue[int], int], None]


def _fifo(queue: WorkQueue[int], keys: int) -> None:
    for key in range(keys):
        queue.add(key)


def _interleaved(queue: WorkQueue[int], keys: int) -> None:
    for key in range(keys):
        queue.add(key, Priority.LOW if key % 2 else Priority.HIGH)


def _raised(queue: WorkQueue[int], keys: int) -> None:
    for key in range(keys):
        queue.add(key, Priority.LOW)
    for key in range(0, keys, 4):
        queue.add(key, Priority.HIGH)


async def _run(adds: Adds, keys: int, *, prioritized: bool, metrics: QueueMetrics | None) -> float:
    queue: WorkQueue[int] = WorkQueue(prioritized=prioritized, metrics=metrics)
    started = time.perf_counter()
    adds(queue, keys)
    for _ in range(keys):
        queue.done(await queue.get())
    elapsed = time.perf_counter() - started
    assert len(queue) == 0
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    scenarios: list[tuple[str, Adds, bool, bool]] = [
        ("fifo (prioritized=False)", _fifo, False, False),
        ("all high", _fifo, True, False),
        ("high and low interleaved", _interleaved, True, False),
        ("low, a quarter raised", _raised, True, False),
        ("low, a quarter raised, metrics", _raised, True, True),
    ]
    results = {}
    for name, adds, prioritized, with_metrics in scenarios:
        best = min(
            asyncio.run(
                _run(
                    adds,
                    args.keys,
                    prioritized=prioritized,
                    metrics=OperatorMetrics().controller("bench", workers=1)
                    if with_metrics
                    else None,
                )
            )
            for _ in range(args.repeat)
        )
        results[name] = best
        print(f"{name:32} {best * 1e3:8.1f} ms  {best / args.keys * 1e6:6.2f} us/key")
    if args.json is not None:
        args.json.write_text(json.dumps({"keys": args.keys, "seconds": results}, indent=2))


if __name__ == "__main__":
    main()
