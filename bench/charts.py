"""Charts of bench/compare's side-by-side results, for people who would rather look.

Reads the `compare-<mode>.json` files bench/compare writes (bench/results/ by default) and
draws, for whichever of them exist:

- `latency.svg` (`--mode latency`): create -> Successful of single CRs per operator:
  fastest to slowest as a line, p50 to p95 as a bar, the first CR after the start as a dot;
- `throughput.svg` (`--mode create`): CRs converged per second and Ansible runs per
  second by N, per operator;
- `memory.svg` (`--mode create` and `--mode scale`): the operator process's RSS when 20,
  40 ... 100 % of the CRs had converged, per operator, at the largest N of each file.

    .venv/bin/python bench/charts.py [--results-dir bench/results] [--output-dir DIR]

`make bench` runs it last. The figures are taken from the JSON as they are; the pure
functions here pick them out (tested without matplotlib), `draw_*` plot them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROGRESS_STEPS = (20, 40, 60, 80, 100)

Report = Mapping[str, Any]


def load_reports(results_dir: Path) -> dict[str, Report]:
    """Each compare-<mode>.json in `results_dir`, by mode."""
    reports = {}
    for path in sorted(results_dir.glob("compare-*.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        reports[str(report.get("mode") or path.stem.removeprefix("compare-"))] = report
    return reports


def _runs(report: Report) -> list[tuple[int, dict[str, Any]]]:
    """(N, results by operator key) in increasing N."""
    runs = report.get("runs") or {}
    return sorted((int(count), results) for count, results in runs.items())


def latency_rows(report: Report) -> list[dict[str, Any]]:
    """Per operator of a latency report: its label and first/min/p50/p95/max (s)."""
    rows = []
    for _, results in _runs(report)[-1:]:
        for result in results.values():
            figures = result.get("latency") or {}
            if "p50_s" not in figures:
                continue  # the operator failed: nothing to draw
            keys = ("first_s", "min_s", "p50_s", "p95_s", "max_s")
            rows.append({"operator": result["operator"], **{k: figures.get(k) for k in keys}})
    return rows


def throughput_series(report: Report, key: str) -> dict[str, list[tuple[int, float]]]:
    """Per operator label: (N, the create phase's `key`) for every N that has it."""
    series: dict[str, list[tuple[int, float]]] = {}
    for count, results in _runs(report):
        for result in results.values():
            value = (result.get("create") or {}).get(key)
            if isinstance(value, int | float):
                series.setdefault(result["operator"], []).append((count, float(value)))
    return series


def parse_progress(text: str | None) -> list[float | None]:
    """bench/compare's `root_rss_by_progress_mib` ("117 / 123 / - / 134 / 140") as numbers;
    `-` (no sample then) is None."""
    if not text:
        return []
    values: list[float | None] = []
    for part in text.split("/"):
        part = part.strip()
        values.append(None if part in ("", "-") else float(part))
    return values


def memory_series(report: Report) -> tuple[int, dict[str, list[float | None]]]:
    """(N, per operator label: RSS in MiB at 20..100 % converged) at the largest N that
    has any; (0, {}) when none does."""
    for count, results in reversed(_runs(report)):
        found = {
            result["operator"]: parse_progress(
                (result.get("create") or {}).get("root_rss_by_progress_mib")
            )
            for result in results.values()
        }
        found = {label: values for label, values in found.items() if values}
        if found:
            return count, found
    return 0, {}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def _plain_log_axis(axis: Any) -> None:
    """Log scale labelled 0.3, 1, 4 rather than 3x10^-1 on every minor tick."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def draw_latency(rows: list[dict[str, Any]], output: Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.8 + 0.7 * len(rows)))
    for y, row in enumerate(rows):
        ax.hlines(y, row["min_s"], row["max_s"], color="0.6", linewidth=1)
        ax.barh(y, row["p95_s"] - row["p50_s"], left=row["p50_s"], height=0.4, color="C0")
        ax.plot([row["p50_s"]], [y], "|", color="k", markersize=14)
        if row.get("first_s") is not None:
            ax.plot([row["first_s"]], [y], "o", color="C3", markersize=5)
    ax.set_yticks(range(len(rows)), [row["operator"] for row in rows])
    ax.set_xscale("log")
    _plain_log_axis(ax.xaxis)
    ax.set_xlabel("create -> Successful (s, log scale): line min-max, bar p50-p95, dot first CR")
    ax.set_title("Single CRs, one at a time")
    fig.tight_layout()
    fig.savefig(output)
    plt.close(fig)


Series = Mapping[str, list[tuple[int, float]]]
Panel = tuple[int, Mapping[str, list[float | None]]]


def draw_throughput(series: Mapping[str, Series], output: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(series), figsize=(5 * len(series), 3.6), squeeze=False)
    for ax, (title, by_operator) in zip(axes[0], series.items(), strict=True):
        for label, points in by_operator.items():
            ax.plot([n for n, _ in points], [v for _, v in points], "o-", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log_axis(ax.xaxis)
        _plain_log_axis(ax.yaxis)
        ax.set_xticks(sorted({n for points in by_operator.values() for n, _ in points}))
        ax.set_xlabel("N (CRs created at once, log scale)")
        ax.set_title(title)
        ax.legend()
    fig.tight_layout()
    fig.savefig(output)
    plt.close(fig)


def draw_memory(panels: Mapping[str, Panel], output: Path) -> None:
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.6), squeeze=False)
    for ax, (mode, (count, by_operator)) in zip(axes[0], panels.items(), strict=True):
        for label, values in by_operator.items():
            steps = zip(PROGRESS_STEPS, values, strict=False)
            points = [(step, value) for step, value in steps if value is not None]
            ax.plot([s for s, _ in points], [v for _, v in points], "o-", label=label)
        ax.set_xlabel("% of the CRs converged")
        ax.set_ylabel("RSS of the operator process (MiB)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"{mode}, N = {count:,}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(output)
    plt.close(fig)


def draw_all(reports: Mapping[str, Report], output_dir: Path) -> list[Path]:
    """Every chart the reports have data for; returns the files written."""
    output_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if "latency" in reports and (rows := latency_rows(reports["latency"])):
        draw_latency(rows, output_dir / "latency.svg")
        written.append(output_dir / "latency.svg")
    if "create" in reports:
        series = {
            "CRs converged per s": throughput_series(reports["create"], "crs_per_s"),
            "Ansible runs per s": throughput_series(reports["create"], "runs_per_s"),
        }
        series = {title: points for title, points in series.items() if points}
        if series:
            draw_throughput(series, output_dir / "throughput.svg")
            written.append(output_dir / "throughput.svg")
    panels = {mode: memory_series(reports[mode]) for mode in ("create", "scale") if mode in reports}
    panels = {mode: panel for mode, panel in panels.items() if panel[1]}
    if panels:
        draw_memory(panels, output_dir / "memory.svg")
        written.append(output_dir / "memory.svg")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--output-dir", type=Path, help="default: the results directory")
    args = parser.parse_args(argv)
    reports = load_reports(args.results_dir)
    if not reports:
        print(f"no compare-*.json in {args.results_dir}: run python -m bench.compare first")
        return 1
    for path in draw_all(reports, args.output_dir or args.results_dir):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
