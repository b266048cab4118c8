"""Admission benchmark: latency of a validating webhook role, alone and beside reconciles.

One operator (default fast backend) runs the memcached sample role for Memcached CRs and
serves a validating webhook role for them (`webhooks.yaml`), registered at its loopback
server against the local cluster. Measured:

1. AdmissionReviews POSTed straight to the webhook server (HTTPS), 1, 10 and 50 at a
   time: p50 and p99 of the answer's latency (the role run included);
2. 50 Memcached CRs created at once, without and then with 10 concurrent admission
   requests going on: create -> Successful p50/p95 and the time to converge, plus the
   admission p50/p99 meanwhile. Ten always in flight (a closed loop) take whatever CPU
   they can get; with `--admission-rate R` a burst with R admissions a second (an open
   loop, as a cluster's clients send them) follows the one alone, and another alone
   follows it (the slowdown is against the mean of the two). Each burst starts in an
   empty namespace with an idle operator: the CRs of the one before are deleted, then
   the bench waits until the garbage collector has removed their Deployments,
   ReplicaSets and Pods and the operator's tree has used under 5 % of a core for a
   second (the last burst's clean-up would otherwise overlap the next).

The webhook runs warm (`--webhook-runner warm`, the operator's default: its tasks in a
warm process) or as a full ansible-playbook per request (`--webhook-runner full`).

The CPU per request is the operator's process tree (the operator process itself, and
the role runs: the zygote and its forks), split, with the kernel's share; "cores busy" is
that CPU over the wall time, which shows whether requests waited for the cores or for
something else; the load average says what the rest of the machine was doing.

Usage: .venv/bin/python bench/admission.py [--requests 100] [--crs 50]
       [--only-admission] [--concurrency 1 10 50] [--webhook-workers N]
       [--webhook-runner warm|full] [--admission-rate R]
(`ANSIBLE_OPERATOR_TEST_KUBECONFIG` picks a running cluster, else the local one is used).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# Run as a script, sys.path[0] is bench/, whose queue.py would hide the standard
# library's `queue` (which the Kubernetes client imports).
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == REPO / "bench":
    del sys.path[0]
sys.path.insert(0, str(REPO / "tests"))

import aiohttp  # noqa: E402
import yaml  # noqa: E402
from kubernetes import client, config  # noqa: E402
from kubernetes.dynamic import DynamicClient  # noqa: E402
from kubernetes.dynamic.exceptions import InternalServerError  # noqa: E402
from support.kube import create_cr, release_custom_resources, wait_for  # noqa: E402
from support.operator import OperatorProcess, install_crd  # noqa: E402

VALIDATE = """\
- name: size is at most 10
  ansible.builtin.fail:
    msg: "size {{ size }} is larger than 10"
  when: operation != 'DELETE' and (size | default(0) | int) > 10
- name: warn about a size of 0
  ansible.builtin.set_fact:
    webhook_warnings: "size 0 runs nothing"
  when: (size | default(1) | int) == 0
