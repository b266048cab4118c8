"""What a soak prints and keeps: the schedule, the fault counts, the invariant table (with
the events around each violation), the JSON results, and the chart of the replicas' CPU
and RSS over time, faults shaded (matplotlib, the `bench` extra)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .invariants import Check
from .schedule import KINDS


def fault_table(scheduled: Mapping[str, int], injected: Mapping[str, int]) -> str:
    lines = [f"  {'fault':<18} {'scheduled':>9} {'injected':>9}"]
    for kind in KINDS:
        lines.append(f"  {kind:<18} {scheduled.get(kind, 0):>9} {injected.get(kind, 0):>9}")
    total_s, total_i = sum(scheduled.values()), sum(injected.values())
    lines.append(f"  {'total':<18} {total_s:>9} {total_i:>9}")
    return "\n".join(lines)


def invariant_table(checks: Sequence[Check]) -> str:
    width = max(len(check.name) for check in checks)
    lines = [f"  {'invariant':<{width}}  result  detail"]
    for check in checks:
        result = "PASS" if check.passed else f"FAIL ({len(check.violations)})"
        lines.append(f"  {check.name:<{width}}  {result:<6}  {check.summary}")
    return "\n".join(lines)


def markdown_table(checks: Sequence[Check], counts: Mapping[str, int] | None = None) -> str:
    """`counts`: each check's number of violations, where not all are in `violations`."""
    lines = ["| invariant | result | detail |", "|---|---|---|"]
    for check in checks:
        count = (counts or {}).get(check.name, len(check.violations))
        result = "pass" if check.passed else f"**FAIL** ({count})"
        lines.append(f"| {check.name} | {result} | {check.summary} |")
    return "\n".join(lines)


