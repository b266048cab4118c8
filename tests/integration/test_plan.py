"""`ansible-operator plan` against the real API server, with both backends: what the
memcached sample would create in an empty namespace (and that nothing was created), what
a spec change would change, a role that reads back what it created, a failing role,
tasks that act outside the API, and that the cluster emitted no watch event for any
object of the namespace while a plan ran."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.kube import apply, condition, get_or_none, wait_for, wait_steady
from support.operator import NO_FACTS, REPO, crd, install_crd, operator_python, operator_running
from support.operator import write_project as project

from runner.ansible.artifacts import latest_run
from runner.ansible.inputs import private_data_dir
from runner.ansible.rundir import process_dirs
from runner.k8s.client import KubeClient
from runner.structs.gvk import GVK

SAMPLE = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
BACKENDS = pytest.mark.parametrize("backend", ["fast", "runner"])
PLAN_GROUP = "plan.example.com"

# Every kind the plans below could touch in a namespace, or a controller would act on.
WATCHED = (
    "/api/v1/namespaces/{ns}/configmaps",
    "/api/v1/namespaces/{ns}/services",
    "/api/v1/namespaces/{ns}/secrets",
    "/api/v1/namespaces/{ns}/pods",
    "/api/v1/namespaces/{ns}/events",
    "/api/v1/namespaces/{ns}/serviceaccounts",
    "/apis/apps/v1/namespaces/{ns}/deployments",
    "/apis/apps/v1/namespaces/{ns}/replicasets",
    "/apis/cache.example.com/v1alpha1/namespaces/{ns}/memcacheds",
)


def plan(
    cwd: Path,
    *args: str,
    kubeconfig: Path,
    scratch: Path,
    backend: str,
    expect: int,
    output: str = "json",
) -> Any:
    """`ansible-operator plan ARGS -o OUTPUT` in `cwd`; its report (JSON and YAML read,
    text as it is), after checking its exit code is `expect`."""
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **NO_FACTS, "KUBECONFIG": str(kubeconfig), "TMPDIR": str(scratch)}
    done = subprocess.run(
        [operator_python(), "-m", "runner.cli", "plan", *args, *_options(backend, output)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == expect, f"{done.stdout}\n{done.stderr}"
    if output == "json":
        return json.loads(done.stdout)
    if output == "yaml":
        return yaml.safe_load(done.stdout)
    return done.stdout


def _options(backend: str, output: str) -> list[str]:
    return ["--ansible-backend", backend, "-o", output]


def changes(report: dict[str, Any]) -> dict[str, str]:
    """`{"Kind name": action}` of a report's changes."""
    return {f"{c['kind']} {c['name']}": c["action"] for c in report["changes"]}


def status_condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    """The condition of type `kind` in a planned status."""
    (found,) = [c for c in status.get("conditions") or [] if c.get("type") == kind]
    return dict(found)


def diff_lines(report: dict[str, Any], kind: str) -> list[str]:
    """The changed lines (`-`/`+`, without the file headers) of one kind's diff."""
    (change,) = [c for c in report["changes"] if c["kind"] == kind]
    return [
        line
        for line in change["diff"].splitlines()
        if line[:1] in "+-" and not line.startswith(("---", "+++"))
    ]


# -- watch events -------------------------------------------------------------------------


async def _versions(kubeconfig: Path, namespace: str) -> dict[str, str]:
    """The resourceVersion of each watched kind's list in `namespace`, now."""
    async with await KubeClient.connect(kubeconfig=str(kubeconfig)) as client:
        found = {}
        for template in WATCHED:
            path = template.format(ns=namespace)
            response = await client.forward("GET", path, query=[("limit", "1")])
            body = json.loads(await response.read())
            response.release()
            found[path] = body["metadata"]["resourceVersion"]
        return found


