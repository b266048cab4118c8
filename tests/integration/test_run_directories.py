"""Two operators on one machine with one run directory base: each keeps its own private
directory, and the one starting second never removes what the first is using."""

from __future__ import annotations

import re
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.kube import condition, wait_for
from support.operator import OperatorProcess, crd, install_crd, write_project

from runner.ansible.artifacts import find_data_dirs, latest_run, list_runs
from runner.ansible.rundir import process_dirs

GROUP = "rundirs.test.example.com"
HISTORY = (sys.executable, "-m", "runner.cli", "history")
ROLE = """
- name: Say hello
  ansible.builtin.debug:
    msg: "hello {{ ansible_operator_meta.name }}"
"""


@pytest.fixture(scope="module")
def shared_kind(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=GROUP, kind="Shared", scope="Namespaced"))


@pytest.fixture
def operators(tmp_path: Path) -> Iterator[list[OperatorProcess]]:
    started: list[OperatorProcess] = []
    yield started
    for proc in started:
        proc.stop()
        print(proc.log()[-4000:])


def new_cr(resource: Any, namespace: str, name: str, **labels: str) -> None:
    resource.create(
        body={
            "apiVersion": f"{GROUP}/v1alpha1",
            "kind": "Shared",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {},
        },
        namespace=namespace,
    )


def data_dir_of(base: Path, name: str) -> Path | None:
    """The data directory of CR `name` anywhere under `base`, with a finished run."""
    for path in find_data_dirs(base):
        run = latest_run(path)
        if path.name == name and run is not None and run.status == "successful":
            return path
    return None


def test_a_second_operator_leaves_the_first_ones_run_directories_alone(
    kubeconfig: Path, tmp_path: Path, namespace: str, shared_kind: Any, operators: list[Any]
) -> None:
    """Operator B sees only CRs labelled for it, so to B the first operator's CR does not
    exist. Its start-up clean-up must still not touch operator A's directory (the old
    shared layout lost it: 'removed 1 data directories of CRs that no longer exist')."""
    watch = {"version": "v1alpha1", "group": GROUP, "kind": "Shared", "role": "hello"}
    project = write_project(tmp_path / "project", watches=[watch], roles={"hello": ROLE})
    picky = {**watch, "selector": {"matchLabels": {"operator": "b"}}}
    (project / "watches-b.yaml").write_text(yaml.safe_dump([picky]))
    base = tmp_path / "runner"  # both logs are in tmp_path: one base for both

    first = OperatorProcess(project, kubeconfig=kubeconfig, log=tmp_path / "a.log")
    operators.append(first)
    new_cr(shared_kind, namespace, "for-a")
    a_dir = wait_for(
        lambda: data_dir_of(base, "for-a"), timeout=120, message="operator A ran for-a"
    )

    second = OperatorProcess(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "b.log",
        args=["--watches-file", "watches-b.yaml"],
    )
    operators.append(second)
    new_cr(shared_kind, namespace, f"for-b-{uuid.uuid4().hex[:4]}", operator="b")
    # B has listed its CRs (its clean-up ran then) and run one of them.
    wait_for(
        lambda: (
            "Ansible runs of this process are under" in second.log()
            and len([p for p in find_data_dirs(base) if p.name.startswith("for-b")]) == 2
        ),
        timeout=120,
        message="both operators ran the CR labelled for B",
    )
    assert first.running() and second.running()
    assert a_dir.is_dir(), "operator B removed operator A's run directory"
    assert latest_run(a_dir) is not None

    # Each has its own private directory, and A's CR is only in A's.
    own = process_dirs(base)
    assert len(own) == 2
    for path in own:
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert a_dir.is_relative_to(next(p for p in own if str(p) in first.log()))

    # A still works: a change to its CR is reconciled.
    shared_kind.patch(
        name="for-a",
        namespace=namespace,
        body={"spec": {"again": True}},
        content_type="application/merge-patch+json",
    )
    wait_for(
        lambda: (
            (ok := condition(shared_kind.get(name="for-a", namespace=namespace), "Successful"))
            and ok["status"] == "True"
            and len(list((a_dir / "artifacts").iterdir())) >= 3  # two runs and `latest`
        ),
        timeout=120,
        message="operator A ran for-a again",
    )


def test_a_base_writable_by_others_stops_the_operator_with_a_clear_error(
    kubeconfig: Path, tmp_path: Path, operators: list[Any]
) -> None:
    base = tmp_path / "runner"
    base.mkdir()
    base.chmod(0o777)
    watch = {"version": "v1alpha1", "group": GROUP, "kind": "Shared", "role": "hello"}
    project = write_project(tmp_path / "project", watches=[watch], roles={"hello": ROLE})
    proc = OperatorProcess(project, kubeconfig=kubeconfig, log=tmp_path / "a.log")
    operators.append(proc)
    assert proc.process.wait(timeout=60) == 1
    assert f"run directory base {base}: writable by other users (mode 0777)" in proc.log()
    assert list(base.iterdir()) == []


