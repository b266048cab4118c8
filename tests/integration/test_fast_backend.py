"""The fast Ansible backend against the real cluster: the Kubernetes modules it runs in a
fork of the worker give what new interpreters give, and the memcached sample operator
works end to end with `--ansible-backend fast` (status, dependents, finalizer, artifacts)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic.exceptions import NotFoundError
from support.kube import apply, condition, wait_for
from support.operator import REPO, OperatorProcess

from runner.ansible.artifacts import latest_run, read_events
from runner.ansible.backend import RunnerBackend
from runner.ansible.fast import FastBackend
from runner.ansible.inputs import RunRequest, private_data_dir
from runner.ansible.modexec import IN_PROCESS_NOTE
from runner.collections_path import bundled_collections_path
from runner.structs.gvk import GVK

SAMPLE = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
FAST = {"ANSIBLE_GATHERING": "explicit"}

K8S_TASKS = """\
- name: create a ConfigMap
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ name }}"
        namespace: "{{ namespace }}"
        labels: {probe: "{{ name }}"}
      data: {size: "1"}
- name: the same again changes nothing
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ name }}"
        namespace: "{{ namespace }}"
        labels: {probe: "{{ name }}"}
      data: {size: "1"}
- name: a change in check mode, with a diff
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: "{{ name }}", namespace: "{{ namespace }}"}
      data: {size: "2"}
  check_mode: true
  diff: true
- name: list by label
  kubernetes.core.k8s_info:
    kind: ConfigMap
    namespace: "{{ namespace }}"
    label_selectors: ["probe = {{ name }}"]
- name: a missing object
  kubernetes.core.k8s_info:
    kind: ConfigMap
    namespace: "{{ namespace }}"
    name: "{{ name }}-missing"
- name: a failing request
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: NoSuchKind
      metadata: {name: "{{ name }}", namespace: "{{ namespace }}"}
  ignore_errors: true
- name: status of the CR
  operator_sdk.util.k8s_status:
    api_version: cache.example.com/v1alpha1
    kind: Memcached
    name: "{{ name }}"
    namespace: "{{ namespace }}"
    status:
      probe: "{{ name }}"
    conditions:
      - type: Probed
        status: "True"
        reason: Probe
        message: "probed {{ name }}"
- name: delete the ConfigMap
  kubernetes.core.k8s:
    state: absent
    kind: ConfigMap
    name: "{{ name }}"
    namespace: "{{ namespace }}"
"""
VOLATILE_KEYS = {
    *("uid", "resourceVersion", "creationTimestamp", "managedFields", "lastTransitionTime"),
    *("generation", "time", "duration"),
}


def _comparable(value: Any, name: str) -> Any:
    """A task result without what differs between any two runs (uids, versions, times).

    A mapping left empty by that is dropped too: a diff shows `metadata` only when the
    second of its `managedFields` time changed between the two requests.
    """
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            if key in VOLATILE_KEYS:
                continue
            comparable = _comparable(item, name)
            if comparable == {} and item != {}:
                continue
            kept[key] = comparable
        return kept
    if isinstance(value, list):
        return [_comparable(item, name) for item in value]
    if isinstance(value, str):
        return value.replace(name, "<name>")
    return value


@pytest.fixture
def collections_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled operator_sdk.util, as `ansible-operator run` adds it."""
    current = os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")
    paths = [p for p in current.split(":") if p] or ["/usr/share/ansible/collections"]
    monkeypatch.setenv(
        "ANSIBLE_COLLECTIONS_PATH", ":".join([*paths, str(bundled_collections_path())])
    )


async def test_kubernetes_modules_in_process_match_new_interpreters(
    tmp_path: Path, kubeconfig: Path, namespace: str, memcached_crd: Any, collections_path: None
) -> None:
    role = tmp_path / "roles" / "k8s"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text(K8S_TASKS)
    results: dict[str, dict[str, Any]] = {}
    outputs: dict[str, str] = {}
    for kind, backend_type in (("runner", RunnerBackend), ("fast", FastBackend)):
        name = f"probe-{kind}"
        memcached_crd.create(
            body={
                "apiVersion": "cache.example.com/v1alpha1",
                "kind": "Memcached",
                "metadata": {"name": name},
                "spec": {"size": 1},
            },
            namespace=namespace,
        )
        backend = backend_type(tmp_path / f"runner-{kind}", env=FAST)
        events: list[dict[str, Any]] = []
        req = RunRequest(
            gvk=MEMCACHED,
            namespace=namespace,
            name=name,
            role=role,
            verbosity=4,
            extravars={"name": name, "namespace": namespace},
            envvars={"K8S_AUTH_KUBECONFIG": str(kubeconfig)},
        )
        try:
            result = await backend.run(req, on_event=events.append)
        finally:
            await backend.close()
        assert not result.failed, result.failure_message
        results[kind] = {
            event["event_data"]["task"]: (
                event["event"],
                _comparable(event["event_data"]["res"], name),
            )
            for event in events
            if event["event"] in ("runner_on_ok", "runner_on_failed")
        }
        outputs[kind] = (backend.data_dir(req) / "artifacts/latest/stdout").read_text()
        status = memcached_crd.get(name=name, namespace=namespace).to_dict()["status"]
        assert status["probe"] == name

    assert results["fast"] == results["runner"]
    assert results["fast"]["a failing request"][0] == "runner_on_failed"
    assert results["fast"]["the same again changes nothing"][1]["changed"] is False
    for module in ("kubernetes.core.plugins.modules.k8s", "operator_sdk.util.plugins.modules"):
        assert f"{IN_PROCESS_NOTE}: ansible_collections.{module}" in outputs["fast"]


