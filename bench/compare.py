"""Side by side: our ansible-operator against operator-sdk's Go ansible-operator.

Both run out of cluster against the local control plane (started, or reused when up), one
after the other, each in a fresh namespace, with the same watches.yaml, roles, custom
resources and environment (`ANSIBLE_GATHERING=explicit`, the same
`--max-concurrent-reconciles`, the same Python venv for Ansible, our `operator_sdk.util`
collection on `ANSIBLE_COLLECTIONS_PATH`). Ours runs with `--ansible-backend runner` and,
when `ansible-operator run --help` offers it, `--ansible-backend fast` as a third column.

Modes:
  create  (default) for each N in --counts: create N Memcached CRs (size 1) at once, time
          create -> Successful and create -> converged (Successful and status.nodes lists
          `size` pods), the time to converge all, Ansible runs per second, CPU seconds and
          peak RSS of the operator's process tree.
  steady  as create, then change every CR's spec once (size 1 -> 2) and time re-convergence.
  idle    converge --idle-count CRs of a no-op role, then CPU seconds and RSS over
          --idle-seconds with no changes.
  scale   --scale-count no-op CRs exist before the operator starts: time until all are
          Successful, peak RSS.
  latency --latency-count Memcached CRs created one at a time, each once the operator has
          settled after the one before: create -> Successful of a single CR with nothing
          queued, for the first CR after the operator started and over all of them.

How CPU and memory are measured: a sampler thread walks the operator's process tree every
0.25 s through /proc/<pid>/task/*/children. CPU of the tree at an instant is the sum over
its live processes of utime+stime+cutime+cstime (/proc/<pid>/stat): a process that has
exited and been waited for is in its parent's cutime/cstime, so nothing is lost or counted
twice as long as every process waits for its children (Go's exec, ansible-runner, Ansible
and Python's subprocess all do). A phase's CPU is the difference between two samples.
When the operator exits, os.wait4() gives its rusage, which covers it and every waited-for
descendant over its whole life: printed as "lifetime CPU" to check the sampled figure.
RSS: the operator process's own VmRSS (peak of the samples, and VmHWM), and separately the
sum of the RSS of all its descendants per sample (peak over samples; shared pages of
forked workers count once per process, so this overstates; the PSS sum, read from
smaps_rollup every 2 s, is reported beside it).

Usage: .venv/bin/python bench/compare.py [--mode create] [--counts 1,20,100]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime as dt
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402
from kubernetes import client, config, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

from runner.cluster import build  # noqa: E402
from runner.cluster.components import go_ansible_operator  # noqa: E402
from runner.cluster.local import LocalCluster, default_state_dir  # noqa: E402

GROUP, VERSION, PLURAL, KIND = "cache.example.com", "v1alpha1", "memcacheds", "Memcached"
GVK_LABEL = f"{GROUP}/{VERSION}, Kind={KIND}"
CRD_FILE = REPO / "config" / "crd" / "bases" / "cache.example.com_memcacheds.yaml"
VENV = REPO / ".venv"
# The Go operator's proxy (hard-coded in the kubeconfig it gives Ansible) and its
# user-metrics listener (hard-coded localhost:5050).
GO_FIXED_PORTS = (8888, 5050)
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_INTERVAL = 0.25

NOOP_WATCHES = [{"version": VERSION, "group": GROUP, "kind": KIND, "role": "noop"}]
NOOP_TASKS = """\
---
- name: Nothing to do
  ansible.builtin.debug:
    msg: "{{ ansible_operator_meta.name }}"
    verbosity: 3
"""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- process tree sampling -------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int] | None:
    """(utime+stime+cutime+cstime in ticks, rss bytes) of one process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    ticks = sum(int(value) for value in fields[11:15])
    return ticks, int(fields[21]) * PAGE


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        with contextlib.suppress(OSError):
            found += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return found


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _vm_hwm(pid: int) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


@dataclass
class Sample:
    t: float
    cpu_s: float
    root_rss: int
    desc_rss: int
    procs: int
    pss: int | None = None


