"""Start -> ready of our operator, measured `--times` times: wall and CPU seconds.

Each time: our operator (`python -m runner.cli run`, the sample's watches.yaml, fast
backend, debug log) starts against the local control plane in a fresh namespace holding
`--crs` Memcached CRs, and the script polls `/readyz` every 20 ms. Reported per start:
start -> ready (wall), the CPU seconds the operator process had used by then
(`utime+stime`, its threads; the zygote's are not in it), the same for its whole tree,
and start -> the zygote's warm-up done (its "ready" debug line). `--importtime FILE`
adds `-X importtime` (written to FILE for the last start), `--profile FILE` runs the
last start under cProfile (written when it stops).

    .venv/bin/python bench/startup.py --times 5
    .venv/bin/python bench/startup.py --times 1 --importtime /tmp/imports.txt
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

# This directory holds queue.py, which would shadow the standard library's.
sys.path[0] = str(Path(__file__).resolve().parents[1])

from kubernetes import client, config  # noqa: E402

from bench.compare.base import REPO, VENV, log  # noqa: E402
from bench.compare.operators import compile_bytecode, operator_env  # noqa: E402
from bench.compare.resources import install_crd  # noqa: E402
from runner.devtools.cluster.layout import default_state_dir  # noqa: E402
from runner.devtools.cluster.local import LocalCluster  # noqa: E402
from runner.devtools.cluster.processes import free_port  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int, *, tree: bool) -> float:
    """CPU seconds of `pid` (with `tree`: and of its live descendants and reaped children)."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            text = Path(f"/proc/{current}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        total += sum(int(value) for value in fields[11 : 15 if tree else 13])
        if tree:
            for task in Path(f"/proc/{current}/task").iterdir():
                with contextlib.suppress(OSError):
                    pids += [int(c) for c in (task / "children").read_text().split()]
    return total / CLK_TCK


def zygote_ready_s(log_path: Path, started_wall: float) -> float | None:
    for line in log_path.read_text(errors="replace").splitlines():
        if "zygote" in line and " ready in " in line and line.startswith("{"):
            with contextlib.suppress(ValueError, KeyError):
                stamp = dt.datetime.fromisoformat(json.loads(line)["ts"]).timestamp()
                return stamp - started_wall
    return None


def start_once(
    args: argparse.Namespace, namespace: str, kubeconfig: Path, work: Path, *, last: bool
) -> dict[str, float | None]:
    health_port = free_port()
    python = [str(VENV / "bin" / "python")]
    if last and args.callgrind:
        python = [
            *("valgrind", "--tool=callgrind", "--trace-children=no", "--separate-threads=yes"),
            f"--callgrind-out-file={work / 'callgrind.out'}",
            *python,
        ]
    if last and args.importtime:
        python += ["-X", "importtime"]
    if last and args.profile:
        python += ["-m", "cProfile", "-o", str(args.profile)]
    command = [
        *python,
        *("-m", "runner.cli", "run"),
        *("--watches-file", str(work / "watches.yaml")),
        *("--metrics-bind-address", f"127.0.0.1:{free_port()}"),
        *("--health-probe-bind-address", f"127.0.0.1:{health_port}"),
        "--leader-elect=false",
        *("--proxy-port", "0", "--user-metrics-bind-address", "127.0.0.1:0"),
        *("--ansible-backend", "fast", "--zap-log-level", "debug"),
    ]
    # A copy of the project: run in the checkout, `python -m` would import its runner/
    # from the working directory rather than PYTHONPATH's (the same here, not with --repo).
    shutil.copy(REPO / "watches.yaml", work / "watches.yaml")
    shutil.copytree(REPO / "roles", work / "roles", dirs_exist_ok=True)
    env = operator_env(namespace, kubeconfig, work / "runner")
    env["PYTHONPATH"] = str(Path(args.repo).resolve())
    log_path = work / "operator.log"
    stderr = open(args.importtime, "wb") if last and args.importtime else subprocess.STDOUT  # noqa: SIM115
    with log_path.open("wb") as out:
        started_wall = time.time()
        started = time.monotonic()
        process = subprocess.Popen(
            command, cwd=work, env=env, stdout=out, stderr=stderr, start_new_session=True
        )
    ready = None
    url = f"http://127.0.0.1:{health_port}/readyz"
    try:
        while time.monotonic() - started < 600 and process.poll() is None:
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(url, timeout=2) as answer,
            ):
                if answer.status == 200:
                    ready = time.monotonic() - started
                    break
            # Under callgrind only instructions count: few polls, few requests served.
            time.sleep(0.5 if last and args.callgrind else 0.02)
        cpu_ready, tree_ready = cpu_s(process.pid, tree=False), cpu_s(process.pid, tree=True)
        instructions: int | None = None
        if last and args.callgrind and ready is not None:
            subprocess.run(
                ["callgrind_control", "--dump=ready", str(process.pid)],
                check=False,
                stdout=subprocess.DEVNULL,
            )
            instructions = _callgrind_total(work)
        deadline = time.monotonic() + 120
        while (
            process.poll() is None
            and zygote_ready_s(log_path, started_wall) is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(40)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if not isinstance(stderr, int):
            stderr.close()
        if ready is None:
            log(log_path.read_text(errors="replace")[-2000:])
        elif args.show_log:
            for line in log_path.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError, KeyError):
                    record = json.loads(line)
                    at = dt.datetime.fromisoformat(record["ts"]).timestamp() - started_wall
                    print(f"{at:7.3f} {record['msg'][:110]}")
    counted = {"main_thread_instructions_until_ready": instructions} if instructions else {}
    return {
        **counted,
        "ready_s": ready,
        "cpu_operator_until_ready_s": cpu_ready,
        "cpu_tree_until_ready_s": tree_ready,
        "zygote_ready_s": zygote_ready_s(log_path, started_wall),
    }