async def _watch_since(client: KubeClient, path: str, since: str) -> tuple[list[Any], int]:
    """The events of `path` after `since`, and the highest bookmark's resourceVersion."""
    query = [
        ("watch", "1"),
        ("resourceVersion", since),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", "5"),
    ]
    response = await client.forward("GET", path, query=query)
    events, bookmark = [], 0
    try:
        async for line in response.content:
            if not line.strip():
                continue
            event = json.loads(line)
            if event["type"] == "BOOKMARK":
                bookmark = max(bookmark, int(event["object"]["metadata"]["resourceVersion"]))
            else:
                events.append(event)
    finally:
        response.release()
    return events, bookmark


async def _events_since(kubeconfig: Path, before: dict[str, str], namespace: str) -> list[str]:
    """Every watch event of the watched kinds since `before`, checked to reach the
    present: by a bookmark at least as new as a list made now, or for Events (the API
    server keeps no watch cache of them, so it sends them no bookmarks) by seeing the
    marker Event written now."""
    async with await KubeClient.connect(kubeconfig=str(kubeconfig)) as client:
        marker = await client.create(
            GVK("", "v1", "Event"),
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "plan-test-marker", "namespace": namespace},
                "involvedObject": {"kind": "ConfigMap", "name": "none", "namespace": namespace},
                "reason": "Marker",
                "message": "the plan is over",
            },
        )
        after = await _versions(kubeconfig, namespace)
        found = await asyncio.gather(
            *(_watch_since(client, path, since) for path, since in before.items())
        )
    seen = []
    for (path, _), (events, bookmark) in zip(before.items(), found, strict=True):
        names = [event["object"]["metadata"].get("name") for event in events]
        if path.endswith("/events"):
            assert marker["metadata"]["name"] in names, f"{path}: the marker was not seen"
        else:
            assert bookmark >= int(after[path]), f"{path}: no bookmark reached {after[path]}"
        seen += [
            f"{event['type']} {path} {name}"
            for event, name in zip(events, names, strict=True)
            if name != marker["metadata"]["name"]
        ]
    return seen


SNAPSHOT_KINDS = (
    ("v1", "ConfigMap"),
    ("v1", "Service"),
    ("v1", "Secret"),
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("cache.example.com/v1alpha1", "Memcached"),
)


def snapshot(dyn: Any, namespace: str) -> dict[str, dict[str, Any]]:
    """Every object of `SNAPSHOT_KINDS` in `namespace`, whole (resourceVersion and all)."""
    found = {}
    for api_version, kind in SNAPSHOT_KINDS:
        resource = dyn.resources.get(api_version=api_version, kind=kind)
        for item in resource.get(namespace=namespace).items:
            found[f"{kind} {item.metadata.name}"] = item.to_dict()
    return found


def steady_snapshot(dyn: Any, namespace: str) -> dict[str, dict[str, Any]]:
    """`snapshot` once the controllers are done with the namespace (no resourceVersion
    moved for 3 s): what a plan must leave exactly as it is."""
    snap: dict[str, dict[str, Any]] = wait_steady(
        lambda: snapshot(dyn, namespace),
        quiet=3,
        timeout=120,
        message=f"the objects of {namespace} settle",
    )
    return snap