class TreeSampler:
    """Samples CPU and RSS of `root` and its descendants in a thread."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.samples: list[Sample] = []
        self.descendants: set[int] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._count = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self, *, pss: bool = False) -> Sample:
        with self._lock:
            now = time.monotonic()
            root = _stat(self.root)
            if root is None:
                return self.samples[-1] if self.samples else Sample(now, 0, 0, 0, 0)
            ticks, root_rss = root
            desc_rss = 0
            pss_total = _pss(self.root) if pss else 0
            todo = _children(self.root)
            procs = 1
            while todo:
                pid = todo.pop()
                stat = _stat(pid)
                if stat is None:
                    continue
                self.descendants.add(pid)
                procs += 1
                ticks += stat[0]
                desc_rss += stat[1]
                if pss:
                    pss_total += _pss(pid)
                todo += _children(pid)
            result = Sample(now, ticks / CLK_TCK, root_rss, desc_rss, procs, pss_total or None)
            self.samples.append(result)
            return result

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL):
            self._count += 1
            self.sample(pss=self._count % 8 == 0)

    def window(self, start: float, end: float) -> dict[str, Any]:
        inside = [s for s in self.samples if start <= s.t <= end]
        if not inside:
            return {}
        pss = [s.pss for s in inside if s.pss]
        return {
            "peak_root_rss_mib": mib(max(s.root_rss for s in inside)),
            "mean_root_rss_mib": mib(statistics.fmean(s.root_rss for s in inside)),
            "peak_desc_rss_mib": mib(max(s.desc_rss for s in inside)),
            "peak_tree_pss_mib": mib(max(pss)) if pss else None,
            "peak_procs": max(s.procs for s in inside),
        }


def mib(value: float) -> float:
    return round(value / 2**20, 1)


# -- the operators -----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    for host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                return True
    return False


def wait_ports_free(ports: tuple[int, ...], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while busy := [port for port in ports if port_in_use(port)]:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"port(s) {busy} in use for {timeout:.0f} s; the Go operator needs 8888 (its "
                "proxy: the kubeconfig it gives Ansible hard-codes http://localhost:8888) "
                "and 5050 (its user-metrics listener, hard-coded too)"
            )
        time.sleep(2)


def our_backends() -> list[str]:
    """The --ansible-backend choices `ansible-operator run` offers ([] without the flag)."""
    text = subprocess.run(
        [str(VENV / "bin" / "python"), "-m", "runner.cli", "run", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    match = re.search(r"--ansible-backend \{([^}]*)\}", text)
    if match:
        return [choice.strip() for choice in match.group(1).split(",")]
    return ["runner", "fast"] if "--ansible-backend" in text else []


_OUR_RUN_END = re.compile(r"reconcile \S+ \S+: (?:succeeded|failed) in ")


@dataclass
class OperatorSpec:
    key: str  # go, runner, fast
    label: str
    kind: str  # go or ours
    backend: str | None = None


@dataclass
class Running:
    spec: OperatorSpec
    process: subprocess.Popen[bytes]
    log_path: Path
    metrics_port: int
    health_port: int
    sampler: TreeSampler
    runner_dir: Path
    namespace: str
    started: float
    rusage: Any = None
    returncode: int | None = None
    log_file: Any = None
    _offset: int = 0
    _started: int = 0
    _finished: int = 0

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode()

    def _scan(self) -> None:
        """Count run starts and ends in the log lines written since the last call."""
        with self.log_path.open("rb") as handle:
            handle.seek(self._offset)
            chunk = handle.read()
        end = chunk.rfind(b"\n") + 1
        self._offset += end
        for raw in chunk[:end].splitlines():
            line = raw.decode(errors="replace")
            if self.spec.kind == "ours":
                if "running Ansible" in line:
                    self._started += 1
                elif _OUR_RUN_END.search(line):
                    self._finished += 1
            elif '"logger":"runner"' in line and (
                "Ansible-runner exited" in line or '"level":"error"' in line
            ):
                self._finished += 1

    def runs(self) -> int:
        """Ansible runs started so far: ours from the log, the Go operator's from its
        `ansible_operator_reconciles` histogram (it times runner.Run, which starts one
        ansible-runner per call)."""
        self._scan()
        if self.spec.kind == "ours":
            return self._started
        text = self.metrics()
        found = re.findall(r"^ansible_operator_reconciles_count\{[^}]*\}\s+(\S+)$", text, re.M)
        return int(sum(float(value) for value in found))

    def finished(self) -> int:
        """Ansible runs finished so far (from the log)."""
        self._scan()
        return self._finished

    def alive(self) -> bool:
        """Without reaping it: stop_operator() reaps with wait4 to get the rusage."""
        if self.returncode is not None:
            return False
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, self.process.pid, flags) is None


def operator_env(namespace: str, kubeconfig: Path, runner_dir: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANSIBLE_", "K8S_AUTH_", "KUBE"))
        and key not in ("WATCH_NAMESPACE", "VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(
        {
            "KUBECONFIG": str(kubeconfig),
            "WATCH_NAMESPACE": namespace,
            # Both put ansible_python_interpreter=$VIRTUAL_ENV/bin/python3 in the inventory.
            "VIRTUAL_ENV": str(VENV),
            "PATH": f"{VENV / 'bin'}:{os.environ.get('PATH', '')}",
            "ANSIBLE_GATHERING": "explicit",
            "ANSIBLE_COLLECTIONS_PATH": str(REPO / "runner" / "collections"),
            "ANSIBLE_OPERATOR_RUNNER_DIR": str(runner_dir),
        }
    )
    return env


def start_operator(
    spec: OperatorSpec,
    *,
    go_binary: Path,
    project: Path,
    namespace: str,
    kubeconfig: Path,
    work: Path,
    concurrency: int,
) -> Running:
    metrics_port, health_port = free_port(), free_port()
    runner_dir = work / f"runner-{spec.key}"
    common = [
        "--watches-file",
        str(project / "watches.yaml"),
        "--max-concurrent-reconciles",
        str(concurrency),
        "--metrics-bind-address",
        f"127.0.0.1:{metrics_port}",
        "--health-probe-bind-address",
        f"127.0.0.1:{health_port}",
        "--leader-elect=false",
    ]
    if spec.kind == "go":
        wait_ports_free(GO_FIXED_PORTS)
        command = [str(go_binary), "run", *common]
    else:
        command = [
            str(VENV / "bin" / "python"),
            "-m",
            "runner.cli",
            "run",
            *common,
            "--proxy-port",
            "0",
            "--user-metrics-bind-address",
            "127.0.0.1:0",
        ]
        if spec.backend:
            command += ["--ansible-backend", spec.backend]
    env = operator_env(namespace, kubeconfig, runner_dir)
    if spec.kind == "ours":
        env["PYTHONPATH"] = str(REPO)
    log_path = work / f"operator-{spec.key}.log"
    log_file = log_path.open("wb")
    log_file.write(("$ " + " ".join(command) + "\n").encode())
    log_file.flush()
    process = subprocess.Popen(
        command,
        cwd=project,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    sampler = TreeSampler(process.pid)
    sampler.start()
    return Running(
        spec,
        process,
        log_path,
        metrics_port,
        health_port,
        sampler,
        runner_dir,
        namespace,
        time.monotonic(),
        log_file=log_file,
    )


def wait_ready(op: Running, timeout: float = 120) -> float:
    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{op.health_port}/readyz"
    while time.monotonic() < deadline:
        if not op.alive():
            raise RuntimeError(f"{op.spec.label} exited early:\n{op.log()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - op.started
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{op.spec.label} not ready after {timeout:.0f} s:\n{op.log()[-3000:]}")


def stop_operator(op: Running, timeout: float = 40) -> None:
    """SIGTERM, then SIGKILL; reap with wait4 to get the tree's rusage; kill leftovers."""
    descendants = set(op.sampler.descendants)
    op.sampler.stop()
    pid = op.process.pid
    if op.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while True:
            done, status, rusage = os.wait4(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                    os.kill(pid, signal.SIGKILL)
                done, status, rusage = os.wait4(pid, 0)
                break
            time.sleep(0.1)
        op.returncode = os.waitstatus_to_exitcode(status)
        op.process.returncode = op.returncode
        op.rusage = rusage
    # Children left behind (ansible-runner runs in their own sessions) must not go on
    # touching the cluster.
    for child in descendants:
        with contextlib.suppress(OSError):
            environ = Path(f"/proc/{child}/environ").read_bytes()
            if f"WATCH_NAMESPACE={op.namespace}".encode() in environ:
                os.kill(child, signal.SIGKILL)
    if op.log_file:
        op.log_file.close()


# -- custom resources ---------------------------------------------------------------------


def successful(obj: dict[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Successful" and cond.get("status") == "True":
            return True
    return False


def converged_memcached(obj: dict[str, Any]) -> bool:
    size = int((obj.get("spec") or {}).get("size", 1))
    nodes = (obj.get("status") or {}).get("nodes") or []
    return successful(obj) and len(nodes) == size


@dataclass
class Phase:
    """What the watcher records for one measured phase."""

    start: dict[str, float] = field(default_factory=dict)
    # The resourceVersion a patch returned: only later states of the CR count, so that the
    # status of the previous phase (still Successful) is not taken for this one's.
    start_rv: dict[str, int] = field(default_factory=dict)
    successful: dict[str, float] = field(default_factory=dict)
    converged: dict[str, float] = field(default_factory=dict)


def _rv(obj: dict[str, Any]) -> int:
    # etcd revisions: opaque to clients in general, integers on every real API server.
    return int(obj["metadata"].get("resourceVersion") or 0)


class CRWatcher:
    """Watches the namespace's Memcached CRs; notes when each gets Successful/converged."""

    def __init__(
        self, api: client.ApiClient, namespace: str, converged: Callable[[dict[str, Any]], bool]
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.is_converged = converged
        self.latest: dict[str, dict[str, Any]] = {}
        self.phase = Phase()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._synced.wait(30)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=70)

    def new_phase(self) -> Phase:
        with self._lock:
            self.phase = Phase()
            return self.phase

    def mark_start(self, name: str, when: float, written: dict[str, Any] | None = None) -> None:
        """The phase of `name` began at `when`; `written` is what the create/patch returned.

        The watch event may arrive before the write returns: the newer of the two objects
        is checked, so an object seen before the write never counts for this phase.
        """
        with self._lock:
            self.phase.start[name] = when
            obj = self.latest.get(name)
            if written is not None and (obj is None or _rv(written) >= _rv(obj)):
                obj = self.latest[name] = written
            if written is not None:
                self.phase.start_rv[name] = _rv(written)
            if obj is not None:
                self._check(name, obj, when)

    def _check(self, name: str, obj: dict[str, Any], now: float) -> None:
        phase = self.phase
        if name not in phase.start or _rv(obj) <= phase.start_rv.get(name, -1):
            return
        if name not in phase.successful and successful(obj):
            phase.successful[name] = now
        if name not in phase.converged and self.is_converged(obj):
            phase.converged[name] = now

    def _handle(self, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        name = obj["metadata"]["name"]
        with self._lock:
            self.latest[name] = obj
            self._check(name, obj, now)

    def _loop(self) -> None:
        resource_version = ""
        while not self._stop.is_set():
            try:
                if not resource_version:
                    listed = self.custom.list_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, PLURAL
                    )
                    for item in listed["items"]:
                        self._handle(item)
                    resource_version = listed["metadata"]["resourceVersion"]
                    self._synced.set()
                stream = watch.Watch()
                for event in stream.stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    resource_version=resource_version,
                    timeout_seconds=20,
                    allow_watch_bookmarks=True,
                ):
                    obj = event["object"]
                    if event["type"] == "ERROR":  # 410 Gone: list again
                        resource_version = ""
                        break
                    resource_version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._handle(obj)
                    if self._stop.is_set():
                        break
            except ApiException as exc:
                if exc.status == 410:
                    resource_version = ""
                else:
                    time.sleep(0.5)
            except Exception:
                time.sleep(0.5)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self.latest)


def create_crs(
    api: client.ApiClient, watcher: CRWatcher, namespace: str, count: int, prefix: str = "m"
) -> float:
    """Create `count` CRs at once (8 client threads); return when the burst began."""
    custom = client.CustomObjectsApi(api)
    began = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda index: create_cr(custom, watcher, namespace, f"{prefix}-{index}"),
                range(count),
            )
        )
    return began


