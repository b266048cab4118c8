"""Never two leaders: a leader whose API server stops answering stops reconciling before
a standby may take the Lease over, proven from both operators' run records. (The elector
and the Manager's reaction to a lost Lease are tested in process in
tests/integration/engine/.)"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support.kube import wait_for
from support.operator import OperatorProcess, crd, install_crd, write_project
from support.roles import PAUSE_WHEN_ASKED
from support.tcpstall import StallingForwarder, stalling_kubeconfig

from runner.ansible.artifacts import list_runs
from runner.ansible.history import cr_dirs, summarize_run
from runner.ansible.rundir import process_dirs

GROUP = "leader.test.example.com"
KIND = "Split"

ROLE = (
    PAUSE_WHEN_ASKED
    + """
- name: Done
  ansible.builtin.debug:
    msg: "done {{ ansible_operator_meta.name }}"
"""
)


@pytest.fixture(scope="module")
def split(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=GROUP, kind=KIND))


@pytest.fixture
def stalling(kubeconfig: Path, tmp_path: Path) -> Iterator[tuple[StallingForwarder, Path]]:
    """A forwarder to the API server and a kubeconfig that goes through it."""
    with stalling_kubeconfig(kubeconfig, tmp_path) as stalled:
        yield stalled


def _runs(runner_dir: Path) -> dict[str, list[tuple[datetime, datetime | None]]]:
    """CR name -> (started, ended) of each run recorded in an operator's run directory;
    ended is None for a run that never recorded its end."""
    found: dict[str, list[tuple[datetime, datetime | None]]] = {}
    for process_dir in process_dirs(runner_dir):
        for cr in cr_dirs(process_dir):
            if cr.kind != KIND:
                continue
            for run in list_runs(cr.path):
                summary = summarize_run(run)
                found.setdefault(cr.name, []).append((summary.started, summary.ended))
    return found


@pytest.mark.timeout(300)
def test_a_stalled_leader_stops_before_the_standby_takes_over(
    split: Any,
    kubeconfig: Path,
    stalling: tuple[StallingForwarder, Path],
    tmp_path: Path,
    namespace: str,
) -> None:
    forwarder, stalled_kubeconfig = stalling
    project = write_project(
        tmp_path / "project",
        watches=[{"group": GROUP, "version": "v1alpha1", "kind": KIND, "role": "r"}],
        roles={"r": ROLE},
    )
    args = [
        "--leader-elect",
        "--leader-election-id",
        "split-brain-test",
        "--leader-election-namespace",
        namespace,
        "--graceful-shutdown-timeout",
        "2s",
    ]
    env = {"WATCH_NAMESPACE": namespace}
    started: list[OperatorProcess] = []

    def start(name: str, kubeconfig: Path) -> OperatorProcess:
        log = tmp_path / name / "op.log"
        log.parent.mkdir()
        started.append(OperatorProcess(project, kubeconfig=kubeconfig, log=log, args=args, env=env))
        return started[-1]

    try:
        leader = start("a", stalled_kubeconfig)
        wait_for(lambda: "became the leader" in leader.log(), timeout=90, message="a leads")
        standby = start("b", kubeconfig)
        wait_for(lambda: "waiting for the lease" in standby.log(), timeout=90, message="b waits")
        for name, pause in (("slow", 600), ("quick-0", 0), ("quick-1", 0)):
            split.create(
                body={
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": KIND,
                    "metadata": {"name": name},
                    "spec": {"pause": pause},
                },
                namespace=namespace,
            )
        in_long_task = re.compile(rf"{namespace}/slow job=\S+\] task ok: Gathering Facts")
        wait_for(
            lambda: in_long_task.search(leader.log()),
            timeout=90,
            message="the leader's run of the slow CR is in its long task",
        )

        forwarder.stall()
        stalled = time.monotonic()
        wait_for(
            lambda: "became the leader" in standby.log(),
            timeout=120,
            message="b takes over",
        )
        print(f"take-over {time.monotonic() - stalled:.1f} s after the stall")
        wait_for(
            lambda: f" {namespace}/slow: running Ansible" in standby.log(),
            timeout=90,
            message="b runs the slow CR",
        )
        time.sleep(2)
    finally:
        forwarder.resume()
        for proc in started:
            proc.stop(timeout=20)
            print(proc.log()[-3000:])

    old = _runs(tmp_path / "a" / "runner")
    new = _runs(tmp_path / "b" / "runner")
    print("leader's runs:", old)
    print("standby's runs:", new)
    assert "slow" in old and "slow" in new, "both operators ran the slow CR"
    unfinished = [name for name, runs in old.items() for _, ended in runs if ended is None]
    assert not unfinished, f"the old leader left runs without an end: {unfinished}"
    last_old_end = max(ended for runs in old.values() for _, ended in runs if ended)
    first_new_start = min(started for runs in new.values() for started, _ in runs)
    assert last_old_end < first_new_start, (
        f"the old leader ran until {last_old_end.time()}, "
        f"the new one started at {first_new_start.time()}"
    )
    for name, runs in old.items():
        for started, ended in runs:
            for other_started, other_ended in new.get(name, []):
                assert ended is not None
                disjoint = ended <= other_started or (
                    other_ended is not None and other_ended <= started
                )
                assert disjoint, f"two runs of {name} overlap"
