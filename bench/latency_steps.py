"""Where the time of one reconcile goes: single Memcached CRs, one at a time, each split into steps.

Starts our operator (fast backend, debug log) against the local control plane, creates
`--count` CRs one after the other (each once the operator has settled after the one
before, as `bench.compare --mode latency` does) and, for each CR's first run, lines up:

- the benchmark's clock: the create request sent, `Successful` seen by a watch;
- the operator's debug log: the event queued, the reconcile started, the finalizer and
  the `Running` condition written, the run's data directory written and the run handed
  to the zygote, the run's end, the `Successful` condition written;
- the run's artifacts: the `command` artifact written, the job events' own timestamps
  (`playbook_on_start`, every task's start and end, `playbook_on_stats`);
- CPU seconds between two settled points (both runs of the CR): the operator process
  (`utime+stime` of its threads) and the zygote with the runs it forked and reaped
  (`utime+stime+cutime+cstime`).

It prints a table per CR and the median of each step over all but the first CR, and writes
the figures as JSON. `--profile DIR` runs the operator under cProfile (written at exit,
`DIR/operator.prof`) and sets `ANSIBLE_OPERATOR_ZYGOTE_PROFILE=DIR`, so that each run
writes its own profile there too. `--repo DIR` runs another checkout's code (its `runner`
package first on `PYTHONPATH`; the watches file, role and venv stay this checkout's): how
the regression in issue 31 was found.

    .venv/bin/python bench/latency_steps.py --count 10
    flock /tmp/ao-bench.lock .venv/bin/python bench/latency_steps.py --count 20 --out r.json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

# This directory holds queue.py, which would shadow the standard library's.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from kubernetes import client, config  # noqa: E402

from bench.compare.base import GROUP, PLURAL, REPO, VENV, VERSION, log  # noqa: E402
from bench.compare.operators import compile_bytecode, operator_env  # noqa: E402
from bench.compare.resources import CRWatcher, create_cr, install_crd, successful  # noqa: E402
from runner.devtools.cluster.layout import default_state_dir  # noqa: E402
from runner.devtools.cluster.local import LocalCluster  # noqa: E402
from runner.devtools.cluster.processes import free_port  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")

# Debug and info lines of the operator that mark a step; the first match per CR counts.
OPERATOR_MARKS: list[tuple[str, re.Pattern[str]]] = [
    ("queued", re.compile(r"^queued \S+ (?P<key>\S+)")),
    ("reconcile started", re.compile(r"^reconcile \S+ (?P<key>\S+): started")),
    ("finalizer written", re.compile(r"^reconcile \S+ (?P<key>\S+): finalizer added")),
    ("Running written", re.compile(r"^reconcile \S+ (?P<key>\S+): running Ansible")),
    ("inputs written", re.compile(r"^run \S+ (?P<key>\S+) (?P<ident>\S+): inputs written")),
    ("run prepared", re.compile(r"^run \S+ (?P<key>\S+) \S+: prepared")),
    ("run forked", re.compile(r"^run (?P<ident>\S+): started in the zygote")),
    ("run exited", re.compile(r"^run (?P<ident>\S+): exited")),
    ("artifacts done", re.compile(r"^run \S+ (?P<key>\S+) \S+: artifacts done")),
    ("run result back", re.compile(r"^reconcile \S+ (?P<key>\S+): run ended")),
    ("Successful written", re.compile(r"^reconcile \S+ (?P<key>\S+): succeeded in")),
]


def cpu_ticks(pid: int, *, children: bool) -> int:
    return _stat_fields(pid, children=children)[0]


def faults(pid: int, *, children: bool) -> int:
    """Minor page faults (those of reaped children too with `children`)."""
    return _stat_fields(pid, children=children)[1]


def _stat_fields(pid: int, *, children: bool) -> tuple[int, int]:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0, 0
    fields = text[text.rfind(")") + 2 :].split()
    ticks = sum(int(value) for value in fields[11 : 15 if children else 13])
    minflt = int(fields[7]) + (int(fields[8]) if children else 0)
    return ticks, minflt


def zygotes(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                if b"zygote" in cmdline:
                    found.append(int(child))
    return found


def parse_ts(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def operator_marks(log_path: Path, key: str) -> dict[str, float]:
    """The first time each step of OPERATOR_MARKS was logged for `key` (lines naming
    only a run's ident count for the ident of the key's first run)."""
    marks: dict[str, float] = {}
    ident = None
    for line in log_path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        message = str(record.get("msg", ""))
        for name, pattern in OPERATOR_MARKS:
            if name in marks:
                continue
            match = pattern.search(message)
            if match is None:
                continue
            found = match.groupdict()
            if "key" in found and found["key"] != key:
                continue
            if "key" not in found and (ident is None or found.get("ident") != ident):
                continue
            if "key" in found and found.get("ident"):
                ident = found["ident"]
            marks[name] = parse_ts(record["ts"])
    return marks


def run_marks(runner_dir: Path, namespace: str, name: str) -> dict[str, float]:
    """Timestamps of the CR's first run from its artifacts."""
    found = sorted(runner_dir.glob(f"**/{namespace}/{name}/artifacts/*/command"))
    runs = sorted(found, key=lambda path: path.stat().st_mtime)
    if not runs:
        return {}
    run_dir = runs[0].parent
    marks = {"command written": runs[0].stat().st_mtime}
    events = []
    for path in (run_dir / "job_events").glob("*.json"):
        with contextlib.suppress(ValueError, OSError):
            events.append(json.loads(path.read_text()))
    events.sort(key=lambda event: event.get("counter", 0))
    tasks = 0
    for event in events:
        kind, created = event.get("event"), event.get("created")
        if not created:
            continue
        when = parse_ts(created + "+00:00" if "+" not in created[10:] else created)
        if kind == "playbook_on_start":
            marks["playbook_on_start"] = when
        elif kind == "runner_on_start":
            tasks += 1
            marks[f"task {tasks} start"] = when
        elif kind in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            marks[f"task {tasks} end"] = when
        elif kind == "playbook_on_stats":
            marks["playbook_on_stats"] = when
    status = run_dir / "status"
    if status.exists():
        marks["status written"] = status.stat().st_mtime
    return marks


