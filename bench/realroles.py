"""Real-shaped roles: the installer role of bench/realroles/ on the Go ansible-operator and
on ours (runner and fast backends), one after the other, on the same local cluster.

All operators run at once, each watching namespaces of its own, and are measured in
turn (a#0 of each, then a#1 of each, ...), so that whatever else loads the machine
meanwhile falls on all of them alike; only the measured one has work to do. The Go
operator's fixed ports (8888, 5050) allow one of it at a time on the machine: the script
waits for them to be free.

Scenarios, each measured --runs times (default 5) per operator:
  a  first reconcile: an Installer CR created in a namespace of its own where nothing
     exists yet (each run a fresh CR in a fresh namespace, all watched from the start);
  b  steady state: the CR of the last `a` run, its dependents in place, gets a new
     annotation (the watch has watchAnnotationsChanges): the run this starts changes
     nothing (every task ok or skipped, `changed` = 0, which is checked);
  c  the memcached sample (the repository's watches.yaml and role, its own operator
     start): a fresh CR (spec.size 1) at a time, as a regression check.

Figures of one reconcile: wall time from the request that triggers it (create or patch)
to the operator logging the end of that run (ours logs it after writing the CR's
status, Go logs "Ansible-runner exited" before writing it: Go's figure leaves out one
status update), median and range over the runs; CPU seconds of the operator's whole
process tree over the same interval (bench/compare's /proc sampler); the run's
`changed`/`failures` and its task count from its job events. Before every trigger the
operator has settled (no run in flight, none started for --settle seconds: the
dependents' watches may start follow-up runs after a first reconcile).

Per-task cost, from the measured run's job events (ours: the artifacts of the CR's data
directory under the run directory; Go: /tmp/ansible-operator/runner/<group>/<version>/
<kind>/<namespace>/<name>/artifacts/<ident>/job_events): a task costs the time from its
`playbook_on_task_start` event to the next task's (or to `playbook_on_stats`), so that
the costs add up to the play. Kinds: `skipped` (every host result skipped), `set_fact/
debug`, `template` (the task's source text calls lookup('template', ...)), `k8s`,
`k8s_info`, `k8s_status`, `include/other` (include_tasks, include_role, assert, fail,
meta, ...). "Ansible" is the first event to the last: the rest of the wall time is
starting Ansible and the operator's own work around the run.

--ansible-core-venv PATH runs the same with another venv (ours and the Ansible both
operators run: e.g. .venv-core218 for ansible-core 2.18); it needs the `bench` extra
(ansible-runner-http for the Go operator, jmespath for json_query).

Usage: .venv/bin/python bench/realroles.py [--runs 5] [--operators go,runner,fast]
       [--scenarios a,b,c] [--ansible-core-venv .venv-core218]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Run as a script, sys.path[0] is bench/, whose queue.py would hide the standard
# library's `queue` (which the Kubernetes client imports): the repository replaces it.
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == REPO / "bench":
    sys.path[0] = str(REPO)
else:
    sys.path.insert(0, str(REPO))

import yaml  # noqa: E402
from kubernetes import client, config  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from bench.compare.base import VENV, log  # noqa: E402
from bench.compare.operators import (  # noqa: E402
    GO_FIXED_PORTS,
    OperatorSpec,
    Running,
    our_backends,
    start_operator,
    stop_operator,
    wait_ports_free,
    wait_ready,
)
from bench.compare.resources import install_crd, wait_settled  # noqa: E402
from bench.compare.workloads import Context, cleanup  # noqa: E402
from runner.devtools.cluster import build  # noqa: E402
from runner.devtools.cluster.components import go_ansible_operator  # noqa: E402
from runner.devtools.cluster.layout import default_state_dir  # noqa: E402
from runner.devtools.cluster.local import LocalCluster  # noqa: E402

PROJECT = REPO / "bench" / "realroles"
INSTALLER = ("bench.example.com", "v1alpha1", "installers", "Installer")
MEMCACHED = ("cache.example.com", "v1alpha1", "memcacheds", "Memcached")
INSTALLER_CRD = PROJECT / "config" / "crd" / "bench.example.com_installers.yaml"
INSTALLER_SAMPLE = PROJECT / "config" / "samples" / "bench_v1alpha1_installer.yaml"
GO_RUNNER_DIR = Path("/tmp/ansible-operator/runner")
POKE = "bench.example.com/poke"
KINDS = ("skipped", "set_fact/debug", "template", "k8s", "k8s_info", "k8s_status", "other")
KIND_LABELS = {"other": "include/other"}
OUTCOMES = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "failed",
}


# -- job events -----------------------------------------------------------------------------


def event_time(event: dict[str, Any]) -> float:
    """An event's `created` (ISO 8601, UTC when it carries no zone) as a Unix time."""
    stamp = dt.datetime.fromisoformat(str(event["created"]))
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return stamp.timestamp()


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    events = []
    for path in (run_dir / "job_events").glob("*.json"):
        try:
            events.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    events.sort(key=lambda event: int(event.get("counter", 0)))
    return events


