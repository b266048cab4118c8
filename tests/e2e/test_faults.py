"""Faults and load: nothing is lost when the API server goes away or restarts again and
again, connections are reset, the operator is killed or stopped mid-run (a finalizer run
included), half the CRs are broken, or the operator lacks a permission.

The API-server outages run on a private cluster of its own, so that stopping its API
server cannot disturb other tests. The operators gather no facts (`NO_FACTS`, as in an
operator image): the roles use none, and it keeps hundreds of runs cheap.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError
from support.kube import create_cr, get_or_none, true_condition, wait_for
from support.operator import NO_FACTS, OperatorProcess, crd, install_crd, write_project
from support.roles import PAUSE_WHEN_ASKED, output_configmap
from support.tcpstall import forwarding, kubeconfig_through

GROUP = "faults.test.example.com"

ROLE = (
    PAUSE_WHEN_ASKED
    + """
- name: Fail when the spec is bad
  ansible.builtin.fail:
    msg: "bad spec for {{ ansible_operator_meta.name }}"
  when: bad | default(false) | bool
"""
    + output_configmap(when="not (skip_output | default(false) | bool)")
)


def watch(kind: str) -> dict[str, Any]:
    return {"group": GROUP, "version": "v1alpha1", "kind": kind, "role": "r"}


def conditions_of(resource: Any, namespace: str) -> dict[str, dict[str, str]]:
    """name -> {condition type: status} for every CR in `namespace`."""
    found: dict[str, dict[str, str]] = {}
    for item in resource.get(namespace=namespace).to_dict()["items"]:
        conds = (item.get("status") or {}).get("conditions") or []
        found[item["metadata"]["name"]] = {c["type"]: c["status"] for c in conds}
    return found


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope="module")
def kinds(dyn: Any) -> dict[str, Any]:
    names = ("Steady", "Killed", "Finalized", "Stopped", "Many", "Denied")
    return {kind: install_crd(dyn, crd(group=GROUP, kind=kind)) for kind in names}


@pytest.fixture
def project(tmp_path: Path) -> Callable[[str], Path]:
    """Makes the project directory of an operator watching one kind with ROLE."""

    def make(kind: str) -> Path:
        return write_project(tmp_path / kind, watches=[watch(kind)], roles={"r": ROLE})

    return make


def _create_until_done(resource: Any, names: list[str], namespace: str) -> None:
    """Create each CR, retrying while the API server is away (a create whose answer was
    lost in an outage counts as done)."""
    for name in names:
        while True:
            try:
                create_cr(resource, name, namespace)
                break
            except ConflictError:
                break
            except Exception:
                time.sleep(0.5)


@pytest.mark.timeout(1200)  # a cluster of its own, outages and 35 runs on a loaded machine
def test_api_server_restarts_and_connection_resets_lose_nothing(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from runner.devtools.cluster.local import LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp("outage-cluster"))
    cluster.up(progress=lambda _message: None)
    proc: OperatorProcess | None = None
    stack = contextlib.ExitStack()
    try:
        api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
        dyn = DynamicClient(api)
        resource = install_crd(dyn, crd(group=GROUP, kind="Steady"))
        namespace = f"outage-{uuid.uuid4().hex[:5]}"
        client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        root = tmp_path_factory.mktemp("outage")
        proj = write_project(root / "p", watches=[watch("Steady")], roles={"r": ROLE})
        admin = yaml.safe_load(cluster.kubeconfig.read_text())
        # The operator's connections go through a forwarder that can reset them.
        forwarder = stack.enter_context(forwarding(admin["clusters"][0]["cluster"]["server"]))
        through = root / "through.kubeconfig"
        through.write_text(yaml.safe_dump(kubeconfig_through(admin, forwarder)))
        proc = OperatorProcess(proj, kubeconfig=through, log=root / "op.log", env=NO_FACTS)
        wait_for(
            lambda: "started steady-v1alpha1-controller" in proc.log(), timeout=90, message="ready"
        )

        _create_until_done(resource, [f"s-{index}" for index in range(10)], namespace)
        failed: list[BaseException] = []

        def stop_and_restart_api_server(seconds: float) -> None:
            try:
                cluster.outage("kube-apiserver", seconds=seconds)
            except BaseException as error:  # re-raised below, in the test's thread
                failed.append(error)

        # A long outage while CRs are created, then short restarts and connection resets
        # in turn, CRs created all along.
        created = 10
        for round_, seconds in enumerate((10.0, 2.0, 2.0, 2.0)):
            outage = threading.Thread(target=stop_and_restart_api_server, args=(seconds,))
            outage.start()
            time.sleep(1)
            count = 10 if round_ == 0 else 5
            _create_until_done(
                resource, [f"s-{i}" for i in range(created, created + count)], namespace
            )
            created += count
            outage.join()
            if failed:
                raise failed[0]
            # Reset the connections the operator made again after the restart.
            wait_for(forwarder.open_connections, timeout=60, message="the operator reconnects")
            reset = forwarder.reset()
            print(f"round {round_}: {seconds:.0f} s outage, then {reset} connections reset")

        def converged() -> bool:
            found = conditions_of(resource, namespace)
            return len(found) == created and all(
                c.get("Successful") == "True" for c in found.values()
            )

        wait_for(converged, timeout=300, message=f"all {created} CRs Successful after the faults")
        outputs = client.CoreV1Api(api).list_namespaced_config_map(namespace).items
        names = sorted(cm.metadata.name for cm in outputs if cm.metadata.name.endswith("-out"))
        assert names == sorted(f"s-{i}-out" for i in range(created)), "missing dependents"
        assert proc.running()
        # An API server away is routine: one line per failed attempt, no tracebacks.
        assert "Traceback" not in proc.log()
    finally:
        if proc is not None:
            proc.stop()
            print(proc.log()[-4000:])
        stack.close()
        cluster.down(progress=lambda _message: None)


def test_kill_9_mid_run_then_restart_converges(
    kinds: dict[str, Any],
    project: Callable[[str], Path],
    kubeconfig: Path,
    tmp_path: Path,
    namespace: str,
) -> None:
    proj = project("Killed")
    first = OperatorProcess(proj, kubeconfig=kubeconfig, log=tmp_path / "first.log", env=NO_FACTS)
    try:
        create_cr(kinds["Killed"], "k", namespace, {"pause": 5})
        wait_for(lambda: "running Ansible" in first.log(), timeout=60, message="run started")
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait()
    finally:
        first.stop()
    second = OperatorProcess(proj, kubeconfig=kubeconfig, log=tmp_path / "second.log", env=NO_FACTS)
    try:
        wait_for(
            lambda: conditions_of(kinds["Killed"], namespace)["k"].get("Successful") == "True",
            timeout=90,
            message="the CR converges after the restart",
        )
    finally:
        second.stop()
        print(second.log()[-3000:])


# The finalizer's role: records its start, takes a while, records its end.
CLEANUP = """
- name: Record the start
  ansible.builtin.shell: echo start >> {{ marks }}/{{ ansible_operator_meta.name }}

