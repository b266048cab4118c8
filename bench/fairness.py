# ruff: noqa: E402  (the path is fixed before the imports)
"""Fairness and memory safety at scale: new and changed CRs while thousands resync, and a
burst of CRs in a memory-limited cgroup.

`resync` (per operator: ours with queue priorities, ours without, the Go operator):
`--count` Memcached CRs of a no-op role with `reconcilePeriod: --period` exist before the
operator starts (one namespace shared by the operators, made once). The operator lists
them all (its initial list) and re-runs each one every period; after `--warmup` runs (or
`--warmup-timeout` seconds, whichever comes first) `--new` CRs are created one every
`--every` seconds, and their create -> Successful times measured; then the spec of
`--new` existing CRs is changed the same way, change -> Successful. Figures: p50, p95,
max, and how many were not Successful within `--timeout` s of their write.

`burst` (ours with the fast backend, the Go operator): the operator runs in a cgroup with
`--memory` bytes of memory and `--cpus` CPUs (`bench/compare/cgroupbox.py`), reconciling
the memcached sample role (a Deployment and a ConfigMap per CR, its pods on the fake
node; not its Service, see `burst_project`) with `--burst-concurrency` workers (a big
node's CPU count: what both operators would default to there); `--burst-count` CRs are
created at once. Figures:
time until all are Successful, the cgroup's peak memory, OOM kills.

Takes /tmp/ao-bench.lock for the whole run and /tmp/ao-go-operator.lock while the Go
operator runs. Writes bench/results/fairness.json and .md.

Usage: .venv/bin/python bench/fairness.py [--mode resync|burst|all] [--count 10000] ...
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# bench/ holds modules named like the standard library's (queue.py): off the path before
# anything imports them.
sys.path[:1] = [str(REPO)]

import argparse
import contextlib
import datetime as dt
import fcntl
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import yaml
from kubernetes import client, config

from bench.compare.base import GROUP, KIND, PLURAL, VERSION, log
from bench.compare.cgroupbox import CgroupBox
from bench.compare.operators import (
    OperatorSpec,
    Running,
    start_operator,
    stop_operator,
    wait_ready,
)
from bench.compare.resources import CRWatcher, install_crd, percentile, successful
from bench.compare.sampling import mib
from bench.compare.workloads import Context, cleanup
from runner.devtools.cluster import build
from runner.devtools.cluster.components import go_ansible_operator
from runner.devtools.cluster.layout import default_state_dir
from runner.devtools.cluster.local import LocalCluster

PROBE_LABEL = "bench-fairness-probe"
BENCH_LOCK = Path("/tmp/ao-bench.lock")
GO_LOCK = Path("/tmp/ao-go-operator.lock")
NOOP_TASKS = """\
---
- name: Nothing to do
  ansible.builtin.debug:
    msg: "{{ ansible_operator_meta.name }}"
    verbosity: 3