def run_dirs(base: Path, gvk: tuple[str, str, str, str], namespace: str, name: str) -> list[Path]:
    """The artifact directories of a CR's runs under an operator's run directory: Go's
    `<base>/<group>/<version>/<Kind>/<ns>/<name>/artifacts/<ident>`, ours the same under
    one `operator-*` directory per operator process."""
    group, version, _, kind = gvk
    tail = f"{group}/{version}/{kind}/{namespace}/{name}/artifacts"
    found = []
    for artifacts in [*base.glob(tail), *base.glob(f"*/{tail}")]:
        found += [p for p in artifacts.iterdir() if p.is_dir() and not p.is_symlink()]
    return found


def find_run(
    base: Path, gvk: tuple[str, str, str, str], namespace: str, name: str, after: float
) -> Path | None:
    """The CR's first run that started at or after `after` (Unix time)."""
    best: tuple[float, Path] | None = None
    for run in run_dirs(base, gvk, namespace, name):
        events = read_events(run)
        if not events:
            continue
        start = event_time(events[0])
        if start >= after - 0.5 and (best is None or start < best[0]):
            best = (start, run)
    return best[1] if best else None


class TaskSources:
    """The source text of a task, found by its `task_path` (file:line) under a project."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self._files: dict[str, list[str]] = {}

    def text(self, task_path: str) -> str:
        path, _, line = task_path.rpartition(":")
        if "/roles/" not in path or not line.isdigit():
            return ""
        relative = "roles/" + path.rsplit("/roles/", 1)[1]
        if relative not in self._files:
            try:
                self._files[relative] = (self.project / relative).read_text().splitlines()
            except OSError:
                self._files[relative] = []
        lines = self._files[relative]
        start = int(line) - 1
        if not 0 <= start < len(lines):
            return ""
        # The task's keys are indented past its "- "; the next line indented less ends it.
        indent = len(lines[start]) - len(lines[start].lstrip(" -"))
        block = [lines[start]]
        for text in lines[start + 1 :]:
            if text.strip() and len(text) - len(text.lstrip(" ")) < indent:
                break
            block.append(text)
        return "\n".join(block)


def _short_action(action: str) -> str:
    return action.rsplit(".", 1)[-1]


def task_kind(action: str, outcomes: Counter[str], source: str) -> str:
    if outcomes and set(outcomes) == {"skipped"}:
        return "skipped"
    short = _short_action(action)
    if short in ("set_fact", "debug"):
        return "set_fact/debug"
    if "lookup('template'" in source or 'lookup("template"' in source:
        return "template"
    if short in ("k8s", "k8s_info", "k8s_status"):
        return short
    return "other"


def analyse_run(run_dir: Path, sources: TaskSources) -> dict[str, Any]:
    """Tasks of one run with their cost and kind, the play's span and its stats."""
    events = read_events(run_dir)
    tasks: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    stats: dict[str, int] = {}
    end = event_time(events[-1]) if events else 0.0
    for event in events:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            at = event_time(event)
            if current is not None:
                current["cost"] = at - current["start"]
            current = {
                "name": data.get("task") or data.get("name") or "",
                "action": data.get("task_action") or "",
                "path": data.get("task_path") or "",
                "start": at,
                "outcomes": Counter(),
            }
            tasks.append(current)
        elif kind in OUTCOMES and current is not None:
            current["outcomes"][OUTCOMES[kind]] += 1
        elif kind == "playbook_on_stats":
            end = event_time(event)
            for key in ("ok", "changed", "skipped", "failures", "rescued", "ignored"):
                stats[key] = sum((data.get(key) or {}).values())
    if current is not None:
        current["cost"] = end - current["start"]
    by_kind: dict[str, dict[str, float]] = {k: {"count": 0, "seconds": 0.0} for k in KINDS}
    for task in tasks:
        task["kind"] = task_kind(task["action"], task["outcomes"], sources.text(task["path"]))
        by_kind[task["kind"]]["count"] += 1
        by_kind[task["kind"]]["seconds"] += task["cost"]
    return {
        "artifacts": str(run_dir),
        "tasks": len(tasks),
        "span_s": round(end - event_time(events[0]), 3) if events else None,
        "stats": stats,
        "by_kind": {
            k: {"count": v["count"], "seconds": round(v["seconds"], 4)} for k, v in by_kind.items()
        },
        "task_costs": [
            {"name": t["name"], "kind": t["kind"], "ms": round(1000 * t["cost"], 2)} for t in tasks
        ],
    }