- name: Take a while
  ansible.builtin.pause:
    seconds: 8

- name: Record the end
  ansible.builtin.shell: echo done >> {{ marks }}/{{ ansible_operator_meta.name }}
"""


def test_kill_9_during_a_finalizer_run_then_restart_finalizes(
    kinds: dict[str, Any], kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    finalizer = {"name": f"{GROUP}/cleanup", "role": "cleanup", "vars": {"marks": str(marks)}}
    proj = write_project(
        tmp_path / "project",
        watches=[{**watch("Finalized"), "finalizer": finalizer}],
        roles={"r": ROLE, "cleanup": CLEANUP},
    )
    resource = kinds["Finalized"]
    record = marks / "f"
    first = OperatorProcess(proj, kubeconfig=kubeconfig, log=tmp_path / "first.log", env=NO_FACTS)
    try:
        create_cr(resource, "f", namespace)
        wait_for(
            lambda: conditions_of(resource, namespace)["f"].get("Successful") == "True",
            timeout=90,
            message="the CR converges",
        )
        resource.delete(name="f", namespace=namespace)
        wait_for(
            lambda: record.exists() and "start" in record.read_text(),
            timeout=60,
            message="the finalizer run started",
        )
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait()
    finally:
        first.stop()
        print(first.log()[-3000:])
    held = get_or_none(resource, "f", namespace)
    assert held is not None and finalizer["name"] in held.metadata.finalizers
    second = OperatorProcess(proj, kubeconfig=kubeconfig, log=tmp_path / "second.log", env=NO_FACTS)
    try:
        wait_for(
            lambda: get_or_none(resource, "f", namespace) is None,
            timeout=120,
            message="the restarted operator finalizes the CR and it is gone",
        )
        assert second.running()
    finally:
        second.stop()
        print(second.log()[-3000:])
    assert record.read_text().split() == ["start", "start", "done"]


def test_sigterm_lets_runs_in_flight_finish(
    kinds: dict[str, Any],
    project: Callable[[str], Path],
    kubeconfig: Path,
    tmp_path: Path,
    namespace: str,
) -> None:
    proc = OperatorProcess(
        project("Stopped"),
        kubeconfig=kubeconfig,
        log=tmp_path / "op.log",
        args=["--graceful-shutdown-timeout", "60s"],
        env=NO_FACTS,
    )
    try:
        create_cr(kinds["Stopped"], "s", namespace, {"pause": 4})
        wait_for(lambda: "running Ansible" in proc.log(), timeout=60, message="run started")
        stopped = time.monotonic()
        assert proc.stop(timeout=60) == 0
        print(f"SIGTERM to exit with a run in flight: {time.monotonic() - stopped:.1f} s")
        assert "reconcile Stopped " in proc.log() and "succeeded in" in proc.log()
        assert conditions_of(kinds["Stopped"], namespace)["s"].get("Successful") == "True"
    finally:
        proc.stop()
        print(proc.log()[-3000:])


@pytest.mark.timeout(1500)
def test_200_crs_half_broken(
    kinds: dict[str, Any],
    project: Callable[[str], Path],
    kubeconfig: Path,
    tmp_path: Path,
    namespace: str,
) -> None:
    proc = OperatorProcess(
        project("Many"), kubeconfig=kubeconfig, log=tmp_path / "op.log", env=NO_FACTS
    )
    try:
        for index in range(200):
            create_cr(
                kinds["Many"],
                f"m-{index}",
                namespace,
                {"bad": index % 2 == 1, "skip_output": True},
            )

        def settled() -> bool:
            found = conditions_of(kinds["Many"], namespace)
            good = [found.get(f"m-{i}", {}).get("Successful") for i in range(0, 200, 2)]
            bad = [found.get(f"m-{i}", {}).get("Failure") for i in range(1, 200, 2)]
            return all(s == "True" for s in good) and all(f == "True" for f in bad)

        started = time.monotonic()
        wait_for(settled, timeout=1200, message="100 Successful and 100 Failure", interval=2)
        rss = peak_rss_mib(proc.process.pid)
        print(
            f"200 CRs (100 failing): settled in {time.monotonic() - started:.0f} s; "
            f"operator peak RSS {rss:.0f} MiB"
        )
        assert rss < 400, "the operator's memory must stay bounded"
        assert proc.running()
    finally:
        proc.stop()


@pytest.fixture
def restricted_kubeconfig(
    api_client: Any, kubeconfig: Path, namespace: str, tmp_path: Path
) -> Iterator[Path]:
    """A kubeconfig for a service account that may do everything the operator needs in
    `namespace` except create ConfigMaps (which the role needs)."""
    rbac = client.RbacAuthorizationV1Api(api_client)
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "operator"}})
    rules = [
        {"apiGroups": [GROUP], "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "operator"}, "rules": rules})
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "operator"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "operator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}],
        },
    )
    token = core.create_namespaced_service_account_token(
        "operator", namespace, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    admin = yaml.safe_load(kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    restricted = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "local", "user": "operator"}}],
        "current-context": "operator",
    }
    path = tmp_path / "restricted.kubeconfig"
    path.write_text(yaml.safe_dump(restricted))
    yield path


def test_missing_permission_is_a_failure_condition(
    kinds: dict[str, Any],
    project: Callable[[str], Path],
    restricted_kubeconfig: Path,
    tmp_path: Path,
    namespace: str,
) -> None:
    proc = OperatorProcess(
        project("Denied"),
        kubeconfig=restricted_kubeconfig,
        log=tmp_path / "op.log",
        env={**NO_FACTS, "WATCH_NAMESPACE": namespace},
    )
    try:
        create_cr(kinds["Denied"], "d", namespace)

        def failure() -> dict[str, Any] | None:
            return true_condition(kinds["Denied"].get(name="d", namespace=namespace), "Failure")

        cond = wait_for(failure, timeout=90, message="Failure condition")
        assert "forbidden" in cond["message"].lower(), cond["message"]
        assert "configmaps" in cond["message"]
        assert proc.running()
    finally:
        proc.stop()
        print(proc.log()[-3000:])