"""

OPERATORS = {
    "on": (OperatorSpec("fast-on", "ours (fast), priorities on", "ours", "fast"), ()),
    "off": (
        OperatorSpec("fast-off", "ours (fast), priorities off", "ours", "fast"),
        ("--priority-queue=false",),
    ),
    "go": (OperatorSpec("go", "Go v1.42.0", "go"), ()),
}


def _ancestors() -> set[int]:
    found, pid = set(), os.getppid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat[stat.rfind(")") + 2 :].split()[1])
    return found


def held_by_ancestor(path: Path) -> bool:
    """Whether a process this one runs under holds a flock on `path` (`flock
    /tmp/ao-bench.lock make bench`: taking it again here would wait forever)."""
    try:
        inode = path.stat().st_ino
        locks = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return False
    ancestors = _ancestors()
    for line in locks:
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].endswith(f":{inode}"):
            with contextlib.suppress(ValueError):
                if int(fields[4]) in ancestors:
                    return True
    return False


@contextlib.contextmanager
def locked(path: Path, what: str) -> Iterator[None]:
    if held_by_ancestor(path):
        yield
        return
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for {path} ({what})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def resync_project(work: Path, period: str) -> Path:
    root = work / "resync-project"
    (root / "roles" / "noop" / "tasks").mkdir(parents=True, exist_ok=True)
    watch = {"version": VERSION, "group": GROUP, "kind": KIND, "role": "noop"}
    watches = [{**watch, "reconcilePeriod": period}]
    (root / "watches.yaml").write_text(yaml.safe_dump(watches, sort_keys=False))
    (root / "roles" / "noop" / "tasks" / "main.yml").write_text(NOOP_TASKS)
    return root


def burst_project(work: Path) -> Path:
    """The memcached sample (watches.yaml, its role) less the role's Service: the local
    cluster's Service range is a /24, room for 253 Services, fewer than the burst's
    CRs. Each CR still gets its Deployment (pods on the fake node) and ConfigMap, and the
    finalizer."""
    root = work / "burst-project"
    shutil.copytree(REPO / "roles" / "memcached", root / "roles" / "memcached")
    shutil.copy(REPO / "watches.yaml", root / "watches.yaml")
    tasks_file = root / "roles" / "memcached" / "tasks" / "main.yml"
    tasks = yaml.safe_load(tasks_file.read_text())
    kept = [
        t
        for t in tasks
        if "Service"
        not in (t.get("kubernetes.core.k8s") or {}).get("definition", {}).get("kind", "")
    ]
    if len(kept) != len(tasks) - 1:
        raise RuntimeError(f"{tasks_file}: expected one Service task to leave out")
    tasks_file.write_text(yaml.safe_dump(kept, sort_keys=False))
    return root


def body(name: str, *, probe: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if probe:
        meta["labels"] = {PROBE_LABEL: "yes"}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": meta,
        "spec": {"size": 1},
    }


def create_many(api: client.ApiClient, namespace: str, names: list[str], probes: set[str]) -> None:
    custom = client.CustomObjectsApi(api)

    def one(name: str) -> None:
        for attempt in range(5):
            try:
                custom.create_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, body(name, probe=name in probes)
                )
                return
            except client.ApiException as exc:
                if exc.status == 409:
                    return
                time.sleep(0.5 * (attempt + 1))

    with ThreadPoolExecutor(8) as pool:
        for index, _ in enumerate(pool.map(one, names)):
            if index and index % 2000 == 0:
                log(f"  created {index}/{len(names)}")


def figures(latencies: list[float], expected: int) -> dict[str, Any]:
    return {
        "measured": expected,
        "successful": len(latencies),
        "not_successful_in_time": expected - len(latencies),
        "p50_s": percentile(latencies, 0.5),
        "p95_s": percentile(latencies, 0.95),
        "max_s": round(max(latencies), 3) if latencies else None,
    }


def paced(count: int, every: float, action: Any) -> None:
    """Call action(i) for i < count, one every `every` seconds."""
    began = time.monotonic()
    for index in range(count):
        delay = began + index * every - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        action(index)


def wait_phase(watcher: CRWatcher, names: list[str], timeout: float) -> list[float]:
    phase = watcher.phase
    while True:
        now = time.monotonic()
        pending = [n for n in names if n not in phase.successful]
        late = [n for n in pending if now - phase.start.get(n, now) > timeout]
        if len(late) == len(pending):
            break
        time.sleep(0.1)
    return [
        phase.successful[n] - phase.start[n]
        for n in names
        if n in phase.successful and phase.successful[n] - phase.start[n] <= timeout
    ]


def run_resync(
    ctx: Context, args: argparse.Namespace, key: str, namespace: str, project: Path
) -> dict[str, Any]:
    spec, extra = OPERATORS[key]
    custom = client.CustomObjectsApi(ctx.api)
    watcher = CRWatcher(ctx.api, namespace, successful, label_selector=f"{PROBE_LABEL}=yes")
    result: dict[str, Any] = {"operator": spec.label, "load_before": os.getloadavg()}
    op: Running | None = None
    lock = locked(GO_LOCK, "the Go operator") if key == "go" else contextlib.nullcontext()
    new_names = [f"new-{key}-{index}" for index in range(args.new)]
    with lock:
        try:
            watcher.start()
            op = start_operator(
                spec,
                go_binary=ctx.go_binary,
                project=project,
                namespace=namespace,
                kubeconfig=ctx.kubeconfig,
                work=ctx.work,
                concurrency=args.concurrency,
                extra_args=extra,
            )
            result["command"] = " ".join(str(a) for a in op.process.args)
            result["ready_s"] = round(wait_ready(op, timeout=600), 1)
            began = time.monotonic()
            deadline = began + args.warmup_timeout
            while op.runs() < args.warmup and time.monotonic() < deadline:
                if not op.alive():
                    raise RuntimeError(f"{spec.label} exited:\n{op.log()[-3000:]}")
                time.sleep(2)
            warm_runs = op.runs()
            result["warmup"] = {
                "seconds": round(time.monotonic() - began, 1),
                "runs": warm_runs,
                "runs_per_s": round(warm_runs / max(time.monotonic() - began, 1e-9), 2),
            }
            log(f"  {spec.label}: warm-up {json.dumps(result['warmup'])}")

            watcher.new_phase()
            measure_began, runs_began = time.monotonic(), op.runs()
            paced(
                args.new,
                args.every,
                lambda i: _create_probe(custom, watcher, namespace, new_names[i]),
            )
            result["create"] = figures(wait_phase(watcher, new_names, args.timeout), args.new)
            log(f"  {spec.label}: new CRs {json.dumps(result['create'])}")

            watcher.new_phase()
            token = uuid.uuid4().hex[:6]
            changed = [probe_name(args.count, args.new, i) for i in range(args.new)]
            paced(
                args.new,
                args.every,
                lambda i: _change(custom, watcher, namespace, changed[i], token),
            )
            result["change"] = figures(wait_phase(watcher, changed, args.timeout), args.new)
            log(f"  {spec.label}: spec changes {json.dumps(result['change'])}")
            elapsed = time.monotonic() - measure_began
            result["measured_runs_per_s"] = round((op.runs() - runs_began) / elapsed, 2)
            result["peak_tree_rss_mib"] = mib(
                max((s.root_rss + s.desc_rss for s in op.sampler.samples), default=0)
            )
        finally:
            watcher.stop()
            if op is not None:
                stop_operator(op)
                result["log"] = str(op.log_path)
            result["load_after"] = os.getloadavg()
            shutil.rmtree(
                Path("/tmp/ansible-operator/runner", GROUP, VERSION, KIND, namespace),
                ignore_errors=True,
            )
            for name in new_names:
                with contextlib.suppress(client.ApiException):
                    custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return result


def probe_name(count: int, new: int, index: int) -> str:
    """The existing CRs whose spec is changed: spread over the whole list."""
    return f"m-{(index * count) // max(new, 1)}"


def _create_probe(
    custom: client.CustomObjectsApi, watcher: CRWatcher, namespace: str, name: str
) -> None:
    sent = time.monotonic()
    written = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body(name, probe=True)
    )
    watcher.mark_start(name, sent, written)


def _change(
    custom: client.CustomObjectsApi, watcher: CRWatcher, namespace: str, name: str, token: str
) -> None:
    sent = time.monotonic()
    written = custom.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, {"spec": {"round": token}}
    )
    watcher.mark_start(name, sent, written)


def run_burst(ctx: Context, args: argparse.Namespace, key: str) -> dict[str, Any]:
    spec = OperatorSpec("go", "Go v1.42.0", "go") if key == "go" else OPERATORS["on"][0]
    namespace = f"burst-{key}-{uuid.uuid4().hex[:5]}"
    client.CoreV1Api(ctx.api).create_namespace({"metadata": {"name": namespace}})
    watcher = CRWatcher(ctx.api, namespace, successful)
    result: dict[str, Any] = {"operator": spec.label, "load_before": os.getloadavg()}
    op: Running | None = None
    names = [f"b-{index}" for index in range(args.burst_count)]
    lock = locked(GO_LOCK, "the Go operator") if key == "go" else contextlib.nullcontext()
    with lock, CgroupBox(memory_bytes=args.memory, cpus=args.cpus) as box:
        result["cgroup"] = f"v{box.version} {box.memory_dir}"
        try:
            watcher.start()
            op = start_operator(
                spec,
                go_binary=ctx.go_binary,
                project=burst_project(ctx.work)
                if not (ctx.work / "burst-project").exists()
                else ctx.work / "burst-project",
                namespace=namespace,
                kubeconfig=ctx.kubeconfig,
                work=ctx.work,
                concurrency=args.burst_concurrency,
                wrapper=box.wrapper(),
            )
            result["command"] = " ".join(str(a) for a in op.process.args)
            result["ready_s"] = round(wait_ready(op, timeout=300), 1)
            time.sleep(1)
            phase = watcher.new_phase()
            began = time.monotonic()
            create_many(ctx.api, namespace, names, set())
            for name in names:
                watcher.mark_start(name, began)
            deadline = began + args.burst_timeout
            while len(phase.successful) < len(names) and time.monotonic() < deadline:
                if not op.alive():
                    break
                time.sleep(0.5)
            done = len(phase.successful)
            result["burst"] = {
                "crs": len(names),
                "successful": done,
                "all_successful_s": round(max(phase.successful.values()) - began, 1)
                if done == len(names)
                else None,
                "oom_kills": box.oom_kills(),
                "peak_memory_mib": mib(box.peak()),
                "operator_alive": op.alive(),
            }
            with contextlib.suppress(Exception):
                text = op.metrics() if op.alive() else ""
                for line in text.splitlines():
                    if line.startswith(
                        (
                            "ansible_operator_runs_held_for_memory_total",
                            "ansible_operator_run_memory_estimate_bytes",
                        )
                    ):
                        result["burst"].setdefault("metrics", []).append(line)
            log(f"  {spec.label}: burst {json.dumps(result['burst'])}")
        finally:
            watcher.stop()
            if op is not None:
                stop_operator(op)
                result["log"] = str(op.log_path)
            result["load_after"] = os.getloadavg()
            cleanup(ctx, namespace)
    return result


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Fairness and memory ({report['started']})",
        "",
        f"`{report['command']}`; {report['machine']}",
        "",
    ]
    if report.get("resync"):
        lines += [
            f"## {report['count']} CRs resyncing every {report['period']}",
            "",
            "| operator | warm-up runs/s | new CR p50 / p95 / max (s) | not in time |"
            " change p50 / p95 / max (s) | not in time | load |",
            "|---|---|---|---|---|---|---|",
        ]
        for result in report["resync"].values():
            if "error" in result:
                lines.append(f"| {result['operator']} | error: {result['error'][:80]} |")
                continue
            new, change = result.get("create", {}), result.get("change", {})
            lines.append(
                f"| {result['operator']} | {result['warmup']['runs_per_s']} | "
                f"{new.get('p50_s')} / {new.get('p95_s')} / {new.get('max_s')} | "
                f"{new.get('not_successful_in_time')} | "
                f"{change.get('p50_s')} / {change.get('p95_s')} / {change.get('max_s')} | "
                f"{change.get('not_successful_in_time')} | "
                f"{' '.join(f'{x:.1f}' for x in result['load_before'])} |"
            )
    if report.get("burst"):
        lines += [
            "",
            f"## Burst of {report['burst_count']} memcached CRs in {mib(report['memory'])} MiB,"
            f" {report['cpus']} CPUs",
            "",
            "| operator | all Successful (s) | Successful | peak memory (MiB) | OOM kills |",
            "|---|---|---|---|---|",
        ]
        for result in report["burst"].values():
            if "error" in result:
                lines.append(f"| {result['operator']} | error: {result['error'][:80]} |")
                continue
            burst = result["burst"]
            lines.append(
                f"| {result['operator']} | {burst['all_successful_s']} | "
                f"{burst['successful']}/{burst['crs']} | {burst['peak_memory_mib']} | "
                f"{burst['oom_kills']} |"
            )
    return "\n".join(lines) + "\n"


def parse_size(text: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "M": 1 << 20, "G": 1 << 30}
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=("resync", "burst", "all"), default="all")
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--period", default="60s")
    parser.add_argument("--new", type=int, default=20)
    parser.add_argument("--every", type=float, default=3.0)
    parser.add_argument("--warmup", type=int, default=None, help="runs (default: --count)")
    parser.add_argument("--warmup-timeout", type=float, default=900)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--operators", default="on,off,go")
    parser.add_argument("--burst-operators", default="on,go")
    parser.add_argument("--burst-count", type=int, default=300)
    parser.add_argument("--burst-concurrency", type=int, default=32)
    parser.add_argument("--burst-timeout", type=float, default=1200)
    parser.add_argument("--memory", type=parse_size, default=parse_size("512Mi"))
    parser.add_argument("--cpus", type=float, default=2.0)
    parser.add_argument("--keep-namespace", action="store_true")
    parser.add_argument("--results-dir", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    if args.warmup is None:
        args.warmup = args.count

    with locked(BENCH_LOCK, "another benchmark"):
        return run(args)


def run(args: argparse.Namespace) -> int:
    cluster = LocalCluster(default_state_dir())
    if not cluster.is_up():
        cluster.up(progress=log)
    wants_go = "go" in args.operators.split(",") or "go" in args.burst_operators.split(",")
    go_binary = Path("/nonexistent")
    if wants_go:
        go_binary = build.ensure_built(
            [go_ansible_operator()], root=build.cache_root(), progress=log
        )["ansible-operator-go"]
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    api.configuration.connection_pool_maxsize = 16
    install_crd(api)
    work = Path(tempfile.mkdtemp(prefix="bench-fairness-"))
    ctx = Context(
        api=api,
        kubeconfig=cluster.kubeconfig,
        go_binary=go_binary,
        work=work,
        concurrency=args.concurrency,
        timeout=args.timeout,
        idle_seconds=0,
        settle=0,
    )
    report: dict[str, Any] = {
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join([".venv/bin/python", "bench/fairness.py", *sys.argv[1:]]),
        "machine": f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start",
        "count": args.count,
        "period": args.period,
        "burst_count": args.burst_count,
        "memory": args.memory,
        "cpus": args.cpus,
        "resync": {},
        "burst": {},
    }
    failed = False
    try:
        if args.mode in ("resync", "all"):
            namespace = f"fair-{uuid.uuid4().hex[:5]}"
            client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
            try:
                log(f"creating {args.count} CRs in {namespace}")
                began = time.monotonic()
                probes = {probe_name(args.count, args.new, i) for i in range(args.new)}
                create_many(api, namespace, [f"m-{i}" for i in range(args.count)], probes)
                report["create_s"] = round(time.monotonic() - began, 1)
                project = resync_project(work, args.period)
                for key in args.operators.split(","):
                    log(f"resync: {OPERATORS[key][0].label}")
                    try:
                        report["resync"][key] = run_resync(ctx, args, key, namespace, project)
                    except Exception as exc:
                        failed = True
                        log(f"  failed: {exc}")
                        report["resync"][key] = {"operator": key, "error": str(exc)[-2000:]}
            finally:
                if not args.keep_namespace:
                    cleanup(ctx, namespace)
        if args.mode in ("burst", "all"):
            for key in args.burst_operators.split(","):
                log(f"burst: {key}")
                try:
                    report["burst"][key] = run_burst(ctx, args, key)
                except Exception as exc:
                    failed = True
                    log(f"  failed: {exc}")
                    report["burst"][key] = {"operator": key, "error": str(exc)[-2000:]}
    finally:
        args.results_dir.mkdir(parents=True, exist_ok=True)
        (args.results_dir / "fairness.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.results_dir / "fairness.md").write_text(markdown(report))
        print(markdown(report))
        log(f"wrote {args.results_dir}/fairness.{{json,md}}; logs in {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