def steps(marks: dict[str, float]) -> list[tuple[str, float]]:
    """(step name, ms since the previous mark) in time order."""
    ordered = sorted(marks.items(), key=lambda item: item[1])
    out = []
    for (_, before), (name, at) in itertools.pairwise(ordered):
        out.append((name, (at - before) * 1000))
    return out


def start_operator(
    args: argparse.Namespace, namespace: str, kubeconfig: Path, work: Path
) -> tuple[subprocess.Popen[bytes], Path, int, Path]:
    health_port = free_port()
    runner_dir = work / "runner"
    # A copy: run in a checkout, `python -m` would import that checkout's runner/.
    project = work / "project"
    project.mkdir()
    shutil.copy(Path(args.project) / "watches.yaml", project / "watches.yaml")
    shutil.copytree(Path(args.project) / "roles", project / "roles")
    command = [
        str(VENV / "bin" / "python"),
        *(["-m", "cProfile", "-o", f"{args.profile}/operator.prof"] if args.profile else []),
        "-m",
        "runner.cli",
        "run",
        *("--watches-file", str(project / "watches.yaml")),
        *("--max-concurrent-reconciles", "4"),
        *("--metrics-bind-address", f"127.0.0.1:{free_port()}"),
        *("--health-probe-bind-address", f"127.0.0.1:{health_port}"),
        "--leader-elect=false",
        *("--proxy-port", "0", "--user-metrics-bind-address", "127.0.0.1:0"),
        *("--ansible-backend", "fast", "--zap-log-level", args.log_level),
    ]
    env = operator_env(namespace, kubeconfig, runner_dir)
    env["PYTHONPATH"] = str(Path(args.repo).resolve())
    if args.profile:
        env["ANSIBLE_OPERATOR_ZYGOTE_PROFILE"] = str(Path(args.profile).resolve())
    log_path = work / "operator.log"
    with log_path.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=project,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process, log_path, health_port, runner_dir


def wait_ready(process: subprocess.Popen[bytes], port: int, started: float) -> float:
    import urllib.request

    while time.monotonic() - started < 300:
        if process.poll() is not None:
            raise RuntimeError("the operator exited")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer,
        ):
            if answer.status == 200:
                return time.monotonic() - started
        time.sleep(0.02)
    raise RuntimeError("the operator was not ready in 300 s")