def assert_unchanged(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> None:
    assert sorted(after) == sorted(before), "objects came or went"
    for name, obj in before.items():
        version = obj["metadata"]["resourceVersion"]
        assert after[name]["metadata"]["resourceVersion"] == version, f"{name} changed"
        assert after[name] == obj, name


# -- the memcached sample ------------------------------------------------------------------


@pytest.mark.timeout(600)
@BACKENDS
def test_sample_on_an_empty_namespace_creates_three_objects_and_nothing_happens(
    kubeconfig: Path, dyn: Any, memcached_crd: Any, namespace: str, tmp_path: Path, backend: str
) -> None:
    before = asyncio.run(_versions(kubeconfig, namespace))
    report = plan(
        REPO,
        str(SAMPLE),
        "-n",
        namespace,
        kubeconfig=kubeconfig,
        scratch=tmp_path / "tmp",
        backend=backend,
        expect=2,
    )
    seen = asyncio.run(_events_since(kubeconfig, before, namespace))
    assert seen == [], "the cluster changed during the plan"

    assert report["clusterChanged"] is False
    assert changes(report) == {
        "Deployment memcached-sample": "create",
        "Service memcached-sample": "create",
        "ConfigMap memcached-sample-marker": "create",
    }
    deployment = next(c for c in report["changes"] if c["kind"] == "Deployment")["after"]
    assert deployment["spec"]["replicas"] == 3
    [owner] = deployment["metadata"]["ownerReferences"]
    assert owner["kind"] == "Memcached" and owner["name"] == "memcached-sample"
    assert "managedFields" not in deployment["metadata"]
    assert "uid" not in deployment["metadata"]
    cr = report["customResource"]
    assert cr["action"] == "create"
    assert cr["after"]["metadata"]["finalizers"] == ["cache.example.com/finalizer"]
    assert status_condition(cr["status"], "Successful")["status"] == "True"
    assert cr["status"]["nodes"] == []  # a dry-run Deployment gets no pods
    assert report["tasks"]["failed"] == 0 and report["tasks"]["changed"] >= 3
    assert report["notPreviewable"] == []

    for api_version, kind, name in (
        ("apps/v1", "Deployment", "memcached-sample"),
        ("v1", "Service", "memcached-sample"),
        ("v1", "ConfigMap", "memcached-sample-marker"),
        ("cache.example.com/v1alpha1", "Memcached", "memcached-sample"),
    ):
        resource = dyn.resources.get(api_version=api_version, kind=kind)
        assert get_or_none(resource, name, namespace) is None, f"{kind} {name} exists"


@pytest.fixture
def reconciled_sample(
    kubeconfig: Path, dyn: Any, memcached_crd: Any, namespace: str, tmp_path: Path
) -> str:
    """The sample CR (size 1) reconciled by the real operator, which is stopped again."""
    apply(dyn, [{**_sample(), "spec": {"size": 1}}], namespace=namespace)
    (tmp_path / "operator").mkdir()
    with operator_running(
        REPO,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator" / "operator.log",
        args=["--ansible-backend", "fast"],
        env={**NO_FACTS, "WATCH_NAMESPACE": namespace},
    ):

        def settled() -> bool:
            found = memcached_crd.get(name="memcached-sample", namespace=namespace)
            ok = condition(found, "Successful")
            dirs = process_dirs(tmp_path / "operator" / "runner")
            if not ok or ok["status"] != "True" or not dirs:
                return False
            data_dir = private_data_dir(dirs[0], MEMCACHED, namespace, "memcached-sample")
            last = latest_run(data_dir)
            return last is not None and last.status == "successful"

        wait_for(settled, timeout=300, message="memcached-sample reconciled")
    return namespace


@pytest.mark.timeout(900)
def test_a_spec_change_changes_the_replicas(
    kubeconfig: Path, dyn: Any, reconciled_sample: str, tmp_path: Path
) -> None:
    namespace = reconciled_sample
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    before = steady_snapshot(dyn, namespace)
    versions = asyncio.run(_versions(kubeconfig, namespace))
    for backend in ("fast", "runner"):
        steady = plan(
            REPO,
            "--cr",
            "memcached/memcached-sample",
            "-n",
            namespace,
            kubeconfig=kubeconfig,
            scratch=tmp_path / backend,
            backend=backend,
            expect=0,
        )
        assert changes(steady) == {}, steady["changes"]

        report = plan(
            REPO,
            "--cr",
            "memcached/memcached-sample",
            "-n",
            namespace,
            "--set",
            "spec.size=3",
            kubeconfig=kubeconfig,
            scratch=tmp_path / backend,
            backend=backend,
            expect=2,
        )
        # The sample's marker ConfigMap records the size too.
        assert changes(report) == {
            "Deployment memcached-sample": "update",
            "ConfigMap memcached-sample-marker": "update",
        }
        assert diff_lines(report, "Deployment") == ["-  replicas: 1", "+  replicas: 3"]
        assert diff_lines(report, "ConfigMap") == ["-  size: '1'", "+  size: '3'"]
        assert report["customResource"]["action"] == "update"
        assert [line for line in report["customResource"]["diff"].splitlines() if line[:1] in "+-"][
            2:
        ] == ["-  size: 1", "+  size: 3"]
        assert get_or_none(deployments, "memcached-sample", namespace).spec.replicas == 1
    assert asyncio.run(_events_since(kubeconfig, versions, namespace)) == []
    assert_unchanged(before, snapshot(dyn, namespace))


@pytest.mark.timeout(900)
def test_a_patch_file_and_a_deletion_change_nothing(
    kubeconfig: Path, dyn: Any, reconciled_sample: str, tmp_path: Path
) -> None:
    """--patch with a merge patch (YAML output) and a JSON patch; --delete runs the
    finalizer's role (state: absent) with both backends, as JSON and as text; the
    cluster's objects keep their resourceVersions and no watch event is sent."""
    namespace = reconciled_sample
    cr = ["--cr", "memcached/memcached-sample", "-n", namespace]
    merge = tmp_path / "merge.yaml"
    merge.write_text("spec:\n  size: 2\n")
    operations = tmp_path / "operations.json"
    operations.write_text(json.dumps([{"op": "replace", "path": "/spec/size", "value": 4}]))
    before = steady_snapshot(dyn, namespace)
    versions = asyncio.run(_versions(kubeconfig, namespace))
    common: dict[str, Any] = {"kubeconfig": kubeconfig, "scratch": tmp_path / "tmp"}

    merged = plan(
        REPO, *cr, "--patch", str(merge), **common, backend="fast", expect=2, output="yaml"
    )
    assert merged["clusterChanged"] is False and merged["exitCode"] == 2
    assert diff_lines(merged, "Deployment") == ["-  replicas: 1", "+  replicas: 2"]
    patched = plan(REPO, *cr, "--patch", str(operations), **common, backend="runner", expect=2)
    assert diff_lines(patched, "Deployment") == ["-  replicas: 1", "+  replicas: 4"]
    assert patched["customResource"]["after"]["spec"]["size"] == 4

    finalized = plan(REPO, *cr, "--delete", **common, backend="fast", expect=2)
    assert finalized["customResource"]["deleting"] is True
    assert finalized["target"].endswith("roles/memcached")  # the watch's role, state: absent
    assert changes(finalized) == {
        "Deployment memcached-sample": "delete",
        "Service memcached-sample": "delete",
        "ConfigMap memcached-sample-marker": "delete",
    }
    # The finalizer's run succeeded, so the operator removes its finalizer: the CR goes.
    assert finalized["customResource"]["action"] == "delete"
    assert finalized["failed"] is False and finalized["tasks"]["failed"] == 0

    text = plan(REPO, *cr, "--delete", **common, backend="runner", expect=2, output="text")
    lines = text.splitlines()
    assert lines[0].startswith(
        f"Plan: the finalizer's run of Memcached {namespace}/memcached-sample"
    )
    assert lines[1].startswith("Nothing in the cluster was changed")
    for kind, name in (
        ("Deployment", "memcached-sample"),
        ("Service", "memcached-sample"),
        ("ConfigMap", "memcached-sample-marker"),
    ):
        assert f"{kind} {namespace}/{name}: would be deleted" in lines
    assert lines[-1].startswith("Plan: 0 to create, 0 to change, 3 to delete")

    assert asyncio.run(_events_since(kubeconfig, versions, namespace)) == []
    assert_unchanged(before, snapshot(dyn, namespace))


# -- roles of their own ---------------------------------------------------------------------

READ_BACK = """
- name: First ConfigMap
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-first"
        namespace: "{{ ansible_operator_meta.namespace }}"
        labels: {plan-test: "yes"}
      data: {value: "{{ word }}"}

- name: Read it back by name
  kubernetes.core.k8s_info:
    kind: ConfigMap
    name: "{{ ansible_operator_meta.name }}-first"
    namespace: "{{ ansible_operator_meta.namespace }}"
  register: by_name

- name: Read it back by label
  kubernetes.core.k8s_info:
    kind: ConfigMap
    namespace: "{{ ansible_operator_meta.namespace }}"
    label_selectors: ["plan-test=yes"]
  register: by_label

- name: Read it back with a lookup
  ansible.builtin.set_fact:
    looked_up: >-
      {{ query('kubernetes.core.k8s', kind='ConfigMap',
               namespace=ansible_operator_meta.namespace,
               resource_name=ansible_operator_meta.name ~ '-first') }}

- name: All three reads found it
  ansible.builtin.assert:
    that:
      - by_name.resources | length == 1
      - by_label.resources | length == 1
      - by_name.resources[0].data.value == word
      - looked_up | length == 1
      - looked_up[0].data.value == word

- name: Second ConfigMap copies the first
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-second"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data: {copied: "{{ by_name.resources[0].data.value }}"}

- name: First ConfigMap gets a second key (a patch of what the plan created)
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-first"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data: {more: "two"}

- name: A scratch ConfigMap
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-scratch"
        namespace: "{{ ansible_operator_meta.namespace }}"

- name: is deleted again
  kubernetes.core.k8s:
    state: absent
    api_version: v1
    kind: ConfigMap
    name: "{{ ansible_operator_meta.name }}-scratch"
    namespace: "{{ ansible_operator_meta.namespace }}"

- name: The scratch ConfigMap is gone
  kubernetes.core.k8s_info:
    kind: ConfigMap
    name: "{{ ansible_operator_meta.name }}-scratch"
    namespace: "{{ ansible_operator_meta.namespace }}"
  register: scratch
  failed_when: scratch.resources | length != 0

- name: A Secret
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: Secret
      metadata:
        name: "{{ ansible_operator_meta.name }}-secret"
        namespace: "{{ ansible_operator_meta.namespace }}"
      stringData: {password: "hunter2-{{ word }}"}

- name: Status says so
  operator_sdk.util.k8s_status:
    api_version: "{{ plan_api_version }}"
    kind: Planned
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      copied: "{{ by_name.resources[0].data.value }}"
"""

FAILING = """
- name: A ConfigMap first
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-before-failure"
        namespace: "{{ ansible_operator_meta.namespace }}"

- name: Refuse the size
  ansible.builtin.fail:
    msg: "size {{ size }} is too large"
  when: size | int > 2
"""

OUTSIDE = """
- name: Touch a file on the host
  ansible.builtin.command: touch {{ marker }}

- name: Exec into a pod
  kubernetes.core.k8s_exec:
    namespace: "{{ ansible_operator_meta.namespace }}"
    pod: no-such-pod
    command: touch /tmp/exec-marker

- name: Never runs
  ansible.builtin.shell: touch {{ marker }}-never
  when: false

- name: A Deployment waited for
  kubernetes.core.k8s:
    wait: true
    wait_timeout: 600
    definition:
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: "{{ ansible_operator_meta.name }}"
        namespace: "{{ ansible_operator_meta.namespace }}"
      spec:
        replicas: 1
        selector: {matchLabels: {app: planned}}
        template:
          metadata: {labels: {app: planned}}
          spec:
            containers: [{name: main, image: "registry.invalid/none:1"}]
"""


@pytest.fixture(scope="module")
def planned_crd(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=PLAN_GROUP, kind="Planned"))


