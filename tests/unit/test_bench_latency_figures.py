"""bench/compare's latency figures: p95 is the 95th percentile, not the slowest CR."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/ is not installed
from bench.compare.workloads import latency_figures


def test_p95_is_the_95th_percentile_and_max_the_slowest() -> None:
    latencies = [float(n) for n in range(1, 101)]  # 1 s ... 100 s
    figures = latency_figures(latencies)
    assert figures["p95_s"] == 95.0
    assert figures["max_s"] == 100.0
    assert figures["p50_s"] == 50.5
    assert figures["first_s"] == 1.0