# -- one operator ---------------------------------------------------------------------------


@dataclass
class Bench:
    api: client.ApiClient
    kubeconfig: Path
    go_binary: Path
    work: Path
    venv: Path
    runs: int
    settle: float
    timeout: float
    concurrency: int
    scenarios: list[str]
    keep_artifacts: bool = False
    notes: list[str] = field(default_factory=list)


def _wait_run_end(op: Running, finished_before: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if op.finished() > finished_before:
            return time.monotonic()
        if not op.alive():
            raise RuntimeError(f"{op.spec.label} exited:\n{op.log()[-3000:]}")
        time.sleep(0.01)
    raise RuntimeError(f"{op.spec.label}: no run ended within {timeout:.0f} s")


def measure_one(
    bench: Bench,
    op: Running,
    trigger: Callable[[], None],
    *,
    gvk: tuple[str, str, str, str],
    namespace: str,
    name: str,
    sources: TaskSources,
) -> dict[str, Any]:
    """Trigger one reconcile, time it to the end of its run, then settle and analyse it."""
    finished_before = op.finished()
    cpu_before = op.sampler.sample()
    wall_before = time.time()
    began = time.monotonic()
    trigger()
    ended = _wait_run_end(op, finished_before, bench.timeout)
    cpu_after = op.sampler.sample()
    runs_before_settle = op.runs()
    runs_settled = wait_settled(op, quiet=bench.settle)
    base = op.runner_dir if op.spec.kind == "ours" else GO_RUNNER_DIR
    run = find_run(base, gvk, namespace, name, wall_before)
    result: dict[str, Any] = {
        "wall_s": round(ended - began, 3),
        "cpu_s": round(cpu_after.cpu_s - cpu_before.cpu_s, 2),
        "follow_up_runs": runs_settled - runs_before_settle,
    }
    if run is None:
        result["error"] = "no artifacts found for the run"
    else:
        result.update(analyse_run(run, sources))
    return result


def _create(
    api: client.ApiClient, plural_info: tuple[str, str, str, str], ns: str, body: dict[str, Any]
) -> None:
    group, version, plural, _ = plural_info
    client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, ns, plural, body)


def installer_body(name: str) -> dict[str, Any]:
    body = yaml.safe_load(INSTALLER_SAMPLE.read_text())
    body["metadata"] = {"name": name}
    return dict(body)


def _delete_namespaces(api: client.ApiClient, namespaces: list[str]) -> None:
    core = client.CoreV1Api(api)
    for ns in namespaces:
        try:
            core.delete_namespace(ns)
        except ApiException as exc:
            if exc.status != 404:
                log(f"  deleting {ns}: {exc.status} {exc.reason}")
    deadline = time.monotonic() + 300
    for ns in namespaces:
        while time.monotonic() < deadline:
            try:
                core.read_namespace(ns)
            except ApiException as exc:
                if exc.status == 404:
                    break
            time.sleep(1)


@dataclass
class Lane:
    """One operator of an interleaved phase: its namespaces, process and results."""

    spec: OperatorSpec
    namespaces: list[str]
    result: dict[str, Any]
    op: Running | None = None
    failed: bool = False


def _lanes(bench: Bench, specs: list[OperatorSpec], prefix: str, count: int) -> list[Lane]:
    tag = uuid.uuid4().hex[:5]
    core = client.CoreV1Api(bench.api)
    lanes = []
    for spec in specs:
        namespaces = [f"{prefix}-{spec.key}-{tag}-{i}" for i in range(count)]
        for ns in namespaces:
            core.create_namespace({"metadata": {"name": ns}})
        lanes.append(Lane(spec, namespaces, {"operator": spec.label, "load_before": _load()}))
    return lanes