def _project(root: Path, tasks: str) -> Path:
    return project(
        root,
        watches=[
            {
                "version": "v1alpha1",
                "group": PLAN_GROUP,
                "kind": "Planned",
                "role": "planned",
                "vars": {"plan_api_version": f"{PLAN_GROUP}/v1alpha1"},
            }
        ],
        roles={"planned": tasks},
    )


def _cr(root: Path, spec: dict[str, Any]) -> str:
    path = root / "cr.yaml"
    body = {
        "apiVersion": f"{PLAN_GROUP}/v1alpha1",
        "kind": "Planned",
        "metadata": {"name": "example"},
        "spec": spec,
    }
    path.write_text(json.dumps(body))
    return str(path)


@pytest.mark.timeout(600)
@BACKENDS
def test_a_role_reads_back_what_it_created(
    kubeconfig: Path, planned_crd: Any, namespace: str, tmp_path: Path, backend: str
) -> None:
    root = _project(tmp_path / "project", READ_BACK)
    report = plan(
        root,
        _cr(root, {"word": "planned"}),
        "-n",
        namespace,
        kubeconfig=kubeconfig,
        scratch=tmp_path / "tmp",
        backend=backend,
        expect=2,
    )
    assert report["failed"] is False, report
    assert changes(report) == {
        "ConfigMap example-first": "create",
        "ConfigMap example-second": "create",
        "Secret example-secret": "create",
    }
    by_name = {c["name"]: c["after"] for c in report["changes"]}
    assert by_name["example-first"]["data"] == {"value": "planned", "more": "two"}
    assert by_name["example-second"]["data"] == {"copied": "planned"}
    secret = by_name["example-secret"]
    assert secret["data"] == {"password": "<redacted>"}
    encoded = base64.b64encode(b"hunter2-planned").decode()
    assert "hunter2" not in json.dumps(report) and encoded not in json.dumps(report)
    assert report["customResource"]["status"]["copied"] == "planned"
    if backend == "fast":  # the flag is the command's, not the backend's
        shown = plan(
            root,
            _cr(root, {"word": "planned"}),
            "-n",
            namespace,
            "--show-secrets",
            kubeconfig=kubeconfig,
            scratch=tmp_path / "tmp",
            backend=backend,
            expect=2,
        )
        revealed = {c["name"]: c["after"] for c in shown["changes"]}["example-secret"]
        assert revealed["data"] == {"password": encoded}