def create_cr(
    custom: client.CustomObjectsApi, watcher: CRWatcher, namespace: str, name: str
) -> float:
    """Create one CR (size 1) and tell the watcher when; return when it was sent."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"size": 1},
    }
    sent = time.monotonic()
    written = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    watcher.mark_start(name, sent, written)
    return sent


def wait_converged(
    op: Running | None, watcher: CRWatcher, count: int, timeout: float, what: str
) -> bool:
    deadline = time.monotonic() + timeout
    last_report = time.monotonic()
    while time.monotonic() < deadline:
        done = len(watcher.phase.converged)
        if done >= count:
            return True
        if op is not None and not op.alive():
            raise RuntimeError(f"{op.spec.label} exited:\n{op.log()[-3000:]}")
        if time.monotonic() - last_report > 30:
            log(f"  {what}: {done}/{count} converged")
            last_report = time.monotonic()
        time.sleep(0.1)
    return False


def wait_settled(op: Running, quiet: float = 5, limit: float = 900) -> int:
    """Wait until every started Ansible run has finished and none has started for `quiet`
    seconds (at most `limit` s); return the runs started by then."""
    if quiet <= 0:
        return op.runs()
    deadline = time.monotonic() + limit
    runs, since = op.runs(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now_runs = op.runs()
        if now_runs != runs or op.finished() < now_runs:
            runs, since = now_runs, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return runs


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index], 3)


def latencies(phase: Phase, ends: dict[str, float]) -> list[float]:
    return [ends[name] - phase.start[name] for name in ends if name in phase.start]


# -- dependents ---------------------------------------------------------------------------

_NOISE_META = {
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "namespace",
}
_NOISE_ANNOTATIONS = {"deployment.kubernetes.io/revision"}


def _clean_meta(meta: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in meta.items() if k not in _NOISE_META}
    annotations = {
        k: v for k, v in (out.pop("annotations", None) or {}).items() if k not in _NOISE_ANNOTATIONS
    }
    if annotations:
        out["annotations"] = annotations
    if "ownerReferences" in out:
        out["ownerReferences"] = [
            {k: v for k, v in ref.items() if k != "uid"} for ref in out["ownerReferences"]
        ]
    return out


def _raw_list(call: Callable[..., Any], namespace: str) -> list[dict[str, Any]]:
    return list(json.loads(call(namespace, _preload_content=False).data)["items"])


def dependents(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    """Deployments, Services and ConfigMaps of the namespace without metadata noise."""
    state: dict[str, Any] = {}
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    for item in _raw_list(apps.list_namespaced_deployment, namespace):
        spec = item["spec"]
        (spec.get("template") or {}).get("metadata", {}).pop("creationTimestamp", None)
        state[f"Deployment/{item['metadata']['name']}"] = {
            "metadata": _clean_meta(item["metadata"]),
            "spec": spec,
        }
    for item in _raw_list(core.list_namespaced_service, namespace):
        spec = {k: v for k, v in item["spec"].items() if k not in ("clusterIP", "clusterIPs")}
        state[f"Service/{item['metadata']['name']}"] = {
            "metadata": _clean_meta(item["metadata"]),
            "spec": spec,
        }
    for item in _raw_list(core.list_namespaced_config_map, namespace):
        if item["metadata"]["name"] == "kube-root-ca.crt":
            continue
        state[f"ConfigMap/{item['metadata']['name']}"] = {
            "metadata": _clean_meta(item["metadata"]),
            "data": item.get("data"),
        }
    return state


def cr_state(crs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What of each CR should not depend on the operator's timing."""
    out = {}
    for name, obj in crs.items():
        status = obj.get("status") or {}
        out[f"{KIND}/{name}"] = {
            "finalizers": obj["metadata"].get("finalizers"),
            "status.nodes": len(status.get("nodes") or []),
            "status keys": sorted(status),
            "conditions": sorted(
                [c.get("type"), c.get("status"), c.get("reason")]
                for c in status.get("conditions") or []
            ),
        }
    return out