"""
PATH = "/validate-cache-example-com-v1alpha1-memcached"


def _kubeconfig() -> Path:
    given = os.environ.get("ANSIBLE_OPERATOR_TEST_KUBECONFIG")
    if given:
        return Path(given)
    from runner.devtools.cluster.layout import default_state_dir
    from runner.devtools.cluster.local import LocalCluster

    cluster = LocalCluster(default_state_dir())
    cluster.up(progress=lambda m: print(m, file=sys.stderr))
    return cluster.kubeconfig


def _review(index: int, namespace: str) -> dict[str, Any]:
    obj = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": f"bench-{index}", "namespace": namespace},
        "spec": {"size": index % 12},
    }
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "cache.example.com", "version": "v1alpha1", "kind": "Memcached"},
            "resource": {
                "group": "cache.example.com",
                "version": "v1alpha1",
                "resource": "memcacheds",
            },
            "name": obj["metadata"]["name"],
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
        },
    }


def _session(limit: int) -> aiohttp.ClientSession:
    """A session to the webhook server (its certificate is the operator's own)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=limit))


async def _review_once(
    session: aiohttp.ClientSession, port: int, index: int, latencies: list[float]
) -> None:
    """Send one review and record its latency."""
    started = time.monotonic()
    async with session.post(
        f"https://127.0.0.1:{port}{PATH}", json=_review(index, "bench")
    ) as response:
        body = await response.json()
    assert "response" in body, body
    latencies.append(time.monotonic() - started)


async def _load(
    port: int, *, concurrency: int, requests: int | None, until: asyncio.Event | None = None
) -> list[float]:
    """Latencies of `requests` reviews sent `concurrency` at a time (or until `until`)."""
    latencies: list[float] = []
    counter = iter(range(10**9))

    async def worker(session: aiohttp.ClientSession) -> None:
        while True:
            index = next(counter)
            if requests is not None and index >= requests:
                return
            if until is not None and until.is_set():
                return
            await _review_once(session, port, index, latencies)

    async with _session(concurrency) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return latencies


def _tree_cpu(root: int) -> dict[str, float]:
    """CPU seconds of `root` and its descendants, reaped children included (the fast
    backend's runs are children of its zygote, which reaps them): `operator` (the
    process itself, all its threads) and `runs` (everything below it: the zygotes and
    the role runs they forked), each as user and sys time."""
    parents: dict[int, int] = {}
    times: dict[int, tuple[float, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        parents[pid] = int(fields[1])
        # utime, stime, cutime, cstime (fields 14-17 of proc(5))
        user, system, child_user, child_system = (int(v) / tick for v in fields[11:15])
        times[pid] = (user, system, child_user, child_system)
    user, system, child_user, child_system = times.get(root, (0.0, 0.0, 0.0, 0.0))
    totals = {"operator_user": user, "operator_sys": system}
    runs_user, runs_sys = child_user, child_system
    todo = [child for child, parent in parents.items() if parent == root]
    while todo:
        pid = todo.pop()
        values = times.get(pid, (0.0, 0.0, 0.0, 0.0))
        runs_user += values[0] + values[2]
        runs_sys += values[1] + values[3]
        todo += [child for child, parent in parents.items() if parent == pid]
    return {**totals, "runs_user": runs_user, "runs_sys": runs_sys}


def _cpu_report(
    before: dict[str, float], after: dict[str, float], count: int, seconds: float
) -> dict[str, float]:
    """CPU ms per request, split, and the cores the operator kept busy meanwhile."""
    used = {key: after[key] - before[key] for key in before}
    total = sum(used.values())
    return {
        "cpu_ms_per_request": round(1000 * total / count, 1),
        "operator_ms": round(1000 * (used["operator_user"] + used["operator_sys"]) / count, 1),
        "runs_ms": round(1000 * (used["runs_user"] + used["runs_sys"]) / count, 1),
        "sys_ms": round(1000 * (used["operator_sys"] + used["runs_sys"]) / count, 1),
        "cores_busy": round(total / seconds, 2) if seconds > 0 else 0.0,
    }


def _burst_cpu(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The operator tree's CPU seconds over a burst (reconciles, and any admissions)."""
    return {"cpu_s": round(sum(after[key] - before[key] for key in before), 1)}


def _load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def _percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "n": len(ordered),
        "p50_ms": round(1000 * statistics.median(ordered), 1),
        "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1),
    }


def _successful(item: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Successful" and c.get("status") == "True"
        for c in (item.get("status") or {}).get("conditions") or []
    )


def _create_admitted(memcached: Any, name: str, namespace: str) -> int:
    """Create the CR, again while the webhook's answer times out (the API server calls
    it for the create, and for the operator's own updates of the CR: on a machine busy
    enough, those queue past the role's timeout); returns the creates refused so."""
    refused = 0
    while True:
        try:
            create_cr(memcached, name, namespace, {"size": 1})
            return refused
        except InternalServerError as err:
            if "did not finish within" not in str(err.body) or refused >= 10:
                raise
            refused += 1


_DEPENDENTS = (("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("v1", "Pod"))


def _clear(memcached: Any, namespace: str, operator_pid: int) -> None:
    """Delete the CRs of earlier bursts and wait until they, their dependents (which the
    garbage collector deletes after them) and the operator's work on those deletions are
    gone: each burst starts from an empty namespace and an idle operator (more objects,
    or the last burst's clean-up, make a later burst slower on its own)."""
    memcached.delete(namespace=namespace, field_selector=f"metadata.namespace={namespace}")
    deadline = time.monotonic() + 300
    kinds = [
        memcached,
        *(memcached.client.resources.get(api_version=v, kind=k) for v, k in _DEPENDENTS),
    ]
    for kind in kinds:
        while kind.get(namespace=namespace).to_dict()["items"]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {kind.kind}s of {namespace} were not deleted in 300 s")
            time.sleep(0.2)
    while time.monotonic() < deadline:  # idle: under 5 % of a core for a second
        before = sum(_tree_cpu(operator_pid).values())
        time.sleep(1)
        if sum(_tree_cpu(operator_pid).values()) - before < 0.05:
            return


def _reconcile_burst(
    memcached: Any, namespace: str, count: int, prefix: str, operator_pid: int
) -> dict[str, float]:
    """Create `count` CRs and time each to `Successful`; with the operator tree's CPU
    seconds meanwhile (reconciles, and the admissions of a burst with load)."""
    cpu = _tree_cpu(operator_pid)
    created: dict[str, float] = {}
    start = time.monotonic()
    refused = 0
    for index in range(count):
        name = f"{prefix}-{index}"
        refused += _create_admitted(memcached, name, namespace)
        created[name] = time.monotonic()
    done: dict[str, float] = {}
    while len(done) < count and time.monotonic() - start < 900:
        now = time.monotonic()
        for item in memcached.get(namespace=namespace).to_dict()["items"]:
            name = item["metadata"]["name"]
            if name in created and name not in done and _successful(item):
                done[name] = now
        time.sleep(0.2)
    latencies = sorted(done[n] - created[n] for n in done)
    return {
        "converged": len(done),
        "p50_s": round(statistics.median(latencies), 2),
        "p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2),
        "total_s": round(time.monotonic() - start, 1),
        "creates_timed_out": refused,
        **_burst_cpu(cpu, _tree_cpu(operator_pid)),
    }


async def _load_at_rate(port: int, *, rate: float, until: asyncio.Event) -> list[float]:
    """Latencies of reviews sent `rate` a second (each on its own, not waiting for the
    others) until `until`."""
    latencies: list[float] = []
    async with _session(0) as session:
        sent: list[asyncio.Task[None]] = []
        start = time.monotonic()
        while not until.is_set():
            sent.append(asyncio.create_task(_review_once(session, port, len(sent), latencies)))
            next_at = start + len(sent) / rate
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        await asyncio.gather(*sent)
    return latencies


async def _burst_with_load(
    memcached: Any,
    namespace: str,
    count: int,
    port: int,
    operator_pid: int,
    *,
    rate: float | None = None,
) -> tuple[dict[str, float], list[float]]:
    await asyncio.to_thread(_clear, memcached, namespace, operator_pid)
    stop = asyncio.Event()
    if rate is None:
        load = asyncio.create_task(_load(port, concurrency=10, requests=None, until=stop))
    else:
        load = asyncio.create_task(_load_at_rate(port, rate=rate, until=stop))
    try:
        prefix = "loaded" if rate is None else "rate"
        burst = await asyncio.to_thread(
            _reconcile_burst, memcached, namespace, count, prefix, operator_pid
        )
    finally:
        stop.set()
    return burst, await load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=100, help="reviews per concurrency")
    parser.add_argument("--crs", type=int, default=50)
    parser.add_argument("--backend", default="fast", choices=("fast", "runner"))
    parser.add_argument("--only-admission", action="store_true", help="skip the reconcile bursts")
    parser.add_argument("--ansible-verbosity", default="2", help="the operator's flag")
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[1, 10, 50],
        metavar="N",
        help="requests at a time, one measurement each",
    )
    parser.add_argument(
        "--webhook-workers", default="", metavar="N", help="the operator's flag (its default)"
    )
    parser.add_argument(
        "--webhook-runner", default="warm", choices=("warm", "full"), help="the operator's flag"
    )
    parser.add_argument(
        "--admission-rate",
        type=float,
        default=None,
        metavar="R",
        help="also a burst of CRs with R admissions a second (an open loop)",
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)

    kubeconfig = _kubeconfig()
    api = config.new_client_from_config(config_file=str(kubeconfig))
    dyn = DynamicClient(api)
    memcached = install_crd(
        dyn,
        yaml.safe_load((REPO / "config/crd/bases/cache.example.com_memcacheds.yaml").read_text()),
    )
    namespace = f"bench-admission-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    work = Path(tempfile.mkdtemp(prefix="bench-admission-"))
    project = work / "project"
    (project / "roles" / "validate" / "tasks").mkdir(parents=True)
    (project / "roles" / "validate" / "tasks" / "main.yml").write_text(VALIDATE)
    (project / "watches.yaml").write_text(
        yaml.safe_dump(
            [
                {
                    "group": "cache.example.com",
                    "version": "v1alpha1",
                    "kind": "Memcached",
                    "role": str(REPO / "roles" / "memcached"),
                }
            ]
        )
    )
    (project / "webhooks.yaml").write_text(
        yaml.safe_dump(
            [
                {
                    "group": "cache.example.com",
                    "version": "v1alpha1",
                    "kind": "Memcached",
                    "validating": {"role": "validate", "timeout": "10s"},
                }
            ]
        )
    )
    operator = OperatorProcess(
        project,
        kubeconfig=kubeconfig,
        log=work / "operator.log",
        args=[
            "--webhook-bind-address",
            "127.0.0.1:0",
            "--ansible-backend",
            args.backend,
            "--ansible-verbosity",
            args.ansible_verbosity,
            *(["--webhook-workers", args.webhook_workers] if args.webhook_workers else []),
            "--webhook-runner",
            args.webhook_runner,
        ],
        env={"WATCH_NAMESPACE": namespace, "ANSIBLE_GATHERING": "explicit"},
    )
    results: dict[str, Any] = {
        "backend": args.backend,
        "webhook_runner": args.webhook_runner,
        "cpus": os.cpu_count(),
    }
    try:
        port = wait_for(lambda: _port(operator), timeout=120, message="webhook server")
        vwc = dyn.resources.get(
            api_version="admissionregistration.k8s.io/v1", kind="ValidatingWebhookConfiguration"
        )
        wait_for(
            lambda: any(PATH in str(item) for item in vwc.get().to_dict()["items"]),
            timeout=120,
            message="webhook registered",
        )
        # Warm-up, not counted: the zygote's first runs, or the warm runner's processes
        # started as requests wait (as many as --webhook-workers).
        asyncio.run(_load(port, concurrency=10, requests=60))
        results["runs_warm"] = "runs warm" in operator.log()
        print(f"the webhook runs warm: {results['runs_warm']}")
        for concurrency in args.concurrency:
            load_before = _load_average()
            cpu = _tree_cpu(operator.process.pid)
            started = time.monotonic()
            latencies = asyncio.run(
                _load(port, concurrency=concurrency, requests=max(args.requests, 2 * concurrency))
            )
            seconds = time.monotonic() - started
            cpu_after = _tree_cpu(operator.process.pid)
            results[f"admission_c{concurrency}"] = {
                **_percentiles(latencies),
                **_cpu_report(cpu, cpu_after, len(latencies), seconds),
                "load_average": f"{load_before} -> {_load_average()}",
            }
            print(f"admission, {concurrency} at a time: {results[f'admission_c{concurrency}']}")
        if args.only_admission:
            return _report(results, args.crs)
        pid = operator.process.pid
        _clear(memcached, namespace, pid)
        results["reconcile_alone"] = {
            **_reconcile_burst(memcached, namespace, args.crs, "alone", pid),
            "load_average": _load_average(),
        }
        print(f"{args.crs} CRs reconciling alone: {results['reconcile_alone']}")
        if args.admission_rate:
            # Right after the burst alone, and bracketed by another burst alone: the
            # machine's own drift between bursts shows.
            burst, latencies = asyncio.run(
                _burst_with_load(
                    memcached, namespace, args.crs, port, pid, rate=args.admission_rate
                )
            )
            results["reconcile_with_admission_rate"] = {
                **burst,
                "admissions": len(latencies),
                "rate": args.admission_rate,
                "load_average": _load_average(),
            }
            results["admission_rate_during_reconciles"] = _percentiles(latencies)
            print(f"{args.crs} CRs reconciling with {args.admission_rate}/s admissions: {burst}")
            print(f"admission meanwhile: {results['admission_rate_during_reconciles']}")
            _clear(memcached, namespace, pid)
            results["reconcile_alone_again"] = {
                **_reconcile_burst(memcached, namespace, args.crs, "again", pid),
                "load_average": _load_average(),
            }
            print(f"{args.crs} CRs reconciling alone again: {results['reconcile_alone_again']}")
        burst, latencies = asyncio.run(_burst_with_load(memcached, namespace, args.crs, port, pid))
        results["reconcile_with_admissions"] = {
            **burst,
            "admissions": len(latencies),
            "load_average": _load_average(),
        }
        results["admission_c10_during_reconciles"] = _percentiles(latencies)
        print(f"{args.crs} CRs reconciling with 10 concurrent admissions: {burst}")
        print(f"admission meanwhile: {results['admission_c10_during_reconciles']}")
    except BaseException:
        tail = operator.log().splitlines()[-30:]
        print("the operator's last log lines:", *tail, sep="\n", file=sys.stderr)
        raise
    finally:
        operator.stop()
        release_custom_resources(dyn, namespace)
        core.delete_namespace(namespace)
        shutil.rmtree(work, ignore_errors=True)
    return _report(results, args.crs)


def _exit_on_sigterm(_signum: int, _frame: object) -> None:
    raise SystemExit(143)  # unwinds through main's clean-up like Ctrl-C


def _report(results: dict[str, Any], crs: int) -> int:
    if "reconcile_alone" in results:
        alone, loaded = results["reconcile_alone"], results["reconcile_with_admissions"]
        results["reconcile_p50_slowdown"] = round(loaded["p50_s"] / alone["p50_s"] - 1, 3)
        at_rate = results.get("reconcile_with_admission_rate")
        again = results.get("reconcile_alone_again")
        if at_rate and again:
            # Against the mean of the bursts alone before and after it.
            results["reconcile_p50_slowdown_at_rate"] = round(
                at_rate["p50_s"] / ((alone["p50_s"] + again["p50_s"]) / 2) - 1, 3
            )
        for row in (alone, loaded, *([at_rate, again] if at_rate and again else [])):
            row["cores_busy"] = round(row["cpu_s"] / row["total_s"], 2)
        per_admission = results.get("admission_c10", {}).get("cpu_ms_per_request")
        if per_admission:
            # What the admissions took of the loaded burst's CPU, at their own rate alone.
            admissions_s = loaded["admissions"] * per_admission / 1000
            loaded["admissions_cpu_s"] = round(admissions_s, 1)
            loaded["reconciles_cpu_s"] = round(loaded["cpu_s"] - admissions_s, 1)
    print()
    print(
        "| load | p50 | p99 | CPU per request (operator + runs; sys) | cores busy | load average |"
    )
    print("|---|---|---|---|---|---|")
    rows = [
        (key, f"{key.removeprefix('admission_c')} at a time")
        for key in results
        if key.startswith("admission_c") and key[len("admission_c") :].isdigit()
    ]
    rows.append(("admission_c10_during_reconciles", f"10 at a time, {crs} CRs reconciling"))
    rate = results.get("reconcile_with_admission_rate", {}).get("rate")
    rows.append(("admission_rate_during_reconciles", f"{rate}/s, {crs} CRs reconciling"))
    for key, label in rows:
        row = results.get(key)
        if row:
            cpu = "-"
            if "cpu_ms_per_request" in row:
                cpu = (
                    f"{row['cpu_ms_per_request']} ms ({row['operator_ms']} + {row['runs_ms']};"
                    f" {row['sys_ms']})"
                )
            print(
                f"| {label} | {row['p50_ms']} ms | {row['p99_ms']} ms | {cpu} "
                f"| {row.get('cores_busy', '-')} | {row.get('load_average', '-')} |"
            )
    if "reconcile_alone" in results:
        print()
        print(
            "| reconciles | p50 create->Successful | p95 | converged in | operator CPU "
            "| cores busy | load average |"
        )
        print("|---|---|---|---|---|---|---|")
        for key, label in (
            ("reconcile_alone", "alone"),
            ("reconcile_with_admissions", "with 10 admissions in flight"),
            ("reconcile_with_admission_rate", f"with {rate} admissions/s"),
            ("reconcile_alone_again", "alone again"),
        ):
            row = results.get(key)
            if row is None:
                continue
            cpu = f"{row['cpu_s']} s"
            if "admissions_cpu_s" in row:
                cpu += (
                    f" ({row['admissions']} admissions ~{row['admissions_cpu_s']} s, "
                    f"reconciles ~{row['reconciles_cpu_s']} s)"
                )
            print(
                f"| {crs} CRs {label} | {row['p50_s']} s | {row['p95_s']} s | {row['total_s']} s "
                f"| {cpu} | {row['cores_busy']} | {row['load_average']} |"
            )
    out = REPO / "bench" / "results" / "admission.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _port(operator: OperatorProcess) -> int | None:
    assert operator.running(), operator.log()[-3000:]
    for line in operator.log().splitlines():
        if "webhook(s) on https://" in line:
            return int(line.rsplit(":", 1)[1].split()[0])
    return None


if __name__ == "__main__":
    sys.exit(main())
