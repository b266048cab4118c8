"""The fast Ansible backend against the real cluster: the Kubernetes modules it runs in a
fork of the worker give what new interpreters give, and a dead zygote is replaced. (The
memcached sample end to end runs with the fast backend, the default, in
test_memcached_sample.py.)"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from support.kube import create_cr, wait_for

from runner.ansible.bundledcollection import bundled_collections_path
from runner.ansible.fastbackend import FastBackend
from runner.ansible.hooks.modexec import IN_PROCESS_NOTE
from runner.ansible.inputs import RunRequest
from runner.ansible.runnerbackend import RunnerBackend
from runner.structs.gvk import GVK

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


_MODULE_FILE = re.compile(r'File "[^"]*?/(ansible_collections|ansible)/')
"""Where a traceback places a module's files: in its payload zip, or for a direct module
the installed files (ansible-core 2.18 returns module tracebacks in the result)."""


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
            if key == "exception" and isinstance(comparable, str):
                comparable = _MODULE_FILE.sub(r'File "<module root>/\1/', comparable)
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
        create_cr(memcached_crd, name, namespace, {"size": 1})
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
    # Another test's backend may still be closing its zygote: count only this one's.
    earlier = set(_zygotes())

    def ours() -> list[int]:
        return [pid for pid in _zygotes() if pid not in earlier]

    backend = FastBackend(tmp_path / "runner", env=FAST)
    try:
        req = RunRequest(gvk=MEMCACHED, namespace=namespace, name="z", role=role)
        assert (await backend.run(req)).ok == 1
        (zygote,) = ours()
        os.kill(zygote, signal.SIGKILL)
        wait_for(lambda: not ours(), timeout=90, message="the zygote exited")
        req = RunRequest(gvk=MEMCACHED, namespace=namespace, name="z", role=role)
        assert (await backend.run(req)).ok == 1
        (replacement,) = ours()
        assert replacement != zygote
        # Killed right before the next run: it is still exiting then (its socket closed,
        # not yet a zombie that `poll()` sees), and the run must go to a new zygote.
        for _ in range(2):
            (zygote,) = ours()
            os.kill(zygote, signal.SIGKILL)
            req = RunRequest(gvk=MEMCACHED, namespace=namespace, name="z", role=role)
            assert (await backend.run(req)).ok == 1
    finally:
        await backend.close()
    assert not ours()


async def test_a_zygote_that_dies_while_idle_is_reaped(
    tmp_path: Path, kubeconfig: Path, namespace: str, memcached_crd: Any, collections_path: None
) -> None:
    role = tmp_path / "roles" / "hello"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text("- ansible.builtin.debug: {msg: hi}\n")
    earlier = set(_zygotes())
    backend = FastBackend(tmp_path / "runner", env=FAST)
    try:
        req = RunRequest(gvk=MEMCACHED, namespace=namespace, name="idle", role=role)
        assert (await backend.run(req)).ok == 1
        (zygote,) = [pid for pid in _zygotes() if pid not in earlier]
        os.kill(zygote, signal.SIGKILL)
        # No run follows (a standby replica's case): nothing else would wait for it.
        wait_for(
            lambda: not Path(f"/proc/{zygote}").exists(),
            timeout=30,
            message=f"the killed zygote {zygote} reaped, not left a zombie",
        )
    finally:
        await backend.close()


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
            and b"runner.ansible.fastbackend.zygoteprocess" in cmdline
        ):
            found.append(int(entry.name))
    return found
