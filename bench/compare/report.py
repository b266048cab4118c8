"""The comparison as tables: one Markdown section per N, operators side by side."""

from __future__ import annotations

from typing import Any

from .resources import diff_states

ROWS = [
    ("p50_successful_s", "p50 create -> Successful (s)"),
    ("p95_successful_s", "p95 create -> Successful (s)"),
    ("p50_converged_s", "p50 create -> converged (s)"),
    ("p95_converged_s", "p95 create -> converged (s)"),
    ("converge_all_s", "time to converge all (s)"),
    ("crs_per_s", "CRs converged per s"),
    ("runs_to_converge", "Ansible runs until all converged"),
    ("runs_per_s", "Ansible runs per s"),
    ("runs_per_cr", "runs per CR (settled)"),
    ("cpu_converge_s", "CPU s, operator tree, until converged"),
    ("cpu_settled_s", "CPU s, operator tree, until settled"),
    ("peak_root_rss_mib", "peak RSS operator process (MiB)"),
    ("root_rss_by_progress_mib", "RSS operator process at 20/40/60/80/100 % converged (MiB)"),
    ("peak_desc_rss_mib", "peak RSS sum of descendants (MiB)"),
    ("peak_tree_pss_mib", "peak PSS whole tree (MiB)"),
    ("peak_procs", "peak processes in the tree"),
]
IDLE_ROWS = [
    ("cpu_s", "CPU s over the idle window"),
    ("cpu_percent", "CPU % of one core"),
    ("runs", "Ansible runs while idle"),
    ("mean_root_rss_mib", "mean RSS operator process (MiB)"),
    ("peak_root_rss_mib", "peak RSS operator process (MiB)"),
    ("peak_desc_rss_mib", "peak RSS sum of descendants (MiB)"),
    ("peak_tree_pss_mib", "peak PSS whole tree (MiB)"),
]
LATENCY_ROWS = [
    ("first_s", "create -> Successful, first CR after the start (s)"),
    ("p50_s", "p50 create -> Successful, all CRs (s)"),
    ("p95_s", "p95 create -> Successful, all CRs (s)"),
    ("p50_after_first_s", "p50 create -> Successful, all but the first (s)"),
    ("min_s", "fastest (s)"),
    ("max_s", "slowest (s)"),
]
STEADY_ROWS = [
    (key, label.replace("create ->", "change ->")) for key, label in ROWS if "successful" not in key
]
TOP_ROWS = [
    ("ready_s", "start -> ready (s)"),
    ("peak_root_rss_mib", "VmHWM of the operator process, whole run (MiB)"),
    ("lifetime_cpu_s", "lifetime CPU s (wait4 rusage)"),
    ("lifetime_max_single_rss_mib", "max RSS of one process in the tree (wait4, MiB)"),
]


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _ratio(ours: Any, theirs: Any) -> str:
    if isinstance(ours, int | float) and isinstance(theirs, int | float) and theirs:
        return f"{ours / theirs:.2f}"
    return "-"


def table(results: dict[str, dict[str, Any]], section: str, rows: list[tuple[str, str]]) -> str:
    keys = list(results)
    ours = [k for k in keys if k != "go"]
    header = ["metric", *(results[k]["operator"] for k in keys)]
    header += [f"{results[k]['operator']} / Go" for k in ours if "go" in results]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, label in rows:
        values = [(results[k].get(section) or {}).get(key) for k in keys]
        if section == "top":
            values = [results[k].get(key) for k in keys]
        if all(v is None for v in values):
            continue
        cells = [label, *(_fmt(v) for v in values)]
        if "go" in results:
            theirs = values[keys.index("go")]
            cells += [_ratio(values[keys.index(k)], theirs) for k in ours]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compare_dependents(results: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    if "go" not in results or "dependents" not in results["go"]:
        return out
    for key, result in results.items():
        if key == "go" or "dependents" not in result:
            continue
        diffs = diff_states(results["go"]["dependents"], result["dependents"])
        diffs += diff_states(results["go"]["crs"], result["crs"])
        out[result["operator"]] = diffs
    return out


def section_markdown(report: dict[str, Any], count: str, results: dict[str, Any]) -> str:
    mode = report["mode"]
    parts = [f"## N = {count}", ""]
    if mode == "idle":
        parts += ["Converging the CRs (no-op role):", "", table(results, "create", ROWS), ""]
        parts += [f"Idle, {report['idle_seconds']:g} s with no changes:", ""]
        parts += [table(results, "idle", IDLE_ROWS)]
    elif mode == "steady":
        parts += ["Create:", "", table(results, "create", ROWS), ""]
        parts += ["Every CR's spec changed once (size 1 -> 2; times are change -> converged):"]
        parts += ["", table(results, "steady", STEADY_ROWS)]
    elif mode == "latency":
        parts = [f"## {count} CRs, one at a time", ""]
        parts += ["Each CR created once the operator had settled after the one before:", ""]
        parts += [table(results, "latency", LATENCY_ROWS)]
    elif mode == "scale":
        parts += [f"{count} CRs (no-op role) exist before the operator starts; times are from"]
        parts += ["the operator's start:", "", table(results, "create", ROWS)]
        if any("again" in r for r in results.values()):
            parts += ["", "Then every CR's spec changed once (times are change -> Successful):"]
            parts += ["", table(results, "again", STEADY_ROWS)]
    else:
        parts += [table(results, "create", ROWS)]
    parts += ["", table(results, "top", TOP_ROWS)]
    loads = "; ".join(
        f"{r['operator']}: {r.get('load_before')} -> {r.get('load_after')}"
        for r in results.values()
    )
    parts += ["", f"Load average (1, 5, 15 min) before -> after each operator's run: {loads}"]
    for result in results.values():
        if "error" in result:
            parts += ["", f"{result['operator']} failed: `{result['error'][-300:]}`"]
    diffs = report["dependents"].get(count) or {}
    for label, found in diffs.items():
        if found:
            parts += ["", f"Dependents and CRs, Go vs {label}: {len(found)} differences:"]
            parts += [f"- `{d}`" for d in found[:20]]
        else:
            compared = report["compared"].get(count, {}).get(label, 0)
            parts += [
                "",
                f"Dependents (Deployments, Services, ConfigMaps) and CRs, Go vs {label}: "
                f"identical after stripping metadata noise ({compared} objects compared).",
            ]
    return "\n".join(parts)


def markdown(report: dict[str, Any]) -> str:
    parts = [
        f"# ansible-operator: ours vs Go, mode `{report['mode']}`",
        "",
        f"{report['started']}, {report['machine']}; "
        f"`--max-concurrent-reconciles {report['concurrency']}` for all operators; "
        f"`ANSIBLE_GATHERING=explicit`; command: `{report['command']}`",
        "",
        "Ratios are ours / Go: below 1 is better for times, CPU and memory, above 1 for rates.",
    ]
    for count, results in report["runs"].items():
        parts += ["", section_markdown(report, count, results)]
    return "\n".join(parts) + "\n"