def _each(lanes: list[Lane], what: str, step: Callable[[Lane], None]) -> None:
    """`step` for every operator still running; one that fails is stopped and left out."""
    for lane in lanes:
        if lane.failed:
            continue
        try:
            step(lane)
        except Exception as exc:
            lane.failed = True
            lane.result["error"] = f"{what}: {exc}"[-2000:]
            log(f"  {lane.spec.label} {what} failed: {exc}")
            lane.result.update(_stop(lane.op))
            lane.op = None


def _start_all(bench: Bench, lanes: list[Lane], project: Path, work: Path) -> None:
    def start(lane: Lane) -> None:
        lane.op = _start(bench, lane.spec, project, ",".join(lane.namespaces), work)
        lane.result["command"] = " ".join(str(a) for a in lane.op.process.args)
        lane.result["ready_s"] = round(wait_ready(lane.op), 2)

    _each(lanes, "start", start)
    time.sleep(1)  # informers synced, queues empty


def _finish_all(bench: Bench, lanes: list[Lane], group: str) -> None:
    for lane in lanes:
        lane.result.update(_stop(lane.op))
        lane.result["load_after"] = _load()
        _delete_namespaces(bench.api, lane.namespaces)
        _remove_run_dirs(lane.op, bench, group, lane.namespaces)


def run_installer(bench: Bench, specs: list[OperatorSpec]) -> dict[str, dict[str, Any]]:
    """Scenarios a and b, all operators running at once (each its own namespaces) and
    measured in turn, so that what else loads the machine meanwhile falls on all alike."""
    lanes = _lanes(bench, specs, "rr", bench.runs)
    sources = TaskSources(PROJECT)
    try:
        _start_all(bench, lanes, PROJECT, bench.work)
        for index in range(bench.runs):

            def first(lane: Lane, index: int = index) -> None:
                assert lane.op is not None
                ns = lane.namespaces[index]
                one = measure_one(
                    bench,
                    lane.op,
                    lambda: _create(bench.api, INSTALLER, ns, installer_body("inst")),
                    gvk=INSTALLER,
                    namespace=ns,
                    name="inst",
                    sources=sources,
                )
                log(f"  {lane.spec.label} a#{index}: {_brief(one)}")
                lane.result.setdefault("a", []).append(one)

            _each(lanes, f"a#{index}", first)
            if "a" not in bench.scenarios:
                break
        if "b" in bench.scenarios:
            custom = client.CustomObjectsApi(bench.api)
            last = bench.runs - 1 if "a" in bench.scenarios else 0
            for index in range(bench.runs):

                def steady(lane: Lane, index: int = index) -> None:
                    assert lane.op is not None
                    ns = lane.namespaces[last]
                    patch = {"metadata": {"annotations": {POKE: f"{index}-{time.time()}"}}}
                    one = measure_one(
                        bench,
                        lane.op,
                        lambda: custom.patch_namespaced_custom_object(
                            INSTALLER[0], INSTALLER[1], ns, INSTALLER[2], "inst", patch
                        ),
                        gvk=INSTALLER,
                        namespace=ns,
                        name="inst",
                        sources=sources,
                    )
                    log(f"  {lane.spec.label} b#{index}: {_brief(one)}")
                    lane.result.setdefault("b", []).append(one)

                _each(lanes, f"b#{index}", steady)
        if "a" not in bench.scenarios:
            for lane in lanes:
                lane.result.pop("a", None)
    finally:
        _finish_all(bench, lanes, INSTALLER[0])
    return {lane.spec.key: lane.result for lane in lanes}