@pytest.mark.timeout(600)
@BACKENDS
def test_a_failing_role_exits_1_and_names_the_task(
    kubeconfig: Path, planned_crd: Any, namespace: str, tmp_path: Path, backend: str
) -> None:
    root = _project(tmp_path / "project", FAILING)
    report = plan(
        root,
        _cr(root, {"size": 3}),
        "-n",
        namespace,
        kubeconfig=kubeconfig,
        scratch=tmp_path / "tmp",
        backend=backend,
        expect=1,
    )
    assert report["failed"] is True
    [failed] = report["tasks"]["failedTasks"]
    assert failed == {"task": "Refuse the size", "message": "size 3 is too large"}
    assert "size 3 is too large" in report["failure"]
    assert changes(report) == {"ConfigMap example-before-failure": "create"}
    assert status_condition(report["customResource"]["status"], "Failure")["status"] == "True"


@pytest.mark.timeout(600)
@BACKENDS
def test_tasks_acting_outside_the_api_are_listed_and_not_run(
    kubeconfig: Path, planned_crd: Any, namespace: str, tmp_path: Path, backend: str
) -> None:
    root = _project(tmp_path / "project", OUTSIDE)
    marker = tmp_path / "touched"
    report = plan(
        root,
        _cr(root, {"marker": str(marker)}),
        "-n",
        namespace,
        kubeconfig=kubeconfig,
        scratch=tmp_path / "tmp",
        backend=backend,
        expect=2,
    )
    assert not marker.exists()
    listed = {entry["task"]: entry for entry in report["notPreviewable"]}
    assert set(listed) == {
        "Touch a file on the host",
        "Exec into a pod",
        "A Deployment waited for",
    }
    assert listed["Touch a file on the host"]["ran"] is False
    assert "runs a program" in listed["Touch a file on the host"]["reason"]
    assert listed["Exec into a pod"]["ran"] is False
    assert "exec" in listed["Exec into a pod"]["reason"]
    waited = listed["A Deployment waited for"]
    assert waited["ran"] is True and "wait was not performed" in waited["reason"]
    assert changes(report) == {"Deployment example": "create"}
    assert report["tasks"]["failed"] == 0
    assert report["seconds"] < 300  # the wait was not waited for

    allowed = plan(
        root,
        _cr(root, {"marker": str(marker)}),
        "-n",
        namespace,
        "--allow-side-effects",
        kubeconfig=kubeconfig,
        scratch=tmp_path / "tmp",
        backend=backend,
        expect=1,  # the exec into a pod that does not exist fails
    )
    assert marker.exists()
    ran = {entry["task"]: entry["ran"] for entry in allowed["notPreviewable"]}
    assert ran["Touch a file on the host"] is True
    assert [task["task"] for task in allowed["tasks"]["failedTasks"]] == ["Exec into a pod"]


