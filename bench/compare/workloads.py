"""One operator, one workload (create, steady, idle, scale, latency): set up a namespace,
run the operator through the phases, measure them, clean up.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import statistics
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from .base import GROUP, KIND, PLURAL, REPO, VERSION, log
from .operators import OperatorSpec, Running, start_operator, stop_operator, wait_ready
from .resources import (
    CRWatcher,
    Phase,
    converged_memcached,
    cr_state,
    create_cr,
    create_crs,
    dependents,
    latencies,
    percentile,
    successful,
    wait_converged,
    wait_settled,
)
from .sampling import Sample, TreeSampler, mib, vm_hwm

NOOP_WATCHES = [{"version": VERSION, "group": GROUP, "kind": KIND, "role": "noop"}]
NOOP_TASKS = """\
---
- name: Nothing to do
  ansible.builtin.debug:
    msg: "{{ ansible_operator_meta.name }}"
    verbosity: 3
"""


@dataclass
class Context:
    api: client.ApiClient
    kubeconfig: Path
    go_binary: Path
    work: Path
    concurrency: int
    timeout: float
    idle_seconds: float
    settle: float
    scale_again: bool = False


def noop_project(work: Path) -> Path:
    root = work / "noop-project"
    (root / "roles" / "noop" / "tasks").mkdir(parents=True, exist_ok=True)
    (root / "watches.yaml").write_text(yaml.safe_dump(NOOP_WATCHES, sort_keys=False))
    (root / "roles" / "noop" / "tasks" / "main.yml").write_text(NOOP_TASKS)
    return root


def phase_figures(
    op: Running,
    phase: Phase,
    *,
    began: float,
    count: int,
    converged: bool,
    before: Sample,
    at_converged: Sample,
    runs_before: int,
    runs_converged: int,
    runs_settled: int,
    at_settled: Sample,
) -> dict[str, Any]:
    ok = latencies(phase, phase.successful)
    conv = latencies(phase, phase.converged)
    total = (max(phase.converged.values()) - began) if converged else None
    runs = runs_converged - runs_before
    figures = {
        "converged": len(phase.converged),
        "p50_successful_s": percentile(ok, 0.5),
        "p95_successful_s": percentile(ok, 0.95),
        "p50_converged_s": percentile(conv, 0.5),
        "p95_converged_s": percentile(conv, 0.95),
        "converge_all_s": round(total, 2) if total else None,
        "crs_per_s": round(count / total, 3) if total else None,
        "runs_to_converge": runs,
        "runs_per_s": round(runs / total, 3) if total else None,
        "runs_settled": runs_settled - runs_before,
        "runs_per_cr": round((runs_settled - runs_before) / count, 2),
        "cpu_converge_s": round(at_converged.cpu_s - before.cpu_s, 2),
        "cpu_settled_s": round(at_settled.cpu_s - before.cpu_s, 2),
    }
    figures.update(op.sampler.window(before.t, at_settled.t))
    figures["root_rss_by_progress_mib"] = rss_by_progress(op.sampler, phase.converged)
    return figures


def rss_by_progress(sampler: TreeSampler, ends: dict[str, float]) -> str | None:
    """The operator process's RSS when 20, 40 ... 100 % of the CRs had converged: flat
    means its memory does not grow with the number of reconciles behind it."""
    times = sorted(ends.values())
    if len(times) < 5:
        return None
    found = []
    for fifth in range(1, 6):
        when = times[math.ceil(fifth * len(times) / 5) - 1]
        sample = next((s for s in sampler.samples if s.t >= when), None)
        found.append(f"{mib(sample.root_rss):g}" if sample else "-")
    return " / ".join(found)


def measure_phase(
    ctx: Context,
    op: Running,
    watcher: CRWatcher,
    phase: Phase,
    label: str,
    *,
    began: float,
    count: int,
    before: Sample,
    runs_before: int,
) -> tuple[bool, dict[str, Any]]:
    """Wait for the phase's CRs to converge and the operator to settle; its figures
    (`before`, `runs_before`: the sample and run count taken when the phase began)."""
    ok = wait_converged(op, watcher, count, ctx.timeout, label)
    at_converged, runs_converged = op.sampler.sample(), op.runs()
    # An operator that did not converge in time would not settle either: no waiting for it.
    runs_settled = wait_settled(op, quiet=ctx.settle) if ok else runs_converged
    figures = phase_figures(
        op,
        phase,
        began=began,
        count=count,
        converged=ok,
        before=before,
        at_converged=at_converged,
        runs_before=runs_before,
        runs_converged=runs_converged,
        runs_settled=runs_settled,
        at_settled=op.sampler.sample(),
    )
    log(f"  {label}: {json.dumps(figures)}")
    return ok, figures


def run_operator(ctx: Context, spec: OperatorSpec, *, mode: str, count: int) -> dict[str, Any]:
    custom = client.CustomObjectsApi(ctx.api)
    noop = mode in ("idle", "scale")
    project = noop_project(ctx.work) if noop else REPO
    predicate = successful if noop else converged_memcached
    namespace, watcher, result = set_up(ctx, spec, f"cmp-{spec.key}-{count}", predicate)
    op: Running | None = None
    try:
        if mode == "scale":
            log(f"  creating {count} CRs before {spec.label} starts")
            create_crs(ctx.api, watcher, namespace, count)
        watcher.start()
        op = start_operator(
            spec,
            go_binary=ctx.go_binary,
            project=project,
            namespace=namespace,
            kubeconfig=ctx.kubeconfig,
            work=ctx.work,
            concurrency=ctx.concurrency,
        )
        result["command"] = " ".join(str(a) for a in op.process.args)
        result["ready_s"] = round(wait_ready(op), 2)
        if mode == "scale":
            phase = watcher.new_phase()
            for name in list(watcher.latest):
                watcher.mark_start(name, op.started)
            before, runs_before = Sample(op.started, 0, 0, 0, 1), 0
            began = op.started
        else:
            time.sleep(1)  # informers synced, queue empty
            phase = watcher.new_phase()
            before, runs_before = op.sampler.sample(), op.runs()
            log(f"  {spec.label}: creating {count} CRs")
            began = create_crs(ctx.api, watcher, namespace, count)
        ok, result["create"] = measure_phase(
            ctx,
            op,
            watcher,
            phase,
            spec.label,
            began=began,
            count=count,
            before=before,
            runs_before=runs_before,
        )
        again = mode == "scale" and ctx.scale_again
        if (mode == "steady" or again) and ok:
            phase = watcher.new_phase()
            before, runs_before = op.sampler.sample(), op.runs()
            change = {"size": 2} if mode == "steady" else {"round": 2}
            log(f"  {spec.label}: changing every CR's spec ({change})")

            def patch(name: str) -> None:
                sent = time.monotonic()
                written = custom.patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, {"spec": change}
                )
                watcher.mark_start(name, sent, written)

            began = time.monotonic()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(patch, [f"m-{i}" for i in range(count)]))
            ok, result["again" if again else "steady"] = measure_phase(
                ctx,
                op,
                watcher,
                phase,
                spec.label,
                began=began,
                count=count,
                before=before,
                runs_before=runs_before,
            )
        if mode == "idle" and ok:
            log(f"  {spec.label}: idle for {ctx.idle_seconds:.0f} s")
            start, runs_start = op.sampler.sample(), op.runs()
            time.sleep(ctx.idle_seconds)
            end, runs_end = op.sampler.sample(), op.runs()
            result["idle"] = {
                "seconds": round(end.t - start.t, 1),
                "cpu_s": round(end.cpu_s - start.cpu_s, 2),
                "cpu_percent": round(100 * (end.cpu_s - start.cpu_s) / (end.t - start.t), 2),
                "runs": runs_end - runs_start,
                **op.sampler.window(start.t, end.t),
            }
            log(f"  {spec.label}: {json.dumps(result['idle'])}")
        if mode in ("create", "steady"):
            result["dependents"] = dependents(ctx.api, namespace)
            result["crs"] = cr_state(watcher.snapshot())
        result["peak_root_rss_mib"] = mib(vm_hwm(op.process.pid))
    finally:
        tear_down(ctx, op, watcher, namespace, result)
    return result


def run_latency(ctx: Context, spec: OperatorSpec, *, count: int) -> dict[str, Any]:
    """`--mode latency`: CRs created one at a time, each after the operator settled."""
    custom = client.CustomObjectsApi(ctx.api)
    namespace, watcher, result = set_up(ctx, spec, f"lat-{spec.key}-{count}", successful)
    op: Running | None = None
    latencies_s: list[float] = []
    try:
        watcher.start()
        op = start_operator(
            spec,
            go_binary=ctx.go_binary,
            project=REPO,
            namespace=namespace,
            kubeconfig=ctx.kubeconfig,
            work=ctx.work,
            concurrency=ctx.concurrency,
        )
        result["ready_s"] = round(wait_ready(op), 2)
        time.sleep(1)  # informers synced, queue empty
        for index in range(count):
            phase = watcher.new_phase()
            name = f"m-{index}"
            sent = create_cr(custom, watcher, namespace, name)
            deadline = sent + ctx.timeout
            while name not in phase.successful and time.monotonic() < deadline:
                time.sleep(0.002)
            if name not in phase.successful:
                raise RuntimeError(f"{name} not Successful after {ctx.timeout:.0f} s")
            latencies_s.append(phase.successful[name] - sent)
            wait_settled(op, quiet=ctx.settle)
        result["latency"] = latency_figures(latencies_s)
        log(f"  {spec.label}: {json.dumps(result['latency'])}")
        result["peak_root_rss_mib"] = mib(vm_hwm(op.process.pid))
    finally:
        tear_down(ctx, op, watcher, namespace, result)
    return result


def set_up(
    ctx: Context, spec: OperatorSpec, prefix: str, predicate: Callable[[dict[str, Any]], bool]
) -> tuple[str, CRWatcher, dict[str, Any]]:
    """A new namespace for one operator's run, a watcher of its CRs, and the result so far."""
    namespace = f"{prefix}-{uuid.uuid4().hex[:5]}"
    client.CoreV1Api(ctx.api).create_namespace({"metadata": {"name": namespace}})
    watch_api = config.new_client_from_config(config_file=str(ctx.kubeconfig))
    watcher = CRWatcher(watch_api, namespace, predicate)
    result: dict[str, Any] = {
        "operator": spec.label,
        "namespace": namespace,
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    return namespace, watcher, result


def tear_down(
    ctx: Context, op: Running | None, watcher: CRWatcher, namespace: str, result: dict[str, Any]
) -> None:
    """Stop the watcher and the operator, record its lifetime figures, remove what it left."""
    watcher.stop()
    if op is not None:
        stop_operator(op)
        if op.rusage is not None:
            result["lifetime_cpu_s"] = round(op.rusage.ru_utime + op.rusage.ru_stime, 2)
            result["lifetime_max_single_rss_mib"] = round(op.rusage.ru_maxrss / 1024, 1)
        result["exit_code"] = op.returncode
        result["log"] = str(op.log_path)
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    cleanup(ctx, namespace)
    if op is not None:
        shutil.rmtree(op.runner_dir, ignore_errors=True)
    go_dir = Path("/tmp/ansible-operator/runner", GROUP, VERSION, KIND, namespace)
    shutil.rmtree(go_dir, ignore_errors=True)


def latency_figures(latencies_s: list[float]) -> dict[str, Any]:
    """First (the CR right after the operator started), then the distribution."""
    rest = latencies_s[1:] or latencies_s
    return {
        "crs": len(latencies_s),
        "first_s": round(latencies_s[0], 3),
        "p50_s": round(statistics.median(latencies_s), 3),
        "p95_s": round(percentile(latencies_s, 0.95) or 0, 3),
        "p50_after_first_s": round(statistics.median(rest), 3),
        "min_s": round(min(latencies_s), 3),
        "max_s": round(max(latencies_s), 3),
    }


def cleanup(ctx: Context, namespace: str) -> None:
    """No operator is left to run the finalizer: drop it, then delete the namespace."""
    core = client.CoreV1Api(ctx.api)
    custom = client.CustomObjectsApi(ctx.api)
    try:
        items = custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"]

        def unfinalize(item: dict[str, Any]) -> None:
            if item["metadata"].get("finalizers"):
                with contextlib.suppress(ApiException):
                    custom.patch_namespaced_custom_object(
                        GROUP,
                        VERSION,
                        namespace,
                        PLURAL,
                        item["metadata"]["name"],
                        {"metadata": {"finalizers": None}},
                    )

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(unfinalize, items))
        core.delete_namespace(namespace)
    except ApiException as exc:
        log(f"  cleanup of {namespace}: {exc.status} {exc.reason}")
        return
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            core.read_namespace(namespace)
        except ApiException as exc:
            if exc.status == 404:
                return
        time.sleep(1)
    log(f"  namespace {namespace} still terminating after 300 s; moving on")
