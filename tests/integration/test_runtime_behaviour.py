"""How `ansible-operator run` treats CRs, with small roles that do no API work:
failures and recovery, WATCH_NAMESPACE, playbooks, cluster-scoped kinds, coalescing and
many CRs at once. (manageStatus, selectors, reconcile periods and the work queue's
handling of each outcome are tested in process in tests/integration/engine/.)"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic.exceptions import NotFoundError
from support.kube import condition, create_cr, wait_for
from support.operator import (
    NO_FACTS,
    OperatorProcess,
    Operators,
    crd,
    install_crd,
    write_project,
)

GROUP = "runtime.test.example.com"

# Fails when spec.fail is true; otherwise records a counter in the status.
ECHO_ROLE = """
- name: Fail when asked
  ansible.builtin.fail:
    msg: "asked to fail: {{ reason | default('no reason') }}"
  when: fail | default(false) | bool

- name: Say hello
  ansible.builtin.debug:
    msg: "hello {{ ansible_operator_meta.name }}"
"""

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Playbook task
      ansible.builtin.debug:
        msg: "playbook for {{ ansible_operator_meta.name }}"
"""


@pytest.fixture(scope="module")
def kinds(dyn: Any) -> dict[str, Any]:
    """One CRD per scenario so operators of different tests never see each other's CRs."""
    names = {
        "Echo": "Namespaced",
        "Played": "Namespaced",
        "Global": "Cluster",
    }
    return {
        kind: install_crd(dyn, crd(group=GROUP, kind=kind, scope=scope))
        for kind, scope in names.items()
    }


@pytest.fixture
def start_operator(kubeconfig: Path, tmp_path: Path) -> Iterator[Callable[..., OperatorProcess]]:
    operators = Operators(kubeconfig=kubeconfig, directory=tmp_path)

    def start(
        watches: list[dict[str, Any]],
        *,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        playbooks: dict[str, str] | None = None,
    ) -> OperatorProcess:
        project = write_project(
            tmp_path / "project", watches=watches, roles={"echo": ECHO_ROLE}, playbooks=playbooks
        )
        return operators.start(project, env=env, args=args)

    yield start
    operators.stop_all()


def watch(kind: str, **extra: Any) -> dict[str, Any]:
    return {"group": GROUP, "version": "v1alpha1", "kind": kind, "role": "echo", **extra}


def cond(resource: Any, name: str, namespace: str | None, kind: str) -> dict[str, Any] | None:
    try:
        return condition(resource.get(name=name, namespace=namespace), kind)
    except NotFoundError:
        return None


def wait_condition(
    resource: Any,
    name: str,
    namespace: str | None,
    kind: str,
    status: str = "True",
    timeout: float = 60,
) -> dict[str, Any]:
    return wait_for(
        lambda: (c := cond(resource, name, namespace, kind)) and c["status"] == status and c,
        timeout=timeout,
        message=f"{resource.kind} {name}: {kind}={status}",
    )


def test_failure_condition_then_recovery(
    kinds: dict[str, Any], start_operator: Any, namespace: str
) -> None:
    echo = kinds["Echo"]
    proc = start_operator([watch("Echo")], env={"WATCH_NAMESPACE": namespace})
    create_cr(echo, "bad", namespace, {"fail": True, "reason": "bad input"})
    failure = wait_condition(echo, "bad", namespace, "Failure")
    assert failure["reason"] == "Failed"
    assert failure["message"] == "asked to fail: bad input"
    assert failure["ansibleResult"]["failures"] == 1
    wait_for(
        lambda: proc.log().count("requeue Echo") >= 2, timeout=90, message="backoff retries logged"
    )

    echo.patch(
        name="bad",
        namespace=namespace,
        body={"spec": {"fail": False}},
        content_type="application/merge-patch+json",
    )
    wait_condition(echo, "bad", namespace, "Successful")
    assert wait_condition(echo, "bad", namespace, "Failure", status="False")["reason"] == ""