async def test_a_dead_zygote_is_replaced(
    tmp_path: Path, kubeconfig: Path, namespace: str, memcached_crd: Any, collections_path: None
) -> None:
    role = tmp_path / "roles" / "hello"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text("- ansible.builtin.debug: {msg: hi}\n")
    backend = FastBackend(tmp_path / "runner", env=FAST)
    try:
        req = RunRequest(gvk=MEMCACHED, namespace=namespace, name="z", role=role)
        assert (await backend.run(req)).ok == 1
        (zygote,) = _zygotes()
        os.kill(zygote, signal.SIGKILL)
        wait_for(lambda: not _zygotes(), timeout=30, message="the zygote exited")
        req = RunRequest(gvk=MEMCACHED, namespace=namespace, name="z", role=role)
        assert (await backend.run(req)).ok == 1
        (replacement,) = _zygotes()
        assert replacement != zygote
    finally:
        await backend.close()
    assert not _zygotes()


def _zygotes() -> list[int]:
    """Live zygote processes started by this test process."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if (
            int(fields[1]) == os.getpid()
            and fields[0] != "Z"
            and b"runner.ansible.zygote" in cmdline
        ):
            found.append(int(entry.name))
    return found


@pytest.fixture
def fast_operator(
    kubeconfig: Path, tmp_path: Path, namespace: str, memcached_crd: Any
) -> Iterator[OperatorProcess]:
    proc = OperatorProcess(
        REPO,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        args=["--ansible-backend", "fast"],
        env={"WATCH_NAMESPACE": namespace},
    )
    try:
        yield proc
    finally:
        proc.stop()
        print(proc.log()[-5000:])


def _get(resource: Any, name: str, namespace: str) -> Any:
    try:
        return resource.get(name=name, namespace=namespace)
    except NotFoundError:
        return None


def test_memcached_sample_with_the_fast_backend(
    dyn: Any, memcached_crd: Any, fast_operator: OperatorProcess, namespace: str, tmp_path: Path
) -> None:
    apply(dyn, SAMPLE, namespace=namespace)
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    started = time.monotonic()

    def successful() -> dict[str, Any] | None:
        cr = memcached_crd.get(name="memcached-sample", namespace=namespace)
        found = condition(cr, "Successful")
        return found if found and found["status"] == "True" else None

    wait_for(successful, timeout=60, message="memcached-sample Successful")
    print(f"\ncreate -> Successful with the fast backend: {time.monotonic() - started:.2f} s")
    cr = memcached_crd.get(name="memcached-sample", namespace=namespace).to_dict()
    running = next(c for c in cr["status"]["conditions"] if c["type"] == "Running")
    assert running["reason"] == "Successful"
    assert running["ansibleResult"]["failures"] == 0
    assert "nodes" in cr["status"]
    assert _get(deployments, "memcached-sample", namespace).spec.replicas == 3
    marker = _get(configmaps, "memcached-sample-marker", namespace).to_dict()
    assert marker["data"] == {"size": "3"}

    # The run left ansible-runner's artifacts, as the history and logs commands read them.
    data_dir = private_data_dir(tmp_path / "runner", MEMCACHED, namespace, "memcached-sample")
    run = latest_run(data_dir)
    assert run is not None and run.status == "successful" and run.rc == 0
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
        lambda: _get(deployments, "memcached-sample", namespace).spec.replicas == 1,
        timeout=60,
        message="Deployment follows size 1",
    )
    memcached_crd.delete(name="memcached-sample", namespace=namespace)
    wait_for(
        lambda: _get(memcached_crd, "memcached-sample", namespace) is None,
        timeout=60,
        message="CR deleted",
    )
    assert _get(configmaps, "memcached-sample-marker", namespace) is None, "finalizer not run"
    assert fast_operator.running()
