"""`python -m bench.compare`: run the comparison (see the package docstring)."""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from kubernetes import config

from runner.devtools.cluster import build
from runner.devtools.cluster.components import go_ansible_operator
from runner.devtools.cluster.layout import default_state_dir
from runner.devtools.cluster.local import LocalCluster

from . import __doc__ as DESCRIPTION
from .base import REPO, log
from .operators import OperatorSpec, compile_bytecode, our_backends
from .report import compare_dependents, markdown, section_markdown
from .resources import install_crd
from .workloads import Context, run_latency, run_operator


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.compare",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    if "go" in wanted and importlib.util.find_spec("ansible_runner_http") is None:
        # Without it every Go reconcile fails late, with "did not receive
        # playbook_on_stats event" (the Go operator gets Ansible's events through it).
        parser.error(
            "the Go operator needs the ansible-runner-http plugin in this venv: "
            "`make bench-compare-deps` (or pip install -e '.[bench]'), "
            "or leave it out with --operators runner,fast"
        )
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
    compile_bytecode()
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
        "command": " ".join([".venv/bin/python", "-m", "bench.compare", *sys.argv[1:]]),
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
