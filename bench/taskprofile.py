"""Where a reconcile's time goes in the fast backend: one operator, a real-shaped role.

Starts `ansible-operator run` (fast backend) on a project (default bench/realroles: the
installer role) against the local cluster, then, --runs times: creates a CR in a
namespace of its own (the first reconcile), waits for the operator to settle, and
annotates the CR (the watch has watchAnnotationsChanges: a steady-state reconcile that
changes nothing). Each measured run is timed from the request to the operator's
"reconcile ... succeeded" log line.

Per task, from the run's job events: the time from its `playbook_on_task_start` to the
next task's (or `playbook_on_stats`), by kind: `skipped` (every result skipped),
`set_fact/debug`, `k8s`, `k8s_info`, `k8s_status`, `include/other`.

Profiles (--profile):
  cprofile  ANSIBLE_OPERATOR_ZYGOTE_PROFILE: each run's ansible-playbook writes a cProfile
            (raw/run-<pid>.prof); a pstats summary (cumulative and own time) is written
            per scenario (deterministic, but its overhead inflates many small calls);
  pyspy     `py-spy record --subprocesses --threads --idle --format raw` of the operator's
            whole process tree over the measured runs (sampling, no overhead in the
            profiled processes); the samples of each run's main thread and of the
            operator process are split into categories (bench/profilecategories.py);
  none      only the timings.

Output: <out>/summary.md (timings, per-task costs by kind, the breakdown) and the raw
data under <out>/raw/ (gitignored).

Usage: .venv/bin/python bench/taskprofile.py [--python .venv/bin/python] [--runs 3]
       [--profile pyspy|cprofile|none] [--out bench/profiles/NAME] [--project DIR]
       [--sample SAMPLE.yaml] [--rate 200]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pstats
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# bench/ itself has a queue.py: not on the path as the script's directory.
sys.path[:1] = [str(REPO)]


import yaml  # noqa: E402
from kubernetes import client, config  # noqa: E402
from kubernetes.dynamic import DynamicClient  # noqa: E402

from bench import profilecategories  # noqa: E402
from bench.realroles import event_time, read_events  # noqa: E402
from runner.devtools.cluster.layout import default_state_dir  # noqa: E402
from runner.devtools.cluster.local import LocalCluster  # noqa: E402
from runner.devtools.cluster.processes import free_port  # noqa: E402

KINDS = ("skipped", "set_fact/debug", "k8s", "k8s_info", "k8s_status", "include/other")
_RUN_END = re.compile(r"reconcile (\S+) (\S+): (succeeded|failed) in ([0-9.]+) s")
POKE = "bench.example.com/poke"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _kind(action: str, outcomes: Counter[str]) -> str:
    if outcomes and set(outcomes) == {"skipped"}:
        return "skipped"
    short = action.rsplit(".", 1)[-1]
    if short in ("set_fact", "debug"):
        return "set_fact/debug"
    if short in ("k8s", "k8s_info", "k8s_status"):
        return short
    return "include/other"


def task_costs(events: list[dict[str, Any]]) -> list[tuple[str, str, float]]:
    """(kind, task name, seconds) of each task of a run, in order."""
    starts = [
        (index, event)
        for index, event in enumerate(events)
        if event.get("event") in ("playbook_on_task_start", "playbook_on_stats")
    ]
    costs = []
    for (index, start), (next_index, end) in itertools.pairwise(starts):
        if start.get("event") != "playbook_on_task_start":
            continue
        data = start.get("event_data", {})
        outcomes: Counter[str] = Counter()
        for event in events[index + 1 : next_index]:
            name = str(event.get("event", ""))
            if name in ("runner_on_ok", "runner_item_on_ok"):
                outcomes["ok"] += 1
            elif name in ("runner_on_skipped", "runner_item_on_skipped"):
                outcomes["skipped"] += 1
            elif name.startswith(("runner_on_", "runner_item_on_")) and name != "runner_on_start":
                outcomes[name] += 1
        kind = _kind(str(data.get("resolved_action") or data.get("task_action") or ""), outcomes)
        costs.append((kind, str(data.get("task", "")), event_time(end) - event_time(start)))
    return costs


# -- the operator ---------------------------------------------------------------------------


class Operator:
    def __init__(self, args: argparse.Namespace, work: Path, namespaces: list[str]) -> None:
        self.health_port = free_port()
        self.runner_dir = work / "runner"
        self.log_path = work / "operator.log"
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("ANSIBLE_", "K8S_AUTH_", "KUBE"))
            and key not in ("WATCH_NAMESPACE", "VIRTUAL_ENV", "PYTHONPATH")
        }
        venv = Path(args.python).parent.parent
        env.update(
            {
                "KUBECONFIG": str(args.kubeconfig),
                "WATCH_NAMESPACE": ",".join(namespaces),
                "VIRTUAL_ENV": str(venv),
                "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}",
                "ANSIBLE_GATHERING": "explicit",
                "ANSIBLE_COLLECTIONS_PATH": str(REPO / "runner" / "collections"),
                "ANSIBLE_OPERATOR_RUNNER_DIR": str(self.runner_dir),
                "PYTHONPATH": str(REPO),
            }
        )
        if args.profile == "cprofile":
            env["ANSIBLE_OPERATOR_ZYGOTE_PROFILE"] = str(args.raw)
        command = [
            args.python,
            "-m",
            "runner.cli",
            "run",
            "--watches-file",
            str(args.project / "watches.yaml"),
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            f"127.0.0.1:{self.health_port}",
            "--leader-elect=false",
            "--proxy-port",
            "0",
            "--user-metrics-bind-address",
            "127.0.0.1:0",
            "--ansible-backend",
            "fast",
        ]
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command,
            cwd=args.project,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._offset = 0
        self.ends: list[tuple[float, str, float]] = []  # (seen at, key, seconds)
        self.starts = 0

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"operator exited:\n{self.log_path.read_text()[-3000:]}")
            try:
                url = f"http://127.0.0.1:{self.health_port}/readyz"
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("operator not ready")

    def scan(self) -> None:
        with self.log_path.open("rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read()
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        for raw in chunk[:end].splitlines():
            if b": running Ansible" in raw:
                self.starts += 1
            found = _RUN_END.search(raw.decode(errors="replace"))
            if found:
                if found[3] != "succeeded":
                    log(f"run failed: {raw.decode(errors='replace')}")
                self.ends.append((time.monotonic(), found[2], float(found[4])))

    def wait_run(self, key: str, after: int, timeout: float = 600) -> tuple[float, float]:
        """(seen at, seconds) of the first run of `key` ending after the first `after`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.scan()
            for seen, ended, seconds in self.ends[after:]:
                if ended == key:
                    return seen, seconds
            time.sleep(0.02)
        raise RuntimeError(f"no run of {key} ended in {timeout} s")

    def settle(self, quiet: float) -> None:
        """Until no run is in flight and none has ended for `quiet` seconds (follow-up
        runs of the dependents)."""
        while True:
            self.scan()
            last = self.ends[-1][0] if self.ends else 0.0
            if self.starts <= len(self.ends) and time.monotonic() - last >= quiet:
                return
            time.sleep(0.2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


def _ticks(pid: int, children: bool) -> int:
    """utime + stime (+ cutime + cstime: the reaped children's) of a process, in ticks."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(value) for value in fields[11 : 15 if children else 13])


def _zygotes(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and b"zygoteprocess" in (stat.parent / "cmdline").read_bytes():
                found.append(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return found


def cpu_seconds(operator_pid: int) -> float:
    """CPU of the operator process, its zygotes and the runs they reaped (the runs'
    module forks are reaped by the runs: in there too)."""
    ticks = _ticks(operator_pid, children=False)
    ticks += sum(_ticks(zygote, children=True) for zygote in _zygotes(operator_pid))
    return ticks / os.sysconf("SC_CLK_TCK")


def _run_events(runner_dir: Path, namespace: str, since: float) -> list[dict[str, Any]]:
    """The job events of the first complete run of `namespace` that started after `since`."""
    found = []
    for path in runner_dir.glob("**/artifacts/*/job_events"):
        if namespace not in str(path):
            continue
        events = read_events(path.parent)
        complete = events and events[-1].get("event") == "playbook_on_stats"
        if complete and event_time(events[0]) >= since:
            found.append((event_time(events[0]), events))
    return min(found, key=lambda item: item[0])[1] if found else []


# -- main -------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    parser.add_argument("--project", type=Path, default=REPO / "bench" / "realroles")
    parser.add_argument("--sample", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", choices=("pyspy", "cprofile", "none"), default="none")
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--settle", type=float, default=4.0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--summarize",
        action="store_true",
        help="only write <out>/summary.md again from <out>/raw (the last measurement)",
    )
    parser.add_argument(
        "--work-dir",
        default="",
        help="where the operator's run directory (artifacts, job events) goes (default: the"
        " temp dir, as the operator's /tmp/ansible-operator/runner)",
    )
    args = parser.parse_args()
    args.project = args.project.resolve()
    sample_path = args.sample or next((args.project / "config" / "samples").glob("*.yaml"))
    label = args.out.name if args.out else time.strftime("run-%Y%m%d-%H%M%S")
    args.out = (args.out or REPO / "bench" / "profiles" / label).resolve()
    args.raw = args.out / "raw"
    if args.summarize:
        measured = json.loads((args.raw / "measured.json").read_text())
        args.profile = "pyspy" if (args.raw / "pyspy.txt").exists() else args.profile
        if list(args.raw.glob("run-*.prof")):
            args.profile = "cprofile"
        _summary(args, measured)
        return 0
    shutil.rmtree(args.raw, ignore_errors=True)
    args.raw.mkdir(parents=True)

    cluster = LocalCluster(
        default_state_dir(),
    )
    cluster.up(progress=lambda message: log(message))
    args.kubeconfig = Path(cluster.kubeconfig)
    api = config.new_client_from_config(config_file=str(args.kubeconfig))
    dyn = DynamicClient(api)
    crd_body = yaml.safe_load(next((args.project / "config" / "crd").glob("*.yaml")).read_text())
    _install_crd(api, crd_body)
    group = crd_body["spec"]["group"]
    version = crd_body["spec"]["versions"][0]["name"]
    kind = crd_body["spec"]["names"]["kind"]
    resource = dyn.resources.get(api_version=f"{group}/{version}", kind=kind)
    sample = yaml.safe_load(sample_path.read_text())

    tag = uuid.uuid4().hex[:5]
    namespaces = [f"prof-{tag}-{index}" for index in range(args.runs)]
    core = client.CoreV1Api(api)
    for namespace in namespaces:
        core.create_namespace({"metadata": {"name": namespace}})
    work = Path(tempfile.mkdtemp(prefix="taskprofile-", dir=args.work_dir or None))
    operator = Operator(args, work, namespaces)
    spy = None
    measured: dict[str, list[dict[str, Any]]] = {"first": [], "steady": []}
    try:
        operator.wait_ready()
        log("operator ready")
        time.sleep(3)  # the zygote's warm-up
        if args.profile == "pyspy":
            spy = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "py-spy"),
                    "record",
                    "--pid",
                    str(operator.process.pid),
                    "--subprocesses",
                    "--threads",
                    "--idle",
                    "--full-filenames",
                    "--rate",
                    str(args.rate),
                    "--format",
                    "raw",
                    "--output",
                    str(args.raw / "pyspy.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=(args.raw / "pyspy.log").open("wb"),
            )
            time.sleep(2)
        for namespace in namespaces:
            name = sample["metadata"]["name"]
            key = f"{namespace}/{name}"
            body = json.loads(json.dumps(sample))
            body["metadata"]["namespace"] = namespace
            for scenario in ("first", "steady"):
                operator.settle(args.settle)
                count = len(operator.ends)
                begin, begin_wall = time.monotonic(), time.time()
                cpu = cpu_seconds(operator.process.pid)
                if scenario == "first":
                    resource.create(body=body, namespace=namespace)
                else:
                    resource.patch(
                        body={"metadata": {"annotations": {POKE: uuid.uuid4().hex}}},
                        name=name,
                        namespace=namespace,
                        content_type="application/merge-patch+json",
                    )
                seen, seconds = operator.wait_run(key, count)
                cpu = cpu_seconds(operator.process.pid) - cpu
                events = _run_events(operator.runner_dir, namespace, begin_wall)
                costs = task_costs(events)
                row = {
                    "key": key,
                    "wall_s": round(seen - begin, 3),
                    "cpu_s": round(cpu, 2),
                    "operator_s": seconds,
                    "ansible_s": round(event_time(events[-1]) - event_time(events[0]), 3)
                    if events
                    else None,
                    "tasks": len(costs),
                    "pid": next((e["pid"] for e in events if e.get("pid")), None),
                    "costs": costs,
                }
                measured[scenario].append(row)
                log(
                    f"{scenario} {key}: {row['wall_s']} s, CPU {row['cpu_s']} s, "
                    f"{len(costs)} tasks, ansible {row['ansible_s']} s"
                )
        operator.settle(args.settle)
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            try:
                spy.wait(120)
            except subprocess.TimeoutExpired:
                spy.kill()
        operator.stop()
        shutil.copy(operator.log_path, args.raw / "operator.log")
        for namespace in namespaces:
            _drop_namespace(dyn, core, namespace)
        shutil.rmtree(work, ignore_errors=True)
    (args.raw / "measured.json").write_text(json.dumps(measured, indent=1))
    meta = {"argv": sys.argv, "runs": args.runs, "load": list(os.getloadavg())}
    (args.raw / "meta.json").write_text(json.dumps(meta))
    _summary(args, measured)
    return 0


def _install_crd(api: Any, body: dict[str, Any]) -> None:
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(body)
    except client.rest.ApiException as exc:
        if exc.status != 409:
            raise
    for _ in range(100):
        crd = ext.read_custom_resource_definition(body["metadata"]["name"])
        if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []):
            return
        time.sleep(0.2)


def _drop_namespace(dyn: Any, core: Any, namespace: str) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from support.kube import release_custom_resources

    try:
        release_custom_resources(dyn, namespace)
        core.delete_namespace(namespace)
    except Exception as exc:  # best effort
        log(f"cleanup of {namespace}: {exc}")


# -- summary ----------------------------------------------------------------------------------


def _per_kind(rows: list[dict[str, Any]]) -> dict[str, tuple[int, float, float]]:
    """kind -> (tasks per run, median ms per task, total ms per run) over the runs."""
    result = {}
    for kind in KINDS:
        per_run_ms = []
        counts = []
        each = []
        for row in rows:
            costs = [cost for k, _, cost in row["costs"] if k == kind]
            counts.append(len(costs))
            per_run_ms.append(sum(costs) * 1000)
            each += [cost * 1000 for cost in costs]
        if each:
            result[kind] = (
                round(statistics.median(counts)),
                statistics.median(each),
                statistics.median(per_run_ms),
            )
    return result


def _summary(args: argparse.Namespace, measured: dict[str, list[dict[str, Any]]]) -> None:
    meta_path = args.raw / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    load = meta.get("load")
    argv = meta.get("argv") or sys.argv
    runs = meta.get("runs") or max(len(rows) for rows in measured.values())
    out = [f"# {args.out.name}", "", f"`{' '.join(argv)}`", ""]
    core = subprocess.run(
        [args.python, "-c", "import ansible.release as r; print(r.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    out.append(
        f"ansible-core {core}; {runs} runs per scenario; profile: {args.profile}; "
        + (
            f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
            if load
            else "load average when measured: not recorded"
        )
    )
    out.append("")
    out.append("| scenario | wall p50 | wall min | CPU p50 | Ansible p50 | tasks |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    for scenario, rows in measured.items():
        if not rows:
            continue
        wall = statistics.median(row["wall_s"] for row in rows)
        ansible = statistics.median(row["ansible_s"] or 0 for row in rows)
        low = min(row["wall_s"] for row in rows)
        cpu = statistics.median(row["cpu_s"] for row in rows)
        out.append(
            f"| {scenario} | {wall:.3f} s | {low:.3f} s | {cpu:.2f} s | {ansible:.3f} s "
            f"| {rows[0]['tasks']} |"
        )
    out += ["", "Per task, by kind (median over all tasks of the kind in all runs):", ""]
    out.append("| scenario | kind | tasks/run | ms/task p50 | ms/run |")
    out.append("| --- | --- | --- | --- | --- |")
    for scenario, rows in measured.items():
        for kind, (count, each, total) in _per_kind(rows).items():
            out.append(f"| {scenario} | {kind} | {count} | {each:.1f} | {total:.0f} |")
    if args.profile == "pyspy" and (args.raw / "pyspy.txt").exists():
        out += ["", *profilecategories.report(args.raw / "pyspy.txt", measured)]
    if args.profile == "cprofile":
        out += ["", *_cprofile_summary(args.raw)]
    (args.out / "summary.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


def _cprofile_summary(raw: Path) -> list[str]:
    files = sorted(raw.glob("run-*.prof"))
    if not files:
        return ["(no cProfile data)"]
    import io

    buffer = io.StringIO()
    stats = pstats.Stats(*(str(path) for path in files), stream=buffer)
    lines = [f"cProfile of {len(files)} runs (sum), top 40 by own time:", "", "```"]
    stats.sort_stats("tottime").print_stats(40)
    lines += buffer.getvalue().splitlines()
    buffer.seek(0)
    buffer.truncate()
    lines += ["```", "", "top 60 by cumulative time:", "", "```"]
    stats.sort_stats("cumulative").print_stats(60)
    lines += buffer.getvalue().splitlines()
    lines.append("```")
    categories = profilecategories.cprofile_categories(files)
    lines += ["", *categories]
    return lines


if __name__ == "__main__":
    sys.exit(main())
