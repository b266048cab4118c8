"""Memory of one Ansible run: what the memory limit of runs (runner/operator/memory.py)
measures, for a small role and a larger one.

Runs `--concurrent` runs at a time, `--rounds` times, of each role through `FastBackend`
(forked from the warm zygote, as the operator runs them), and samples the runs in this
process's tree with `RunMemory.sample` every 50 ms: each run's peak RSS, PSS and USS
(private memory: what one more run adds to the cgroup). Reports the median and the
largest peak per run. The roles need no cluster: `small` is two debug/set_fact tasks;
`larger` templates a 2,000-item list, loops over 200 items, and includes a second task
file, with more modules and plugins loaded.

Usage: .venv/bin/python bench/run_memory.py [--concurrent 4] [--rounds 5]
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# bench/ holds modules named like the standard library's (queue.py): off the path.
sys.path[:1] = [str(REPO)]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402

from runner.ansible.bundledcollection import bundled_collections_path  # noqa: E402
from runner.ansible.fastbackend import FastBackend  # noqa: E402
from runner.ansible.inputs import RunRequest  # noqa: E402
from runner.operator.memory import RunMemory  # noqa: E402
from runner.structs.gvk import GVK  # noqa: E402
from runner.util.memlimit import CgroupMemory, TreeMemory  # noqa: E402

KIND = GVK("bench.example.com", "v1alpha1", "Memory")
ROLES = {
    "small": {
        "main.yml": """\
- name: say hello
  ansible.builtin.debug:
    msg: "hello {{ ansible_operator_meta.name }}"
- name: set a fact
  ansible.builtin.set_fact:
    greeting: "{{ ansible_operator_meta.name | upper }}"
"""
    },
    "larger": {
        "main.yml": """\
- name: build a list of 2,000 items
  ansible.builtin.set_fact:
    items_big: "{{ range(2000) | map('string') | map('regex_replace', '^', 'item-') | list }}"
- name: render a template of them
  ansible.builtin.set_fact:
    rendered: "{{ lookup('ansible.builtin.template', 'big.j2') }}"
- name: loop over 200 items
  ansible.builtin.set_fact:
    acc: "{{ (acc | default([])) + [item | hash('sha1')] }}"
  loop: "{{ items_big[:200] }}"
- name: more tasks
  ansible.builtin.include_tasks: more.yml
- name: report
  ansible.builtin.debug:
    msg: "{{ rendered | length }} characters, {{ acc | length }} hashes"
""",
        "more.yml": """\
- name: json round trip
  ansible.builtin.set_fact:
    again: "{{ items_big | to_json | from_json | length }}"
- name: a dict from the list
  ansible.builtin.set_fact:
    mapping: "{{ dict(items_big[:500] | zip(range(500))) }}"
- name: assert
  ansible.builtin.assert:
    that: again | int == 2000
""",
        "big.j2": "{% for i in items_big %}{{ i }}: {{ i | b64encode }}\n{% endfor %}",
    },
}


def write_role(work: Path, name: str) -> Path:
    role = work / "roles" / name
    for file, text in ROLES[name].items():
        folder = role / ("templates" if file.endswith(".j2") else "tasks")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / file).write_text(text)
    return role


async def measure(backend: FastBackend, work: Path, name: str, args: argparse.Namespace) -> dict:
    role = write_role(work, name)
    fake_cgroup = CgroupMemory(2, work, 1 << 40)  # not read: only sample() is used
    memory = RunMemory(work / "runner", cgroup=fake_cgroup, fraction=1.0)
    memory.watch(name, KIND)
    peaks: dict[int, TreeMemory] = {}
    stop = asyncio.Event()

    async def sampler() -> None:
        while not stop.is_set():
            for pid, (_, now) in (await asyncio.to_thread(memory.sample)).items():
                old = peaks.get(pid, TreeMemory())
                peaks[pid] = TreeMemory(
                    max(old.rss, now.rss), max(old.pss, now.pss), max(old.uss, now.uss)
                )
            await asyncio.sleep(0.05)

    task = asyncio.create_task(sampler())
    seconds = []
    for round_ in range(args.rounds):
        started = asyncio.get_running_loop().time()
        results = await asyncio.gather(
            *(
                backend.run(
                    RunRequest(
                        gvk=KIND,
                        namespace="bench",
                        name=f"{name}-{index}",
                        role=role,
                        extravars={"ansible_operator_meta": {"name": "x", "namespace": "bench"}},
                    )
                )
                for index in range(args.concurrent)
            )
        )
        for result in results:
            assert not result.failed and result.error is None, result.failure_message
        seconds.append(asyncio.get_running_loop().time() - started)
        print(f"  {name} round {round_}: {seconds[-1]:.1f} s", file=sys.stderr)
    stop.set()
    await task
    uss = [p.uss for p in peaks.values()]
    mib = 1 << 20
    return {
        "role": name,
        "runs_seen": len(peaks),
        "concurrent": args.concurrent,
        "round_s_median": round(statistics.median(seconds), 2),
        "uss_mib_median": round(statistics.median(uss) / mib, 1),
        "uss_mib_max": round(max(uss) / mib, 1),
        "pss_mib_median": round(statistics.median(p.pss for p in peaks.values()) / mib, 1),
        "rss_mib_median": round(statistics.median(p.rss for p in peaks.values()) / mib, 1),
    }


async def _main(args: argparse.Namespace) -> int:
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = str(bundled_collections_path())
    work = Path(tempfile.mkdtemp(prefix="bench-run-memory-"))
    backend = FastBackend(
        work / "runner", env={"ANSIBLE_GATHERING": "explicit"}, log_events="nothing"
    )
    try:
        found = [await measure(backend, work, name, args) for name in ROLES]
    finally:
        await backend.close()
        shutil.rmtree(work, ignore_errors=True)
    print("| role | runs | at once | peak USS median / max (MiB) | peak PSS | peak RSS |")
    print("|---|---|---|---|---|---|")
    for f in found:
        print(
            f"| {f['role']} | {f['runs_seen']} | {f['concurrent']} | {f['uss_mib_median']} / "
            f"{f['uss_mib_max']} | {f['pss_mib_median']} | {f['rss_mib_median']} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default="")
    return asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