def diff_states(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    diffs = []
    for key in sorted(set(a) | set(b)):
        if key not in a:
            diffs.append(f"{key}: only in the second")
        elif key not in b:
            diffs.append(f"{key}: only in the first")
        elif a[key] != b[key]:
            diffs.append(f"{key}: {_first_difference(a[key], b[key])}")
    return diffs


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{index}]")
    return f"{path or '.'}: {json.dumps(a, default=str)} != {json.dumps(b, default=str)}"


# -- one operator, one N ------------------------------------------------------------------


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
        result["peak_root_rss_mib"] = mib(_vm_hwm(op.process.pid))
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
        result["peak_root_rss_mib"] = mib(_vm_hwm(op.process.pid))
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
        "p95_s": round(percentile(latencies_s, 95) or 0, 3),
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


# -- report -------------------------------------------------------------------------------

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


# -- main ---------------------------------------------------------------------------------


def install_crd(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)
    body = yaml.safe_load(CRD_FILE.read_text())
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as exc:
        if exc.status != 409:
            raise
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        crd = ext.read_custom_resource_definition(body["metadata"]["name"])
        conds = (crd.status and crd.status.conditions) or []
        if any(c.type == "Established" and c.status == "True" for c in conds):
            return
        time.sleep(0.2)
    raise RuntimeError("the Memcached CRD is not Established")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--mode", choices=("create", "steady", "idle", "scale", "latency"), default="create"
    )
    parser.add_argument("--latency-count", type=int, default=20)
    parser.add_argument("--counts", default="1,20,100", help="N for create and steady")
    parser.add_argument("--idle-count", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--scale-count", type=int, default=5000)
    parser.add_argument(
        "--scale-again",
        action="store_true",
        help="scale mode: once converged, change every CR's spec and converge again "
        "(2 x --scale-count reconciles; the operator's RSS by progress shows growth)",
    )
    parser.add_argument("--max-concurrent-reconciles", type=int, default=4)
    parser.add_argument(
        "--operators",
        default="go,runner,fast",
        help="which to run, in order: go, runner, fast (fast only where ours offers it)",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="per phase, seconds")
    parser.add_argument(
        "--settle",
        type=float,
        default=5,
        help="after convergence, wait until no run is in flight and none started for this "
        "many seconds (0: do not wait; the settled figures then equal the converged ones)",
    )
    parser.add_argument("--results-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--keep-work", action="store_true", help="keep logs in the work dir")
    args = parser.parse_args()

    if args.mode == "idle":
        counts = [args.idle_count]
    elif args.mode == "scale":
        counts = [args.scale_count]
    elif args.mode == "latency":
        counts = [args.latency_count]
    else:
        counts = [int(c) for c in args.counts.split(",") if c.strip()]

    backends = our_backends()
    wanted = [k.strip() for k in args.operators.split(",") if k.strip()]
    specs: list[OperatorSpec] = []
    for key in wanted:
        if key == "go":
            specs.append(OperatorSpec("go", "Go v1.42.0", "go"))
        elif key == "runner":
            label = "ours (runner)" if backends else "ours"
            specs.append(OperatorSpec("runner", label, "ours", "runner" if backends else None))
        elif key == "fast":
            if "fast" in backends:
                specs.append(OperatorSpec("fast", "ours (fast)", "ours", "fast"))
            else:
                log("ours has no --ansible-backend fast yet; running without that column")
        else:
            parser.error(f"unknown operator {key!r}")

    cluster = LocalCluster(default_state_dir())
    if not cluster.is_up():
        cluster.up(progress=log)
    go_binary = build.ensure_built([go_ansible_operator()], root=build.cache_root(), progress=log)[
        "ansible-operator-go"
    ]
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    api.configuration.connection_pool_maxsize = 16
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 16
    install_crd(api)
    work = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    ctx = Context(
        api=api,
        kubeconfig=cluster.kubeconfig,
        go_binary=go_binary,
        work=work,
        concurrency=args.max_concurrent_reconciles,
        timeout=args.timeout,
        idle_seconds=args.idle_seconds,
        settle=args.settle,
        scale_again=args.scale_again,
    )
    report: dict[str, Any] = {
        "mode": args.mode,
        "started": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}, Python "
        f"{platform.python_version()}",
        "concurrency": args.max_concurrent_reconciles,
        "idle_seconds": args.idle_seconds,
        "command": " ".join([".venv/bin/python", "bench/compare.py", *sys.argv[1:]]),
        "work_dir": str(work),
        "runs": {},
        "dependents": {},
        "compared": {},
    }
    failed = False
    try:
        for count in counts:
            log(f"N = {count} ({args.mode})")
            results: dict[str, dict[str, Any]] = {}
            for spec in specs:
                try:
                    if args.mode == "latency":
                        results[spec.key] = run_latency(ctx, spec, count=count)
                    else:
                        results[spec.key] = run_operator(ctx, spec, mode=args.mode, count=count)
                except Exception as exc:
                    failed = True
                    log(f"  {spec.label} failed: {exc}")
                    results[spec.key] = {"operator": spec.label, "error": str(exc)[-2000:]}
                    results[spec.key].setdefault("load_before", [])
                    results[spec.key].setdefault("load_after", [])
                if (results[spec.key].get("create") or {}).get("converged", count) < count:
                    failed = True
            report["runs"][str(count)] = results
            report["dependents"][str(count)] = compare_dependents(results)
            report["compared"][str(count)] = {
                r["operator"]: len(r.get("dependents") or {}) + len(r.get("crs") or {})
                for r in results.values()
            }
            print("\n" + section_markdown(report, str(count), results) + "\n", flush=True)
    finally:
        args.results_dir.mkdir(parents=True, exist_ok=True)
        slim = copy.deepcopy(report)
        for results in slim["runs"].values():
            for result in results.values():
                result.pop("dependents", None)
                result.pop("crs", None)
        (args.results_dir / f"compare-{args.mode}.json").write_text(
            json.dumps(slim, indent=2) + "\n"
        )
        (args.results_dir / f"compare-{args.mode}.md").write_text(markdown(report))
        log(f"wrote {args.results_dir}/compare-{args.mode}.{{json,md}}")
        if not args.keep_work and not failed:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"operator logs kept in {work}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
