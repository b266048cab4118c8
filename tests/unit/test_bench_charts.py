"""bench/charts.py: the figures it picks out of bench/compare's JSON, and the charts it
draws from them (the drawing only where matplotlib, the `bench` extra, is installed)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load_charts() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_charts", REPO / "bench" / "charts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


charts = _load_charts()


def _result(label: str, **sections: Any) -> dict[str, Any]:
    return {"operator": label, "load_before": [], "load_after": [], **sections}


def _report(mode: str, runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"mode": mode, "runs": runs, "dependents": {}, "compared": {}}


# Shaped as bench/compare writes them; figures as in docs/benchmarks.md.
LATENCY = _report(
    "latency",
    {
        "20": {
            "go": _result(
                "Go v1.42.0",
                latency=dict(first_s=4.671, min_s=3.8, p50_s=3.976, p95_s=4.671, max_s=4.7),
            ),
            "fast": _result(
                "ours (fast)",
                latency=dict(first_s=0.288, min_s=0.25, p50_s=0.273, p95_s=0.349, max_s=0.36),
            ),
            "runner": _result("ours (runner)", error="timed out"),
        }
    },
)
CREATE = _report(
    "create",
    {
        "100": {
            "go": _result("Go v1.42.0", create={"crs_per_s": 0.37, "runs_per_s": 0.385}),
            "fast": _result(
                "ours (fast)",
                create={
                    "crs_per_s": 3.114,
                    "runs_per_s": 6.229,
                    "root_rss_by_progress_mib": "100 / 101 / - / 103 / 103.5",
                },
            ),
        },
        "20": {
            "go": _result("Go v1.42.0", create={"crs_per_s": 0.376, "runs_per_s": 0.451}),
            "fast": _result("ours (fast)", create={"crs_per_s": 3.146, "runs_per_s": 6.292}),
        },
    },
)
SCALE = _report(
    "scale",
    {
        "5000": {
            "fast": _result(
                "ours (fast)", create={"root_rss_by_progress_mib": "117 / 123 / 128 / 134 / 140"}
            ),
            "go": _result(
                "Go v1.42.0", create={"root_rss_by_progress_mib": "99 / 107 / 118 / 128 / 136"}
            ),
        }
    },
)


def test_latency_rows_skip_failed_operators() -> None:
    rows = charts.latency_rows(LATENCY)
    assert [row["operator"] for row in rows] == ["Go v1.42.0", "ours (fast)"]
    assert rows[1] == {
        "operator": "ours (fast)",
        "first_s": 0.288,
        "min_s": 0.25,
        "p50_s": 0.273,
        "p95_s": 0.349,
        "max_s": 0.36,
    }


def test_throughput_by_n_in_increasing_n() -> None:
    assert charts.throughput_series(CREATE, "crs_per_s") == {
        "Go v1.42.0": [(20, 0.376), (100, 0.37)],
        "ours (fast)": [(20, 3.146), (100, 3.114)],
    }


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("117 / 123 / 128 / 134 / 140", [117.0, 123.0, 128.0, 134.0, 140.0]),
        ("100 / 101 / - / 103 / 103.5", [100.0, 101.0, None, 103.0, 103.5]),
        (None, []),
        ("", []),
    ],
)
def test_parse_progress(text: str | None, values: list[float | None]) -> None:
    assert charts.parse_progress(text) == values


def test_memory_at_the_largest_n_that_has_it() -> None:
    fast = [100.0, 101.0, None, 103.0, 103.5]
    assert charts.memory_series(CREATE) == (100, {"ours (fast)": fast})
    count, series = charts.memory_series(SCALE)
    assert count == 5000 and set(series) == {"ours (fast)", "Go v1.42.0"}
    assert charts.memory_series(LATENCY) == (0, {})


def test_load_reports_by_mode(tmp_path: Path) -> None:
    for report in (LATENCY, CREATE):
        (tmp_path / f"compare-{report['mode']}.json").write_text(json.dumps(report))
    (tmp_path / "compare-create.md").write_text("not JSON, not read")
    assert set(charts.load_reports(tmp_path)) == {"latency", "create"}


def test_no_results_is_a_one_line_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert charts.main(["--results-dir", str(tmp_path)]) == 1
    expected = f"no compare-*.json in {tmp_path}: run python -m bench.compare first\n"
    assert capsys.readouterr().out == expected


def test_draws_every_chart(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench extra draws the charts")
    for report in (LATENCY, CREATE, SCALE):
        (tmp_path / f"compare-{report['mode']}.json").write_text(json.dumps(report))
    assert charts.main(["--results-dir", str(tmp_path), "--output-dir", str(tmp_path / "out")]) == 0
    for name in ("latency.svg", "throughput.svg", "memory.svg"):
        text = (tmp_path / "out" / name).read_text()
        assert text.lstrip().startswith("<?xml") and "<svg" in text, name
    assert "ours (fast)" in (tmp_path / "out" / "latency.svg").read_text()


def test_make_bench_charts_draws_a_synthetic_result(tmp_path: Path) -> None:
    """`make bench-charts` as `make bench` ends, on one small compare JSON (the bench
    extra's install is taken as done: `make test` does it first)."""
    pytest.importorskip("matplotlib", reason="the bench extra draws the charts")
    results, out = tmp_path / "results", tmp_path / "charts"
    results.mkdir()
    (results / "compare-latency.json").write_text(json.dumps(LATENCY))
    venv = Path(sys.prefix)
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(REPO),
            "bench-charts",
            "-o",
            str(venv / ".bench-installed"),
            f"VENV={venv}",
            f"CHARTS_ARGS=--results-dir {results} --output-dir {out}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"wrote {out / 'latency.svg'}" in done.stdout
    assert "<svg" in (out / "latency.svg").read_text()
    assert sorted(path.name for path in out.iterdir()) == ["latency.svg"]
