"""What roles create through the proxy, seen from a running operator: owners, dependent
watches and what they trigger, the blacklist, `requeue_after`, and the proxy port."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kube import create_cr, get_or_none, true_condition, wait_for, wait_steady
from support.operator import OperatorProcess, crd, install_crd, write_project

from runner.devtools.cluster.processes import free_port

GROUP = "dependents.test.example.com"
API_VERSION = f"{GROUP}/v1alpha1"

# Creates a ConfigMap next to the CR, one in `remote` when asked, a Secret (blacklisted
# below) and a Part (a custom resource with a status subresource).
OWNER_ROLE = """
- name: Data ConfigMap
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-data"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        value: "{{ value | default('one') }}"

- name: Remote ConfigMap
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-remote"
        namespace: "{{ remote }}"
      data:
        value: "{{ value | default('one') }}"
  when: remote is defined

- name: Secret
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: Secret
      metadata:
        name: "{{ ansible_operator_meta.name }}-secret"
        namespace: "{{ ansible_operator_meta.namespace }}"
      stringData:
        value: "{{ value | default('one') }}"

- name: Part
  kubernetes.core.k8s:
    definition:
      apiVersion: dependents.test.example.com/v1alpha1
      kind: Part
      metadata:
        name: "{{ ansible_operator_meta.name }}-part"
        namespace: "{{ ansible_operator_meta.namespace }}"
      spec:
        value: "{{ value | default('one') }}"
"""

LATER_ROLE = """
- name: Ask to be run again soon
  operator_sdk.util.requeue_after:
    time: 2s