def run_memcached(bench: Bench, specs: list[OperatorSpec]) -> dict[str, dict[str, Any]]:
    """Scenario c: the memcached sample, a fresh CR at a time, operators in turn."""
    lanes = _lanes(bench, specs, "rr-mc", 1)
    work = bench.work / "memcached"
    work.mkdir(exist_ok=True)
    sources = TaskSources(REPO)
    try:
        _start_all(bench, lanes, REPO, work)
        for index in range(bench.runs):

            def fresh(lane: Lane, index: int = index) -> None:
                assert lane.op is not None
                ns, name = lane.namespaces[0], f"m-{index}"
                body = {
                    "apiVersion": f"{MEMCACHED[0]}/{MEMCACHED[1]}",
                    "kind": MEMCACHED[3],
                    "metadata": {"name": name},
                    "spec": {"size": 1},
                }
                one = measure_one(
                    bench,
                    lane.op,
                    lambda: _create(bench.api, MEMCACHED, ns, body),
                    gvk=MEMCACHED,
                    namespace=ns,
                    name=name,
                    sources=sources,
                )
                log(f"  {lane.spec.label} c#{index}: {_brief(one)}")
                lane.result.setdefault("c", []).append(one)

            _each(lanes, f"c#{index}", fresh)
    finally:
        for lane in lanes:
            lane.result.update(_stop(lane.op))
        context = _compare_context(bench)
        for lane in lanes:
            cleanup(context, lane.namespaces[0])
            lane.result["load_after"] = _load()
            _remove_run_dirs(lane.op, bench, MEMCACHED[0], lane.namespaces)
    return {lane.spec.key: lane.result for lane in lanes}


def _start(bench: Bench, spec: OperatorSpec, project: Path, namespace: str, work: Path) -> Running:
    if spec.kind == "go":
        # Another Go operator on the machine holds its fixed ports: wait for it longer
        # than start_operator does (another benchmark's run may take minutes).
        wait_ports_free(GO_FIXED_PORTS, timeout=bench.timeout)
    return start_operator(
        spec,
        go_binary=bench.go_binary,
        project=project,
        namespace=namespace,
        kubeconfig=bench.kubeconfig,
        work=work,
        concurrency=bench.concurrency,
        venv=bench.venv,
    )


def _compare_context(bench: Bench) -> Context:
    return Context(
        api=bench.api,
        kubeconfig=bench.kubeconfig,
        go_binary=bench.go_binary,
        work=bench.work,
        concurrency=bench.concurrency,
        timeout=bench.timeout,
        idle_seconds=0,
        settle=bench.settle,
    )


def _stop(op: Running | None) -> dict[str, Any]:
    if op is None:
        return {}
    stop_operator(op)
    out: dict[str, Any] = {"exit_code": op.returncode, "log": str(op.log_path)}
    if op.rusage is not None:
        out["lifetime_cpu_s"] = round(op.rusage.ru_utime + op.rusage.ru_stime, 2)
    return out


def _remove_run_dirs(op: Running | None, bench: Bench, group: str, namespaces: list[str]) -> None:
    if bench.keep_artifacts:
        return
    if op is not None:
        shutil.rmtree(op.runner_dir, ignore_errors=True)
    for ns in namespaces:
        for kind_dir in (GO_RUNNER_DIR / group).glob(f"*/*/{ns}"):
            shutil.rmtree(kind_dir, ignore_errors=True)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _brief(one: dict[str, Any]) -> str:
    stats = one.get("stats") or {}
    return (
        f"wall {one['wall_s']:.2f} s, cpu {one['cpu_s']:.2f} s, tasks {one.get('tasks')}, "
        f"changed {stats.get('changed')}, failures {stats.get('failures')}, "
        f"follow-up runs {one['follow_up_runs']}" + (f", {one['error']}" if "error" in one else "")
    )


# -- summary and report ---------------------------------------------------------------------


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    walls = [r["wall_s"] for r in runs]
    cpus = [r["cpu_s"] for r in runs]
    spans = [r["span_s"] for r in runs if r.get("span_s") is not None]
    summary: dict[str, Any] = {
        "runs": len(runs),
        "wall_p50_s": round(statistics.median(walls), 3),
        "wall_min_s": min(walls),
        "wall_max_s": max(walls),
        "cpu_p50_s": round(statistics.median(cpus), 2),
        "span_p50_s": round(statistics.median(spans), 3) if spans else None,
        "tasks": sorted({r.get("tasks") for r in runs if r.get("tasks") is not None}),
        "changed": [(r.get("stats") or {}).get("changed") for r in runs],
        "failures": sum((r.get("stats") or {}).get("failures") or 0 for r in runs),
        "follow_up_runs": [r["follow_up_runs"] for r in runs],
    }
    per_kind: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        count = sum(r["by_kind"][kind]["count"] for r in runs if "by_kind" in r)
        seconds = sum(r["by_kind"][kind]["seconds"] for r in runs if "by_kind" in r)
        per_kind[kind] = {
            "tasks_per_run": round(count / len(runs), 1),
            "ms_per_task": round(1000 * seconds / count, 2) if count else None,
            "s_per_run": round(seconds / len(runs), 3),
        }
    summary["per_kind"] = per_kind
    return summary