def write_json(path: Path, results: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def series(points: Sequence[Mapping[str, Any]], origin: float) -> dict[str, dict[str, list[float]]]:
    """Per replica: minutes since `origin`, RSS (MiB) and CPU (% of one core, from the
    CPU seconds of consecutive samples of one process)."""
    by_replica: dict[str, dict[str, list[float]]] = {}
    last: dict[str, tuple[float, float]] = {}
    for point in points:
        replica = str(point["replica"])
        found = by_replica.setdefault(replica, {"minutes": [], "rss": [], "cpu": []})
        at, cpu = float(point["at"]), float(point["cpu_s"])
        previous = last.get(str(point["incarnation"]))
        last[str(point["incarnation"])] = (at, cpu)
        if previous is None or at <= previous[0]:
            continue  # a new process: no rate yet
        found["minutes"].append((at - origin) / 60)
        found["rss"].append(float(point["rss_mib"]))
        found["cpu"].append(max(0.0, 100 * (cpu - previous[1]) / (at - previous[0])))
    return by_replica


def draw(results: Mapping[str, Any], output: Path) -> None:
    """Two panels over the soak: each replica's operator RSS, and its tree's CPU; the
    chaos window and each fault shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    origin = float(results["times"]["start"])
    lines = series(results["samples"], origin)
    fig, (rss_ax, cpu_ax) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for replica, found in sorted(lines.items()):
        rss_ax.plot(found["minutes"], found["rss"], ".", markersize=2, label=replica)
        cpu_ax.plot(found["minutes"], found["cpu"], "-", linewidth=0.6, label=replica)
    chaos = results["times"]
    for ax in (rss_ax, cpu_ax):
        ax.axvspan(
            (chaos["chaos_start"] - origin) / 60,
            (chaos["chaos_end"] - origin) / 60,
            color="0.92",
            zorder=0,
        )
        for fault in results["faults"]:
            if fault.get("skipped") or fault.get("ended") is None:
                continue
            start = (float(fault["began"]) - origin) / 60
            end = max(start + 0.05, (float(fault["ended"]) - origin) / 60)
            ax.axvspan(start, end, color="C3", alpha=0.12, zorder=0)
    mode = "sharding" if results["config"]["sharding"] else "leader election"
    rss_ax.set_ylabel("operator RSS (MiB)")
    rss_ax.set_ylim(bottom=0)
    rss_ax.legend(title="replica", loc="lower right")
    cpu_ax.set_ylabel("CPU of the replica's tree (% of a core)")
    cpu_ax.set_xlabel("minutes (grey: faults and workload; red: a fault under way)")
    rss_ax.set_title(
        f"Soak, seed {results['config']['seed']}, {mode}, {results['config']['crs']} CRs"
    )
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output)
    plt.close(fig)


def over_time(results: Mapping[str, Any], *, step: float = 5.0) -> str:
    """A markdown table of the soak in windows of `step` minutes: each replica's mean CPU
    (% of one core, its whole tree) and largest operator RSS (MiB), the machine's mean
    1-minute load average, and the faults that began in the window."""
    origin = float(results["times"]["start"])
    lines = series(results["samples"], origin)
    replicas = sorted(lines)
    loads = [
        ((float(at) - origin) / 60, float(load)) for at, load in results.get("load_samples") or []
    ]
    began: dict[int, list[str]] = {}
    for fault in results.get("faults") or []:
        if not fault.get("skipped") and fault.get("began") is not None:
            window = int((float(fault["began"]) - origin) / 60 // step)
            began.setdefault(window, []).append(str(fault.get("kind") or fault.get("fault", "")))
    last = max(
        [m for found in lines.values() for m in found["minutes"]] + [m for m, _ in loads] + [0.0]
    )
    header = ["minutes"] + [f"{r} CPU % / RSS MiB" for r in replicas] + ["load", "faults begun"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for window in range(int(last // step) + 1):
        low, high = window * step, (window + 1) * step
        cells = [f"{low:g}-{high:g}"]
        for replica in replicas:
            found = lines[replica]
            picked = [i for i, m in enumerate(found["minutes"]) if low <= m < high]
            if not picked:
                cells.append("-")
                continue
            cpu = sum(found["cpu"][i] for i in picked) / len(picked)
            rss = max(found["rss"][i] for i in picked)
            cells.append(f"{cpu:.0f} / {rss:.0f}")
        window_loads = [load for m, load in loads if low <= m < high]
        cells.append(f"{sum(window_loads) / len(window_loads):.1f}" if window_loads else "-")
        kinds = began.get(window, [])
        counted = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
        cells.append(", ".join(f"{k} x{n}" if n > 1 else k for k, n in counted.items()) or "-")
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def summary(results: Mapping[str, Any], *, step: float = 5.0) -> str:
    """The markdown a soak's JSON results are reported with: configuration, fault counts,
    the invariant table, and CPU and RSS over time."""
    config = results["config"]
    times = results["times"]
    counts = results["fault_counts"]
    faults = ["| fault | scheduled | injected |", "|---|---|---|"]
    for kind in KINDS:
        faults.append(
            f"| {kind} | {counts['scheduled'].get(kind, 0)} | {counts['injected'].get(kind, 0)} |"
        )
    faults.append(
        f"| total | {sum(counts['scheduled'].values())} | {sum(counts['injected'].values())} |"
    )
    checks = [
        Check(name=c["name"], passed=c["passed"], summary=c["summary"]) for c in results["checks"]
    ]
    # the JSON keeps the first 50 violations, and (since) how many there were
    counts = {
        c["name"]: c.get("violation_count", len(c.get("violations", []))) for c in results["checks"]
    }
    work = results["workload"]
    runs = results["runs"]
    loads = [float(load) for _, load in results.get("load_samples") or []]
    load = (
        f"load average (1 min) {min(loads):.1f}-{max(loads):.1f}, mean "
        f"{sum(loads) / len(loads):.1f}"
        if loads
        else "load average not sampled"
    )
    mode = "sharding" if config["sharding"] else "leader election"
    head = (
        f"Seed {config['seed']}, {config['replicas']} replicas ({mode}), {config['crs']} CRs, "
        f"{config['chaos_s']:g} s of chaos; {(times['end'] - times['start']) / 60:.0f} min in "
        f"all; {'PASSED' if results['passed'] else 'FAILED'}; {load}. Workload: "
        f"{work['creates']} creates, {work['updates']} spec changes, {work['deletes']} "
        f"deletes; {runs['total']} runs ({runs['cut_short']} cut short, {runs['failed']} "
        f"with a failed task). Replay: `{config['replay']}`."
    )
    return "\n\n".join(
        [head, "\n".join(faults), markdown_table(checks, counts), over_time(results, step=step)]
    )