"""


@pytest.fixture(scope="module")
def kinds(dyn: Any) -> dict[str, Any]:
    return {
        kind: install_crd(dyn, crd(group=GROUP, kind=kind))
        for kind in ("Owner", "Part", "Later", "Ported")
    }


@pytest.fixture(scope="module")
def operator(
    kinds: dict[str, Any], kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    root = tmp_path_factory.mktemp("dependents")
    watches = [
        {
            "group": GROUP,
            "version": "v1alpha1",
            "kind": "Owner",
            "role": "owner",
            "reconcilePeriod": "0s",
            "blacklist": [{"group": "", "version": "v1", "kind": "Secret"}],
        },
        {
            "group": GROUP,
            "version": "v1alpha1",
            "kind": "Later",
            "role": "later",
            "reconcilePeriod": "0s",
        },
    ]
    project = write_project(
        root / "project", watches=watches, roles={"owner": OWNER_ROLE, "later": LATER_ROLE}
    )
    proc = OperatorProcess(project, kubeconfig=kubeconfig, log=root / "operator.log")
    try:
        yield proc
    finally:
        proc.stop()
        print(proc.log()[-6000:])


def create(resource: Any, name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = create_cr(resource, name, namespace, spec).to_dict()
    return created


def wait_successful(resource: Any, name: str, namespace: str, timeout: float = 60) -> None:
    def successful() -> bool:
        found = resource.get(name=name, namespace=namespace)
        return true_condition(found, "Successful") is not None

    wait_for(successful, timeout=timeout, message=f"{resource.kind} {name} Successful")


def runs(operator: OperatorProcess, kind: str, namespace: str, name: str) -> int:
    return operator.log().count(f"reconcile {kind} {namespace}/{name}: running Ansible")


def settled_runs(
    operator: OperatorProcess, kind: str, namespace: str, name: str, quiet: float = 8
) -> int:
    """The run count once no new run has started for `quiet` seconds."""
    return wait_steady(
        lambda: runs(operator, kind, namespace, name),
        quiet=quiet,
        timeout=60,
        message=f"{kind} {name} kept reconciling",
        interval=0.5,
    )


@pytest.fixture
def remote_namespace(api_client: Any) -> Iterator[str]:
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    name = f"t-remote-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        core.delete_namespace(name)


def test_dependents_get_owners_and_changes_reconcile_the_owner(
    dyn: Any,
    kinds: dict[str, Any],
    operator: OperatorProcess,
    namespace: str,
    remote_namespace: str,
) -> None:
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    cr = create(kinds["Owner"], "web", namespace, {"remote": remote_namespace})
    wait_successful(kinds["Owner"], "web", namespace)

    data = configmaps.get(name="web-data", namespace=namespace).to_dict()
    assert data["metadata"]["ownerReferences"] == [
        {"apiVersion": API_VERSION, "kind": "Owner", "name": "web", "uid": cr["metadata"]["uid"]}
    ]
    remote = configmaps.get(name="web-remote", namespace=remote_namespace).to_dict()
    assert "ownerReferences" not in remote["metadata"]
    assert remote["metadata"]["annotations"] == {
        "operator-sdk/primary-resource": f"{namespace}/web",
        "operator-sdk/primary-resource-type": f"Owner.{GROUP}",
    }

    # Deleted by hand (same namespace, then across namespaces): re-created.
    for target_namespace, target in ((namespace, "web-data"), (remote_namespace, "web-remote")):
        uid = configmaps.get(name=target, namespace=target_namespace).metadata.uid
        configmaps.delete(name=target, namespace=target_namespace)
        wait_for(
            lambda ns=target_namespace, n=target, old=uid: (
                (found := get_or_none(configmaps, n, ns)) is not None and found.metadata.uid != old
            ),
            timeout=90,
            message=f"{target_namespace}/{target} re-created",
        )

    # Edited by hand: reverted by the reconcile the edit triggers.
    configmaps.patch(
        name="web-data",
        namespace=namespace,
        body={"data": {"value": "tampered"}},
        content_type="application/merge-patch+json",
    )
    wait_for(
        lambda: configmaps.get(name="web-data", namespace=namespace).data["value"] == "one",
        timeout=90,
        message="hand edit of web-data reverted",
    )
    assert "watching /v1, Kind=ConfigMap as dependents of" in operator.log()


def test_status_only_updates_and_blacklisted_kinds_do_not_trigger(
    dyn: Any, kinds: dict[str, Any], operator: OperatorProcess, namespace: str
) -> None:
    secrets = dyn.resources.get(api_version="v1", kind="Secret")
    parts = kinds["Part"]
    create(kinds["Owner"], "quiet", namespace, {})
    wait_successful(kinds["Owner"], "quiet", namespace)
    wait_for(
        lambda: get_or_none(parts, "quiet-part", namespace), timeout=90, message="Part created"
    )
    before = settled_runs(operator, "Owner", namespace, "quiet")

    for step in range(3):
        parts.status.patch(
            name="quiet-part",
            namespace=namespace,
            body={"status": {"step": step}},
            content_type="application/merge-patch+json",
        )
    secrets.delete(name="quiet-secret", namespace=namespace)
    time.sleep(6)
    assert runs(operator, "Owner", namespace, "quiet") == before
    assert get_or_none(secrets, "quiet-secret", namespace) is None, "a blacklisted kind was watched"
    assert "Kind=Secret as dependents" not in operator.log()

    # A real change of the Part does reconcile the owner, which puts its spec back.
    parts.patch(
        name="quiet-part",
        namespace=namespace,
        body={"spec": {"value": "changed"}},
        content_type="application/merge-patch+json",
    )
    wait_for(
        lambda: parts.get(name="quiet-part", namespace=namespace).spec["value"] == "one",
        timeout=90,
        message="Part spec reverted by the owner's reconcile",
    )
    # The revert is itself a change of the Part, so one more reconcile may follow; it
    # changes nothing, and the runs stop.
    after = settled_runs(operator, "Owner", namespace, "quiet")
    assert before + 1 <= after <= before + 3


def test_requeue_after_runs_again_after_the_period(
    kinds: dict[str, Any], operator: OperatorProcess, namespace: str
) -> None:
    create(kinds["Later"], "soon", namespace, {})
    wait_successful(kinds["Later"], "soon", namespace)
    started = runs(operator, "Later", namespace, "soon")
    since = time.monotonic()
    wait_for(
        lambda: runs(operator, "Later", namespace, "soon") >= started + 2,
        timeout=90,
        message="two more runs, each asked for 2 s after the one before",
    )
    more = runs(operator, "Later", namespace, "soon") - started
    # Each run waits 2 s after the one before ended: not a loop.
    assert more <= (time.monotonic() - since) / 2 + 1, operator.log()[-3000:]


def test_a_fixed_proxy_port_and_dependent_watches_after_a_restart(
    dyn: Any, kinds: dict[str, Any], kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    port = free_port()
    watches = [{"group": GROUP, "version": "v1alpha1", "kind": "Ported", "role": "owner"}]
    project = write_project(tmp_path / "project", watches=watches, roles={"owner": OWNER_ROLE})

    def start(log: str, *args: str) -> OperatorProcess:
        return OperatorProcess(project, kubeconfig=kubeconfig, log=tmp_path / log, args=list(args))

    first = start("first.log", "--proxy-port", str(port))
    try:
        create(kinds["Ported"], "fixed", namespace, {})
        wait_successful(kinds["Ported"], "fixed", namespace)
        assert re.search(rf"API proxy listening on 127\.0\.0\.1:{port}\b", first.log())
    finally:
        first.stop()
        print(first.log()[-3000:])

    # A new process knows nothing of the dependents until a run reads one it owns (the
    # start-up reconcile does): from then on, deleting it reconciles the owner again.
    second = start("second.log")
    try:
        wait_for(
            lambda: "Kind=ConfigMap as dependents of" in second.log(),
            timeout=60,
            message="dependent watch re-established after the restart",
        )
        uid = configmaps.get(name="fixed-data", namespace=namespace).metadata.uid
        configmaps.delete(name="fixed-data", namespace=namespace)
        wait_for(
            lambda: (
                (found := get_or_none(configmaps, "fixed-data", namespace)) is not None
                and found.metadata.uid != uid
            ),
            timeout=90,
            message="fixed-data re-created by the restarted operator",
        )
    finally:
        second.stop()
        print(second.log()[-3000:])