SCENARIOS = {
    "a": "a: first reconcile (fresh CR, fresh namespace)",
    "b": "b: steady state (same CR again, nothing changes)",
    "c": "c: memcached sample (fresh CR)",
}


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Real-shaped roles: Go ansible-operator vs ours, ansible-core {report['ansible_core']}",
        "",
        f"{report['started']}; {report['machine']}; load average before "
        f"{report['load_before']}, after {report['load_after']}.",
        f"Command: `{report['command']}`",
        "",
        "Wall time of one reconcile (trigger -> the operator logs the run's end; median "
        f"of {report['runs']} runs, range in brackets), CPU seconds of the operator's "
        "process tree over it (median), Ansible's own span (first to last job event) and "
        "the task count of the run.",
        "",
        "| scenario | operator | wall s | vs Go | CPU s | Ansible s | tasks | changed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    summaries = report["summary"]
    for scenario, title in SCENARIOS.items():
        if scenario not in summaries:
            continue
        go = summaries[scenario].get("go")
        for key, s in summaries[scenario].items():
            if "wall_p50_s" not in s:
                lines.append(f"| {title} | {report['labels'][key]} | failed: {s['error'][:80]} |")
                continue
            ratio = (
                f"{go['wall_p50_s'] / s['wall_p50_s']:.1f}x"
                if go and "wall_p50_s" in go and key != "go"
                else ""
            )
            lines.append(
                f"| {title} | {report['labels'][key]} | {s['wall_p50_s']:.2f} "
                f"({s['wall_min_s']:.2f}-{s['wall_max_s']:.2f}) | {ratio} | "
                f"{s['cpu_p50_s']:.2f} | {s['span_p50_s']} | "
                f"{','.join(str(t) for t in s['tasks'])} | "
                f"{','.join(str(c) for c in s['changed'])} |"
            )
    lines += [
        "",
        "Per-task cost by kind: mean ms per task (tasks per run), from the job events' "
        "timestamps (a task runs from its start event to the next task's).",
        "",
        "| scenario | operator | " + " | ".join(KIND_LABELS.get(k, k) for k in KINDS) + " |",
        "|---|---|" + "---|" * len(KINDS),
    ]
    for scenario, title in SCENARIOS.items():
        for key, s in summaries.get(scenario, {}).items():
            if "wall_p50_s" not in s:
                continue
            cells = []
            for kind in KINDS:
                k = s["per_kind"][kind]
                cells.append(
                    f"{k['ms_per_task']:.1f} ({k['tasks_per_run']:g})"
                    if k["ms_per_task"] is not None
                    else "-"
                )
            lines.append(f"| {title[:1]} | {report['labels'][key]} | " + " | ".join(cells) + " |")
    if report.get("notes"):
        lines += ["", *[f"- {note}" for note in report["notes"]]]
    return "\n".join(lines) + "\n"


# -- main -----------------------------------------------------------------------------------