def _sample() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    return loaded


LAYERED = """
- name: Patch the live ConfigMap (the server applies it)
  kubernetes.core.k8s_json_patch:
    kind: ConfigMap
    namespace: "{{ ansible_operator_meta.namespace }}"
    name: live
    patch:
      - {op: add, path: /data/first, value: "1"}

- name: Patch it again (the plan applies it to its own copy)
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: live, namespace: "{{ ansible_operator_meta.namespace }}"}
      data: {second: "2"}

- name: A ConfigMap with a generated name
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        generateName: generated-
        namespace: "{{ ansible_operator_meta.namespace }}"

- name: The labelled ConfigMaps go
  kubernetes.core.k8s:
    state: absent
    api_version: v1
    kind: ConfigMap
    namespace: "{{ ansible_operator_meta.namespace }}"
    label_selectors: ["doomed=yes"]

- name: None is left
  kubernetes.core.k8s_info:
    kind: ConfigMap
    namespace: "{{ ansible_operator_meta.namespace }}"
    label_selectors: ["doomed=yes"]
  register: doomed
  failed_when: doomed.resources | length != 0

- name: A namespace of its own
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: Namespace
      metadata: {name: "{{ own_namespace }}"}

- name: with a ConfigMap in it
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: inside, namespace: "{{ own_namespace }}"}
      data: {a: b}
"""