def settle(log_path: Path, quiet: float) -> int:
    """Wait until as many runs ended as started and none started for `quiet` s."""
    since, last = time.monotonic(), (-1, -1)
    while True:
        text = log_path.read_text(errors="replace")
        counts = (text.count("running Ansible"), len(re.findall(r": (succeeded|failed) in ", text)))
        if counts != last or counts[0] != counts[1]:
            since, last = time.monotonic(), counts
        elif time.monotonic() - since >= quiet:
            return counts[0]
        time.sleep(0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--repo", default=str(REPO), help="the checkout whose runner/ runs")
    parser.add_argument(
        "--project", default=str(REPO), help="the directory with watches.yaml and roles/"
    )
    parser.add_argument("--profile", help="cProfile the operator and each run into DIR")
    parser.add_argument(
        "--py-spy",
        type=Path,
        help="py-spy samples (raw) of the operator's tree over the CRs, threads holding the GIL",
    )
    parser.add_argument(
        "--log-level",
        default="debug",
        help="the operator's --zap-log-level (the operator's steps need debug)",
    )
    parser.add_argument("--quiet", type=float, default=2.0, help="settled: no run for this long")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--keep-work", action="store_true")
    args = parser.parse_args()
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)

    cluster = LocalCluster(default_state_dir())
    if not cluster.is_up():
        cluster.up(progress=log)
    compile_bytecode(Path(args.repo).resolve())
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    install_crd(api)
    custom = client.CustomObjectsApi(api)
    namespace = f"steps-{uuid.uuid4().hex[:5]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    watcher = CRWatcher(
        config.new_client_from_config(config_file=str(cluster.kubeconfig)), namespace, successful
    )
    watcher.start()
    work = Path(tempfile.mkdtemp(prefix="latency-steps-"))
    started = time.monotonic()
    process, log_path, port, runner_dir = start_operator(args, namespace, cluster.kubeconfig, work)
    results: list[dict[str, Any]] = []
    report: dict[str, Any] = {
        "command": " ".join([".venv/bin/python", "bench/latency_steps.py", *sys.argv[1:]]),
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        report["ready_s"] = round(wait_ready(process, port, started), 3)
        log(f"ready in {report['ready_s']} s")
        time.sleep(1.5)
        settle(log_path, args.quiet)
        spy = None
        if args.py_spy:
            spy = subprocess.Popen(
                [
                    str(VENV / "bin" / "py-spy"),
                    *("record", "--pid", str(process.pid), "--subprocesses", "--gil"),
                    *("--rate", "250", "--format", "raw", "--output", str(args.py_spy)),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(2)
        for index in range(args.count):
            name = f"m-{index}"
            pids = zygotes(process.pid)
            before = (
                cpu_ticks(process.pid, children=False),
                sum(cpu_ticks(z, children=True) for z in pids),
                sum(faults(z, children=True) for z in pids),
            )
            phase = watcher.new_phase()
            sent_wall = time.time()
            sent = create_cr(custom, watcher, namespace, name)
            while name not in phase.successful and time.monotonic() - sent < 120:
                time.sleep(0.001)
            latency = phase.successful[name] - sent
            runs = settle(log_path, args.quiet)
            after = (
                cpu_ticks(process.pid, children=False),
                sum(cpu_ticks(z, children=True) for z in pids),
                sum(faults(z, children=True) for z in pids),
            )
            marks = {"create sent": sent_wall, "Successful seen": sent_wall + latency}
            marks.update(operator_marks(log_path, f"{namespace}/{name}"))
            marks.update(run_marks(runner_dir, namespace, name))
            result = {
                "name": name,
                "latency_s": round(latency, 4),
                "runs_so_far": runs,
                "cpu_operator_s": (after[0] - before[0]) / CLK_TCK,
                "cpu_runs_s": (after[1] - before[1]) / CLK_TCK,
                "faults_runs": after[2] - before[2],
                "steps_ms": [(step, round(ms, 1)) for step, ms in steps(marks)],
            }
            results.append(result)
            log(
                f"{name}: {latency * 1000:.0f} ms; CPU operator {result['cpu_operator_s']:.2f} s,"
                f" runs {result['cpu_runs_s']:.2f} s, {result['faults_runs']} page faults"
            )
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
    finally:
        report["load_after"] = [round(x, 2) for x in os.getloadavg()]
        watcher.stop()
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(40)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        with contextlib.suppress(Exception):
            for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)[
                "items"
            ]:
                custom.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    item["metadata"]["name"],
                    {"metadata": {"finalizers": None}},
                )
            client.CoreV1Api(api).delete_namespace(namespace)
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"work directory kept: {work}")
    report["crs"] = results
    summarize(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


def summarize(report: dict[str, Any]) -> None:
    results = report["crs"]
    rest = results[1:] or results
    print(
        f"\nstart -> ready: {report.get('ready_s')} s; load {report['load_before']} -> "
        f"{report['load_after']}"
    )
    print(
        f"create -> Successful: first {results[0]['latency_s'] * 1000:.0f} ms, p50 of the "
        f"rest {statistics.median(r['latency_s'] for r in rest) * 1000:.0f} ms"
    )
    print(
        f"CPU per CR (both runs), median of the rest: operator "
        f"{statistics.median(r['cpu_operator_s'] for r in rest):.3f} s, runs "
        f"{statistics.median(r['cpu_runs_s'] for r in rest):.3f} s "
        f"({statistics.median(r['faults_runs'] for r in rest):.0f} page faults)"
    )
    by_step: dict[str, list[float]] = {}
    order: list[str] = []
    for result in rest:
        for step, ms in result["steps_ms"]:
            if step not in by_step:
                order.append(step)
            by_step.setdefault(step, []).append(ms)
    print("\n| step (ms since the previous one) | median | min | max |\n|---|---|---|---|")
    for step in order:
        values = by_step[step]
        print(
            f"| {step} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} |"
        )


if __name__ == "__main__":
    sys.exit(main())
