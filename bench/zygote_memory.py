"""Memory of the fast backend's zygote over many runs: does it grow?

The zygote is a long-lived process that forks one child per run; anything it keeps per
run (caches keyed by run, file descriptors, module state) would grow with the number of
runs an operator has done. Runs the trivial role `--runs` times (default 5,000) through
`FastBackend`, one after the other, and samples the zygote's RSS and PSS (and this
process's RSS, the operator side of the backend) every `--every` runs.

Usage: .venv/bin/python bench/zygote_memory.py [--runs 5000] [--every 500] [--json out]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.ansible.bundledcollection import bundled_collections_path  # noqa: E402
from runner.ansible.fastbackend import FastBackend  # noqa: E402
from runner.ansible.inputs import RunRequest  # noqa: E402
from runner.structs.gvk import GVK  # noqa: E402

KIND = GVK("bench.example.com", "v1alpha1", "Trivial")
TASKS = """\
- name: say hello
  ansible.builtin.debug:
    msg: "hello {{ ansible_operator_meta.name }}"
- name: set a fact
  ansible.builtin.set_fact:
    greeting: "{{ ansible_operator_meta.name | upper }}"
"""


def _zygotes() -> list[int]:
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == me and b"runner.ansible.fastbackend.zygoteprocess" in cmdline:
            found.append(int(entry.name))
    return found


def _kib(pid: int | str, field: str, source: str = "status") -> int:
    for line in Path(f"/proc/{pid}/{source}").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def _sample(runs: int, started: float) -> dict[str, Any]:
    (zygote,) = _zygotes()
    return {
        "runs": runs,
        "seconds": round(time.monotonic() - started, 1),
        "zygote_rss_mib": round(_kib(zygote, "VmRSS") / 1024, 1),
        "zygote_pss_mib": round(_kib(zygote, "Pss", "smaps_rollup") / 1024, 1),
        "zygote_fds": len(os.listdir(f"/proc/{zygote}/fd")),
        "backend_rss_mib": round(_kib("self", "VmRSS") / 1024, 1),
    }


async def _main(args: argparse.Namespace) -> int:
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = str(bundled_collections_path())
    work = Path(tempfile.mkdtemp(prefix="bench-zygote-"))
    role = work / "roles" / "trivial"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text(TASKS)
    backend = FastBackend(
        work / "runner", env={"ANSIBLE_GATHERING": "explicit"}, log_events="nothing"
    )
    samples = []
    started = time.monotonic()
    try:
        for number in range(args.runs + 1):
            result = await backend.run(
                RunRequest(
                    gvk=KIND,
                    namespace="bench",
                    name=f"cr-{number % 50}",
                    role=role,
                    extravars={"ansible_operator_meta": {"name": "x", "namespace": "bench"}},
                )
            )
            assert not result.failed and result.error is None, result.failure_message
            if number % args.every == 0:
                samples.append(_sample(number, started))
                print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
    finally:
        await backend.close()
        shutil.rmtree(work, ignore_errors=True)
    print("| runs | seconds | zygote RSS (MiB) | zygote PSS (MiB) | zygote fds | backend RSS |")
    print("|---|---|---|---|---|---|")
    for s in samples:
        print(
            f"| {s['runs']} | {s['seconds']} | {s['zygote_rss_mib']} | {s['zygote_pss_mib']} "
            f"| {s['zygote_fds']} | {s['backend_rss_mib']} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(samples, indent=2))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--json", default="")
    return asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
