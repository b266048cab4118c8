"""Races between the operator and the rest of the world: a CR deleted while its run is in
flight (with and without a finalizer), and status written by a role while the operator
writes its conditions."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kube import create_cr, get_or_none, true_condition, wait_for
from support.operator import OperatorProcess, Operators, crd, install_crd, write_project
from support.roles import PAUSE_WHEN_ASKED, output_configmap

GROUP = "races.test.example.com"
FINALIZER = f"{GROUP}/cleanup"

# Waits when asked, then creates an owned ConfigMap (through the proxy, like real roles).
ROLE = PAUSE_WHEN_ASKED + output_configmap()

# Records every finalizer run in a file named after the CR.
CLEANUP = """
- name: Record the finalizer run
  ansible.builtin.shell: echo run >> {{ marks }}/{{ ansible_operator_meta.name }}
"""


@pytest.fixture(scope="module")
def kinds(dyn: Any) -> dict[str, Any]:
    return {kind: install_crd(dyn, crd(group=GROUP, kind=kind)) for kind in ("Doomed", "Kept")}


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    path = tmp_path / "marks"
    path.mkdir()
    return path


@pytest.fixture
def operator(
    kubeconfig: Path, tmp_path: Path, namespace: str, marks: Path
) -> Iterator[Callable[[], OperatorProcess]]:
    """Starts the operator of both kinds, one worker each: what follows a run of a CR is
    queued before anything created later."""
    operators = Operators(kubeconfig=kubeconfig, directory=tmp_path)

    def start() -> OperatorProcess:
        watches = [
            {"group": GROUP, "version": "v1alpha1", "kind": "Doomed", "role": "work"},
            {
                "group": GROUP,
                "version": "v1alpha1",
                "kind": "Kept",
                "role": "work",
                "finalizer": {"name": FINALIZER, "role": "cleanup", "vars": {"marks": str(marks)}},
            },
        ]
        project = write_project(
            tmp_path / "project", watches=watches, roles={"work": ROLE, "cleanup": CLEANUP}
        )
        return operators.start(
            project,
            args=["--max-concurrent-reconciles", "1"],
            env={"WATCH_NAMESPACE": namespace},
        )

    yield start
    operators.stop_all()


def lines_about(log: str, kind: str, key: str, text: str) -> list[str]:
    return [line for line in log.splitlines() if f"{kind} {key}" in line and text in line]


def successful(resource: Any, name: str, namespace: str) -> bool:
    return true_condition(resource.get(name=name, namespace=namespace), "Successful") is not None


@pytest.mark.parametrize("kind", ["Doomed", "Kept"], ids=["no-finalizer", "finalizer"])
def test_a_cr_deleted_while_its_run_is_in_flight(
    kinds: dict[str, Any],
    operator: Callable[[], OperatorProcess],
    namespace: str,
    marks: Path,
    kind: str,
) -> None:
    resource = kinds[kind]
    proc = operator()
    key = f"{namespace}/victim"
    create_cr(resource, "victim", namespace, {"pause": 6})
    wait_for(
        lambda: lines_about(proc.log(), kind, key, "running Ansible"),
        timeout=90,
        message="the run started",
    )
    resource.delete(name="victim", namespace=namespace)
    wait_for(
        lambda: get_or_none(resource, "victim", namespace) is None,
        timeout=90,
        message="the CR is gone (not stuck on its finalizer)",
    )
    # One worker: whatever the deletion queued for the victim is done before a CR
    # created now has converged.
    create_cr(resource, "after", namespace, {})
    wait_for(
        lambda: successful(resource, "after", namespace),
        timeout=90,
        message="a later CR converges",
    )
    log = proc.log()
    assert not lines_about(log, kind, key, "after error"), "the deletion caused an error retry"
    assert "Traceback" not in log
    assert proc.running()
    runs = lines_about(log, kind, key, "running Ansible")
    if kind == "Kept":
        assert (marks / "victim").read_text().splitlines() == ["run"], "finalizer runs once"
        assert len(runs) == 2, runs  # the interrupted run, then the finalizer's
    else:
        assert not (marks / "victim").exists()
        assert len(runs) == 1, runs


# -- status written from two sides ----------------------------------------------------------

# The writer's role sets many status keys of another CR, one write at a time; the target's
# own role sets a key and a condition of its own on itself.
WRITER = """
- name: Write the target's status, key by key
  operator_sdk.util.k8s_status:
    api_version: "{{ _races_test_example_com_shared.apiVersion }}"
    kind: Shared
    name: target
    namespace: "{{ ansible_operator_meta.namespace }}"
    status: "{{ {'fromWriter' ~ item: item} }}"
  loop: "{{ range(writes | int) | list }}"
  when: ansible_operator_meta.name == 'writer'

- name: The target writes its own status too
  operator_sdk.util.k8s_status:
    api_version: "{{ _races_test_example_com_shared.apiVersion }}"
    kind: Shared
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      fromRole: "{{ round | default(0) }}"
    conditions:
      - type: RoleReady
        status: "True"
        reason: Written
        message: "round {{ round | default(0) }}"
  when: ansible_operator_meta.name == 'target'
"""


def test_status_written_by_a_role_while_the_operator_writes_conditions(
    dyn: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    shared = install_crd(dyn, crd(group=GROUP, kind="Shared"))
    project = write_project(
        tmp_path / "project",
        watches=[{"group": GROUP, "version": "v1alpha1", "kind": "Shared", "role": "w"}],
        roles={"w": WRITER},
    )
    proc = OperatorProcess(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": namespace},
    )
    writes = 40
    try:
        create_cr(shared, "target", namespace, {"round": 0})
        wait_for(lambda: successful(shared, "target", namespace), timeout=90, message="target")
        create_cr(shared, "writer", namespace, {"writes": writes})
        # While the writer writes, the target is reconciled again and again: its role and
        # the operator write the target's status as well.
        for round_ in range(1, 6):
            wait_for(
                lambda: "fromWriter" in str(shared.get(name="target", namespace=namespace).status),
                timeout=90,
                message="the writer is writing",
            )
            shared.patch(
                name="target",
                namespace=namespace,
                body={"spec": {"round": round_}},
                content_type="application/merge-patch+json",
            )
        wait_for(lambda: successful(shared, "writer", namespace), timeout=120, message="writer")

        def settled() -> dict[str, Any] | None:
            target = shared.get(name="target", namespace=namespace).to_dict()
            status = target.get("status") or {}
            ours = {c["type"]: c for c in status.get("conditions") or []}
            done = (
                str(status.get("fromRole")) == "5"
                and ours.get("Successful", {}).get("status") == "True"
                and ours.get("Running", {}).get("reason") == "Successful"
                and f"fromWriter{writes - 1}" in status
            )
            return status if done else None

        try:
            status = wait_for(settled, timeout=120, message="the target settles")
        except AssertionError:
            print(shared.get(name="target", namespace=namespace).to_dict().get("status"))
            raise
    finally:
        proc.stop()
        print(proc.log()[-4000:])
    missing = [i for i in range(writes) if str(status.get(f"fromWriter{i}")) != str(i)]
    assert not missing, f"the writer's keys {missing} were lost"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["RoleReady"]["message"] == "round 5", "the role's own condition was lost"
    assert "ansibleResult" in conditions["Running"]
    assert "kept changing" not in proc.log()
    assert not re.search(r"reconcile Shared \S+: failed", proc.log())
