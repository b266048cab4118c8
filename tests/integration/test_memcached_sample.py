"""The memcached sample operator end to end on the real cluster: create, scale, delete,
with the default (fast) backend and with the runner backend (ansible-runner per run)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kube import apply, condition, documents, get_or_none, wait_for
from support.operator import REPO, OperatorProcess, operator_running

from runner.ansible.artifacts import latest_run, read_events
from runner.ansible.inputs import private_data_dir
from runner.ansible.rundir import process_dirs
from runner.structs.gvk import GVK

SAMPLE = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")


@pytest.fixture
def operator(
    request: pytest.FixtureRequest,
    kubeconfig: Path,
    tmp_path: Path,
    namespace: str,
    memcached_crd: Any,
) -> Iterator[OperatorProcess]:
    """The sample operator; `--ansible-backend <param>` when parametrized indirectly."""
    backend = getattr(request, "param", None)
    with operator_running(
        REPO,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        args=["--ansible-backend", backend] if backend else [],
        env={"WATCH_NAMESPACE": namespace},
    ) as proc:
        yield proc


@pytest.mark.timeout(900)  # four waits, each a run or two of the runner backend under load
@pytest.mark.parametrize(
    "operator", [None, "runner"], indirect=True, ids=["default-backend", "runner-backend"]
)
def test_create_scale_delete(
    dyn: Any, memcached_crd: Any, operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    apply(dyn, SAMPLE, namespace=namespace)
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    services = dyn.resources.get(api_version="v1", kind="Service")
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")

    wait_for(
        lambda: (
            (
                getattr(get_or_none(deployments, "memcached-sample", namespace), "status", None)
                or {}
            ).get("availableReplicas")
            == 3
        ),
        timeout=300,  # the runner backend on a loaded machine: a minute or more per run
        message="Deployment memcached-sample has 3 available replicas",
    )

    # A second run may follow the first (the Deployment controller annotates what the
    # role created); wait until one has ended and none is going on.
    (own,) = process_dirs(tmp_path / "runner")  # the operator's own run directory
    data_dir = private_data_dir(own, MEMCACHED, namespace, "memcached-sample")

    def settled() -> dict[str, Any] | None:
        found = memcached_crd.get(name="memcached-sample", namespace=namespace)
        ok, running = condition(found, "Successful"), condition(found, "Running")
        last = latest_run(data_dir)
        done = last is not None and last.status == "successful"
        if ok and ok["status"] == "True" and running and running["reason"] == "Successful" and done:
            cr: dict[str, Any] = found.to_dict()
            return cr
        return None

    cr = wait_for(settled, timeout=300, message="memcached-sample Successful, no run going on")
    assert get_or_none(services, "memcached-sample", namespace) is not None
    running = next(c for c in cr["status"]["conditions"] if c["type"] == "Running")
    assert running["ansibleResult"]["failures"] == 0
    assert running["ansibleResult"]["ok"] >= 3
    assert "cache.example.com/finalizer" in cr["metadata"]["finalizers"]
    assert "nodes" in cr["status"]
    marker = get_or_none(configmaps, "memcached-sample-marker", namespace).to_dict()
    assert marker["data"] == {"size": "3"}

    # The run left ansible-runner's artifacts, as the history and logs commands read them.
    run = latest_run(data_dir)
    assert run is not None and run.rc == 0
    events = read_events(run)
    assert events[-1]["event"] == "playbook_on_stats"
    tasks = [e["event_data"]["task"] for e in events if e["event"] == "runner_on_ok"]
    assert [task for task in tasks if task != "Gathering Facts"][:3] == [
        "Deployment runs size replicas of memcached",
        "Service exposes memcached",
        "Marker ConfigMap records that this CR is managed (removed by the finalizer)",
    ]
    assert "PLAY RECAP" in (run.path / "stdout").read_text()

    memcached_crd.patch(
        name="memcached-sample",
        namespace=namespace,
        body={"spec": {"size": 1}},
        content_type="application/merge-patch+json",
    )
    wait_for(
        lambda: get_or_none(deployments, "memcached-sample", namespace).spec.replicas == 1,
        timeout=180,
        message="Deployment follows size 1",
    )

    assert get_or_none(configmaps, "memcached-sample-marker", namespace) is not None
    memcached_crd.delete(name="memcached-sample", namespace=namespace)
    wait_for(
        lambda: get_or_none(memcached_crd, "memcached-sample", namespace) is None,
        timeout=180,
        message="CR deleted",
    )
    assert get_or_none(configmaps, "memcached-sample-marker", namespace) is None, (
        "the finalizer role did not run"
    )
    assert get_or_none(deployments, "memcached-sample", namespace) is None
    assert operator.running()
    # Each backend ran as itself on this ansible-core: no hook left out by the start-up
    # check or failing to install, no fall-back of the fast backend to ansible-runner.
    log = operator.log()
    for fallback in ("hooks were tested with", "runs without hook", "backend cannot start"):
        assert fallback not in log


def test_dependents_are_owned_watched_and_garbage_collected(
    dyn: Any, memcached_crd: Any, operator: OperatorProcess, namespace: str
) -> None:
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    services = dyn.resources.get(api_version="v1", kind="Service")
    body = {**documents(SAMPLE)[0], "spec": {"size": 1}}
    cr = memcached_crd.create(body=body, namespace=namespace).to_dict()
    name = cr["metadata"]["name"]

    def successful() -> bool:
        found = condition(memcached_crd.get(name=name, namespace=namespace), "Successful")
        return bool(found and found["status"] == "True")

    wait_for(successful, timeout=60, message=f"{name} Successful")
    owner = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "name": name,
        "uid": cr["metadata"]["uid"],
    }
    for resource in (deployments, services):
        obj = resource.get(name=name, namespace=namespace).to_dict()
        assert obj["metadata"]["ownerReferences"] == [owner], resource.kind

    # A dependent deleted by hand comes back: its deletion reconciles the owner.
    first_uid = deployments.get(name=name, namespace=namespace).metadata.uid
    deployments.delete(name=name, namespace=namespace)
    recreated = wait_for(
        lambda: (
            (get_or_none(deployments, name, namespace) or None)
            and get_or_none(deployments, name, namespace).metadata.uid != first_uid
        ),
        timeout=90,
        message="Deployment re-created after deletion",
    )
    assert recreated

    # A hand edit is reverted by the reconcile it triggers.
    deployments.patch(
        name=name,
        namespace=namespace,
        body={"spec": {"replicas": 4}},
        content_type="application/merge-patch+json",
    )
    wait_for(
        lambda: get_or_none(deployments, name, namespace).spec.replicas == 1,
        timeout=90,
        message="hand-edited replicas reverted to size 1",
    )

    # Without the operator (so no finalizer run), garbage collection removes dependents.
    operator.stop()
    memcached_crd.patch(
        name=name,
        namespace=namespace,
        body={"metadata": {"finalizers": []}},
        content_type="application/merge-patch+json",
    )
    memcached_crd.delete(name=name, namespace=namespace)
    # The garbage collector may only learn the CRD's kind at its 30 s discovery resync.
    wait_for(
        lambda: (
            get_or_none(deployments, name, namespace) is None
            and get_or_none(services, name, namespace) is None
        ),
        timeout=90,
        message="Deployment and Service garbage-collected with their CR",
    )