def _runs(proc: OperatorProcess, namespace: str, name: str) -> int:
    return sum(
        1
        for line in proc.log().splitlines()
        if "running Ansible" in line and f" {namespace}/{name}:" in line
    )


def test_watch_namespace_restricts(
    kinds: dict[str, Any], start_operator: Any, namespace: str, api_client: Any
) -> None:
    from kubernetes import client

    echo = kinds["Echo"]
    outside = f"outside-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": outside}})
    try:
        proc = start_operator([watch("Echo")], env={"WATCH_NAMESPACE": namespace})
        create_cr(echo, "inside", namespace)
        create_cr(echo, "elsewhere", outside)
        wait_condition(echo, "inside", namespace, "Successful")
        assert cond(echo, "elsewhere", outside, "Running") is None
        assert _runs(proc, outside, "elsewhere") == 0
    finally:
        core.delete_namespace(outside)


def test_playbook_and_role_side_by_side(
    kinds: dict[str, Any], start_operator: Any, namespace: str
) -> None:
    start_operator(
        [
            watch("Echo"),
            {"group": GROUP, "version": "v1alpha1", "kind": "Played", "playbook": "playbook.yml"},
        ],
        env={"WATCH_NAMESPACE": namespace},
        playbooks={"playbook.yml": PLAYBOOK},
    )
    create_cr(kinds["Echo"], "by-role", namespace)
    create_cr(kinds["Played"], "by-playbook", namespace)
    wait_condition(kinds["Echo"], "by-role", namespace, "Successful")
    wait_condition(kinds["Played"], "by-playbook", namespace, "Successful")
    running = cond(kinds["Played"], "by-playbook", namespace, "Running")
    assert running is not None and running["ansibleResult"]["ok"] >= 1


def test_cluster_scoped_kind(kinds: dict[str, Any], start_operator: Any) -> None:
    name = f"global-{uuid.uuid4().hex[:6]}"
    start_operator([watch("Global")])
    create_cr(kinds["Global"], name, None)
    try:
        wait_condition(kinds["Global"], name, None, "Successful")
    finally:
        kinds["Global"].delete(name=name)


def test_rapid_updates_coalesce(kinds: dict[str, Any], start_operator: Any, namespace: str) -> None:
    echo = kinds["Echo"]
    proc = start_operator([watch("Echo")], env={"WATCH_NAMESPACE": namespace})
    create_cr(echo, "busy", namespace, {"n": 0})
    for n in range(1, 11):
        echo.patch(
            name="busy",
            namespace=namespace,
            body={"spec": {"n": n}},
            content_type="application/merge-patch+json",
        )
    generation = echo.get(name="busy", namespace=namespace).metadata.generation
    assert generation == 11

    def converged() -> bool:
        ok = cond(echo, "busy", namespace, "Successful")
        return (
            bool(ok and ok["status"] == "True")
            and "succeeded" in proc.log().split(f"{namespace}/busy: running")[-1]
        )

    wait_for(converged, timeout=60, message="busy converged after the last update")
    runs = _runs(proc, namespace, "busy")
    # Patches that arrive while a run goes on fold into one more run; a slow API server
    # spreads them over a few short runs, never one run each.
    assert 1 <= runs <= 6, f"{runs} runs for 11 generations"


def test_fifty_crs_converge(kinds: dict[str, Any], start_operator: Any, namespace: str) -> None:
    echo = kinds["Echo"]
    # The role uses no facts: 50 runs without gathering them (as in an operator image).
    start_operator([watch("Echo")], env={**NO_FACTS, "WATCH_NAMESPACE": namespace})
    names = [f"many-{i}" for i in range(50)]
    for name in names:
        create_cr(echo, name, namespace)

    def all_successful() -> bool:
        items = echo.get(namespace=namespace).to_dict()["items"]
        done = sum(
            1
            for item in items
            if any(
                c["type"] == "Successful" and c["status"] == "True"
                for c in (item.get("status") or {}).get("conditions", [])
            )
        )
        return done == len(names)

    wait_for(all_successful, timeout=240, message="all 50 CRs Successful", interval=1)
