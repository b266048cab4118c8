"""bench/soaking/report.py: the tables a soak prints, the CPU and RSS series of its
chart (from the samples of each operator process), and the chart itself (where
matplotlib, the `bench` extra, is installed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.soaking import report
from bench.soaking.invariants import Check


def sample(at: float, incarnation: str, cpu_s: float, rss: float) -> dict[str, Any]:
    return {
        "at": at,
        "incarnation": incarnation,
        "replica": incarnation[0],
        "cpu_s": cpu_s,
        "rss_mib": rss,
        "desc_rss_mib": 0.0,
        "procs": 2,
    }


def test_cpu_is_a_rate_per_process_and_restarts_start_afresh() -> None:
    samples = [
        sample(100, "a1", 1.0, 60),
        sample(102, "a1", 2.0, 61),  # 1 CPU second in 2 s: 50 %
        sample(104, "a2", 0.5, 40),  # a new process: no rate yet
        sample(106, "a2", 0.9, 41),
    ]
    series = report.series(samples, origin=100)
    assert series["a"]["minutes"] == pytest.approx([2 / 60, 6 / 60])
    assert series["a"]["cpu"] == pytest.approx([50.0, 20.0])
    assert series["a"]["rss"] == [61, 41]


def test_the_tables() -> None:
    checks = [
        Check(name="one", passed=True, summary="fine"),
        Check(name="another one", passed=False, summary="not fine"),
    ]
    table = report.invariant_table(checks)
    assert "another one  FAIL (0)" in table and "one          PASS" in table
    assert "| another one | **FAIL** (0) | not fine |" in report.markdown_table(checks)
    faults = report.fault_table({"kill9": 2, "burst": 1}, {"kill9": 1})
    assert "kill9                      2         1" in faults
    assert faults.splitlines()[-1].split() == ["total", "3", "1"]


def test_the_chart_is_drawn(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench extra draws the charts")
    results = {
        "config": {"seed": 7, "sharding": False, "crs": 20},
        "times": {"start": 100.0, "chaos_start": 110.0, "chaos_end": 160.0},
        "faults": [{"began": 120.0, "ended": 125.0, "skipped": False}],
        "samples": [sample(100 + 2 * i, "a1", i * 0.5, 60 + i) for i in range(40)],
    }
    output = tmp_path / "soak.svg"
    report.draw(results, output)
    assert output.read_text().startswith("<?xml")


def soak_results() -> dict[str, Any]:
    return {
        "config": {
            "seed": 7,
            "sharding": False,
            "crs": 20,
            "replicas": 2,
            "chaos_s": 600.0,
            "replay": "python bench/soak.py --seed 7",
        },
        "passed": True,
        "times": {"start": 0.0, "chaos_start": 60.0, "chaos_end": 660.0, "end": 720.0},
        "fault_counts": {"scheduled": {"kill9": 2}, "injected": {"kill9": 1}},
        "faults": [
            {"kind": "kill9", "began": 90.0, "ended": 91.0, "skipped": False},
            {"kind": "kill9", "began": 400.0, "ended": None, "skipped": True},
        ],
        "checks": [{"name": "nothing lost", "passed": True, "summary": "20 CRs"}],
        "workload": {"creates": 5, "updates": 6, "deletes": 7, "given_up": 0},
        "runs": {"total": 40, "cut_short": 1, "failed": 0},
        # a1: 1 CPU second every 2 s (50 %) for 6 minutes; b1: idle, from minute 5
        "samples": [sample(2.0 * i, "a1", i * 1.0, 60 + i / 100) for i in range(180)]
        + [sample(300 + 2.0 * i, "b1", 0.0, 40) for i in range(30)],
        "load_samples": [[2.0 * i, 2.0 if i < 165 else 4.0] for i in range(180)],
    }


def test_cpu_and_rss_over_time_in_windows() -> None:
    table = report.over_time(soak_results(), step=5.0).splitlines()
    assert table[0] == "| minutes | a CPU % / RSS MiB | b CPU % / RSS MiB | load | faults begun |"
    assert table[2] == "| 0-5 | 50 / 61 | - | 2.0 | kill9 |"  # the skipped one is not counted
    assert table[3] == "| 5-10 | 50 / 62 | 0 / 40 | 3.0 | - |"
    assert len(table) == 4


def test_the_summary_of_a_soak() -> None:
    text = report.summary(soak_results())
    assert text.startswith("Seed 7, 2 replicas (leader election), 20 CRs, 600 s of chaos; 12 min")
    assert "load average (1 min) 2.0-4.0" in text
    assert "| kill9 | 2 | 1 |" in text and "| total | 2 | 1 |" in text
    assert "| nothing lost | pass | 20 CRs |" in text
    assert "| 0-5 | 50 / 61 | - | 2.0 | kill9 |" in text


def test_the_summary_counts_every_violation_not_only_those_kept() -> None:
    results = soak_results()
    kept = [{"at": 1.0, "key": f"soak/s-{n}", "text": "overlap"} for n in range(50)]
    results["checks"] = [
        {
            "name": "no overlap",
            "passed": False,
            "summary": "120 overlaps",
            "violation_count": 120,
            "violations": kept,
        }
    ]
    assert "| no overlap | **FAIL** (120) | 120 overlaps |" in report.summary(results)