def _venv_check(venv: Path, need_go: bool) -> tuple[str, list[str]]:
    python = venv / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"{python} does not exist")
    probe = (
        "import importlib.util, ansible.release as r; "
        "print(r.__version__); "
        "print(*[m for m in ('jmespath', 'ansible_runner_http', 'ansible_runner') "
        "if importlib.util.find_spec(m) is None])"
    )
    out = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    missing = out[1].split() if len(out) > 1 else []
    if not need_go and "ansible_runner_http" in missing:
        missing.remove("ansible_runner_http")
    return out[0], missing


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="bench/realroles.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=5, help="reconciles per scenario")
    parser.add_argument("--operators", default="go,runner,fast")
    parser.add_argument("--scenarios", default="a,b,c")
    parser.add_argument("--ansible-core-venv", type=Path, default=VENV)
    parser.add_argument("--settle", type=float, default=3, help="quiet seconds before a trigger")
    parser.add_argument("--timeout", type=float, default=900, help="per reconcile, seconds")
    parser.add_argument("--max-concurrent-reconciles", type=int, default=4)
    parser.add_argument("--results-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--keep-work", action="store_true", help="keep logs and artifacts")
    args = parser.parse_args()

    venv = args.ansible_core_venv.absolute()
    wanted = [k.strip() for k in args.operators.split(",") if k.strip()]
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    core, missing = _venv_check(venv, "go" in wanted)
    if missing:
        parser.error(
            f"{venv} lacks {', '.join(missing)}: install the bench extra there "
            f"({venv}/bin/pip install -e '.[bench]', or `make bench-realroles-deps`)"
        )
    backends = our_backends(venv)
    specs: list[OperatorSpec] = []
    for key in wanted:
        if key == "go":
            specs.append(OperatorSpec("go", "Go v1.42.0", "go"))
        elif key in ("runner", "fast") and key in backends:
            specs.append(OperatorSpec(key, f"ours ({key})", "ours", key))
        else:
            parser.error(f"unknown or unavailable operator {key!r}")

    cluster = LocalCluster(default_state_dir())
    if not cluster.is_up():
        cluster.up(progress=log)
    go_binary = Path()
    if "go" in wanted:
        go_binary = build.ensure_built(
            [go_ansible_operator()], root=build.cache_root(), progress=log
        )["ansible-operator-go"]
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    install_crd(api, INSTALLER_CRD)
    if "c" in scenarios:
        install_crd(api)
    work = Path(tempfile.mkdtemp(prefix="bench-realroles-"))
    bench = Bench(
        api=api,
        kubeconfig=cluster.kubeconfig,
        go_binary=go_binary,
        work=work,
        venv=venv,
        runs=args.runs,
        settle=args.settle,
        timeout=args.timeout,
        concurrency=args.max_concurrent_reconciles,
        scenarios=scenarios,
        keep_artifacts=args.keep_work,
    )
    started = dt.datetime.now(dt.UTC)
    report: dict[str, Any] = {
        "ansible_core": core,
        "venv": str(venv),
        "started": started.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python "
        f"{platform.python_version()}",
        "command": " ".join([".venv/bin/python", "bench/realroles.py", *sys.argv[1:]]),
        "runs": args.runs,
        "settle_s": args.settle,
        "load_before": _load(),
        "labels": {spec.key: spec.label for spec in specs},
        "results": {},
        "summary": {},
        "notes": [],
    }
    failed = False
    log(f"ansible-core {core} ({venv}); work dir {work}")
    try:
        phases = []
        if {"a", "b"} & set(scenarios):
            phases.append(("installer", run_installer))
        if "c" in scenarios:
            phases.append(("memcached", run_memcached))
        for what, phase in phases:
            log(f"{what}: {', '.join(spec.label for spec in specs)}")
            try:
                results = phase(bench, specs)
            except Exception as exc:
                failed = True
                log(f"  {what} failed: {exc}")
                results = {spec.key: {"operator": spec.label, "error": str(exc)} for spec in specs}
            for key, result in results.items():
                report["results"].setdefault(key, {})[what] = result
                for scenario in ("a", "b") if what == "installer" else ("c",):
                    if scenario not in scenarios:
                        continue
                    if "error" in result:
                        failed = True
                    if result.get(scenario):
                        summary = summarise(result[scenario])
                        if "error" in result:
                            summary["error"] = result["error"]
                    else:
                        summary = {"error": result.get("error", "no runs")}
                    report["summary"].setdefault(scenario, {})[key] = summary
        for scenario, by_op in report["summary"].items():
            for key, s in by_op.items():
                if scenario == "b" and any(s.get("changed") or []):
                    report["notes"].append(
                        f"{report['labels'][key]}: a steady-state run changed something "
                        f"(changed per run: {s['changed']})"
                    )
                if "error" in s and "wall_p50_s" in s:
                    report["notes"].append(
                        f"{report['labels'][key]}, scenario {scenario}: stopped after "
                        f"{s['runs']} runs: {s['error'][:300]}"
                    )
                if s.get("failures"):
                    failed = True
                    report["notes"].append(
                        f"{report['labels'][key]}, scenario {scenario}: "
                        f"{s['failures']} failed tasks"
                    )
    finally:
        report["load_after"] = _load()
        args.results_dir.mkdir(parents=True, exist_ok=True)
        stem = f"realroles-{started.strftime('%Y%m%d-%H%M%S')}"
        (args.results_dir / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
        text = markdown(report)
        (args.results_dir / f"{stem}.md").write_text(text)
        print("\n" + text, flush=True)
        log(f"wrote {args.results_dir}/{stem}.{{json,md}}")
        if args.keep_work or failed:
            log(f"operator logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