def test_history_keeps_the_runs_from_before_a_restart(
    kubeconfig: Path, tmp_path: Path, namespace: str, shared_kind: Any, operators: list[Any]
) -> None:
    """The restarted operator removes its predecessor's directory but moves the CRs' runs
    into its own first: `history` lists the runs of both processes."""
    watch = {"version": "v1alpha1", "group": GROUP, "kind": "Shared", "role": "hello"}
    project = write_project(tmp_path / "project", watches=[watch], roles={"hello": ROLE})
    base = tmp_path / "runner"
    name = f"kept-{uuid.uuid4().hex[:4]}"

    first = OperatorProcess(project, kubeconfig=kubeconfig, log=tmp_path / "first.log")
    operators.append(first)
    new_cr(shared_kind, namespace, name)
    before = wait_for(lambda: data_dir_of(base, name), timeout=120, message="first run")
    first_run = latest_run(before)
    assert first_run is not None
    assert first.stop() == 0

    second = OperatorProcess(project, kubeconfig=kubeconfig, log=tmp_path / "second.log")
    operators.append(second)
    shared_kind.patch(
        name=name,
        namespace=namespace,
        body={"spec": {"again": True}},
        content_type="application/merge-patch+json",
    )

    def both_runs() -> list[str] | None:
        data_dir = data_dir_of(base, name)
        idents = [run.ident for run in list_runs(data_dir)] if data_dir else []
        return idents if len(idents) >= 2 and idents[-1] == first_run.ident else None

    wait_for(both_runs, timeout=120, message="the runs of both processes are in the base")
    assert len(process_dirs(base)) == 1, "the first process's directory was left behind"

    history = subprocess.run(
        [*HISTORY, "--runner-dir", str(base), "-n", namespace, f"shared/{name}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert history.returncode == 0, history.stderr
    rows = [line.split() for line in history.stdout.splitlines()[2:] if line[:1].isdigit()]
    assert len(rows) >= 2, history.stdout
    assert rows[-1][-1] == first_run.ident, history.stdout


def test_a_cr_deleted_while_no_operator_ran_loses_its_data_directory_at_restart(
    kubeconfig: Path, tmp_path: Path, namespace: str, shared_kind: Any, operators: list[Any]
) -> None:
    """The restarted operator carries both CRs' data directories over; once its watch has
    listed the CRs, the one deleted while it was stopped goes, the other stays."""
    watch = {"version": "v1alpha1", "group": GROUP, "kind": "Shared", "role": "hello"}
    project = write_project(tmp_path / "project", watches=[watch], roles={"hello": ROLE})
    base = tmp_path / "runner"
    suffix = uuid.uuid4().hex[:4]
    kept, deleted = f"kept-{suffix}", f"deleted-{suffix}"

    first = OperatorProcess(project, kubeconfig=kubeconfig, log=tmp_path / "first.log")
    operators.append(first)
    new_cr(shared_kind, namespace, kept)
    new_cr(shared_kind, namespace, deleted)
    kept_dir = wait_for(lambda: data_dir_of(base, kept), timeout=120, message="kept's run")
    wait_for(lambda: data_dir_of(base, deleted), timeout=120, message="deleted's run")
    kept_run = latest_run(kept_dir)
    assert kept_run is not None
    assert first.stop() == 0
    shared_kind.delete(name=deleted, namespace=namespace)

    second = OperatorProcess(project, kubeconfig=kubeconfig, log=tmp_path / "second.log")
    operators.append(second)
    wait_for(
        # Other tests' CRs (in namespaces being removed) may be among those forgotten.
        lambda: re.search(r"forgot the runs of \d+ Shared", second.log()),
        timeout=120,
        message="the second operator's sweep after its first list",
    )
    assert data_dir_of(base, deleted) is None, "the deleted CR's data directory was kept"
    kept_after = data_dir_of(base, kept)
    assert kept_after is not None, "the existing CR's data directory was removed"
    assert kept_run.ident in [run.ident for run in list_runs(kept_after)]


def test_a_sharded_replica_starts_without_its_predecessors_runs(
    kubeconfig: Path, tmp_path: Path, namespace: str, shared_kind: Any, operators: list[Any]
) -> None:
    """A restarted sharded replica is a new ring member whose keys the ring hands out
    afresh, and its informers see only its own share: no sweep could tell which carried
    data directories outlived their CR, so it carries none (found by the chaos soak,
    docs/soak.md: data directories of deleted CRs piled up on restarted replicas)."""
    watch = {"version": "v1alpha1", "group": GROUP, "kind": "Shared", "role": "hello"}
    project = write_project(tmp_path / "project", watches=[watch], roles={"hello": ROLE})
    base = tmp_path / "runner"
    deleted = f"deleted-{uuid.uuid4().hex[:4]}"
    ring = ["--sharding", "--sharding-ring", "rundirs", "--sharding-namespace", namespace]
    env = {"WATCH_NAMESPACE": namespace}

    first = OperatorProcess(
        project, kubeconfig=kubeconfig, log=tmp_path / "first.log", args=ring, env=env
    )
    operators.append(first)
    new_cr(shared_kind, namespace, deleted)
    wait_for(lambda: data_dir_of(base, deleted), timeout=120, message="the CR's run")
    assert first.stop() == 0
    shared_kind.delete(name=deleted, namespace=namespace)

    second = OperatorProcess(
        project, kubeconfig=kubeconfig, log=tmp_path / "second.log", args=ring, env=env
    )
    operators.append(second)
    wait_for(lambda: "joined the ring rundirs" in second.log(), timeout=120, message="joined")
    assert "with their runs (a new ring member)" in second.log()
    assert len(process_dirs(base)) == 1
    assert data_dir_of(base, deleted) is None, "a deleted CR's data directory was carried"