@pytest.mark.timeout(600)
def test_writes_build_on_each_other(
    kubeconfig: Path, dyn: Any, planned_crd: Any, namespace: str, tmp_path: Path
) -> None:
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    configmaps.create(
        body={"metadata": {"name": "live"}, "data": {"kept": "0"}}, namespace=namespace
    )
    for name in ("doomed-1", "doomed-2"):
        configmaps.create(
            body={"metadata": {"name": name, "labels": {"doomed": "yes"}}}, namespace=namespace
        )
    own = f"{namespace}-own"
    root = _project(tmp_path / "project", LAYERED)
    report = plan(
        root,
        _cr(root, {"own_namespace": own}),
        "-n",
        namespace,
        kubeconfig=kubeconfig,
        scratch=tmp_path / "tmp",
        backend="fast",
        expect=2,
    )
    assert report["failed"] is False, report["failure"]
    found = changes(report)
    generated = [name for name in found if name.startswith("ConfigMap generated-")]
    assert len(generated) == 1 and found.pop(generated[0]) == "create"
    assert found == {
        "ConfigMap live": "update",
        "ConfigMap doomed-1": "delete",
        "ConfigMap doomed-2": "delete",
        f"Namespace {own}": "create",
        "ConfigMap inside": "create",
    }
    live = next(c for c in report["changes"] if c["name"] == "live")
    assert live["after"]["data"] == {"kept": "0", "first": "1", "second": "2"}
    assert report["unvalidated"] == [f"configmaps {own}/inside"]
    assert get_or_none(configmaps, "doomed-1", namespace) is not None
    assert configmaps.get(name="live", namespace=namespace).data.to_dict() == {"kept": "0"}