def _callgrind_total(work: Path) -> int | None:
    """Instructions of the main thread until the dump at readiness (the thread that
    makes the operator ready; others run beside it)."""
    for path in sorted(work.glob("callgrind.out*-01")):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--times", type=int, default=5)
    parser.add_argument("--crs", type=int, default=0, help="CRs existing before each start")
    parser.add_argument("--repo", default=str(REPO), help="the checkout whose runner/ runs")
    parser.add_argument("--show-log", action="store_true", help="print each start's log lines")
    parser.add_argument("--importtime", type=Path, help="-X importtime of the last start")
    parser.add_argument("--profile", type=Path, help="cProfile of the last start")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="run the last start under valgrind's callgrind: main-thread instructions until ready "
        "(the machine's load does not change them; the start takes some 50 times longer)",
    )
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    cluster = LocalCluster(default_state_dir())
    if not cluster.is_up():
        cluster.up(progress=log)
    compile_bytecode(Path(args.repo).resolve())
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    install_crd(api)
    namespace = f"startup-{uuid.uuid4().hex[:5]}"
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": namespace}})
    results = []
    load_before = [round(x, 2) for x in os.getloadavg()]
    try:
        for index in range(args.crs):
            custom.create_namespaced_custom_object(
                "cache.example.com",
                "v1alpha1",
                namespace,
                "memcacheds",
                {
                    "apiVersion": "cache.example.com/v1alpha1",
                    "kind": "Memcached",
                    "metadata": {"name": f"m-{index}"},
                    "spec": {"size": 1},
                },
            )
        for index in range(args.times):
            with tempfile.TemporaryDirectory(prefix="startup-") as work:
                result = start_once(
                    args, namespace, cluster.kubeconfig, Path(work), last=index == args.times - 1
                )
            results.append(result)
            log(json.dumps({k: round(v, 3) if v is not None else None for k, v in result.items()}))
    finally:
        with contextlib.suppress(Exception):
            for item in custom.list_namespaced_custom_object(
                "cache.example.com", "v1alpha1", namespace, "memcacheds"
            )["items"]:
                custom.patch_namespaced_custom_object(
                    "cache.example.com",
                    "v1alpha1",
                    namespace,
                    "memcacheds",
                    item["metadata"]["name"],
                    {"metadata": {"finalizers": None}},
                )
        core.delete_namespace(namespace)
    keys = list(dict.fromkeys(key for result in results for key in result))
    summary = {
        key: round(statistics.median(values), 3)
        for key in keys
        if (values := [r[key] for r in results if r.get(key) is not None])
    }
    print(
        json.dumps(
            {
                "median": summary,
                "load_before": load_before,
                "load_after": [round(x, 2) for x in os.getloadavg()],
            }
        )
    )
    if args.out:
        args.out.write_text(json.dumps({"runs": results, "median": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
