"""The backend-equivalence suite: the same roles, inventory and CRs through both Ansible
backends (`--ansible-backend runner` and `fast`) must give the same `ansibleResult`, the
same status and the same objects.

Each case is a small fixture directory, `tests/fixtures/equivalence/<case>/` (see
`support/equivalence.py` for its files), plus a row of `CASES` below. All cases are served
by one operator per backend (one project made of every case's watches, roles and
playbooks), each in its own namespace, both at once; then every case is compared on its
own (`test_backends_agree[<case>]`), after checking what its runs must have done
(`expected.yaml`), so two backends wrong in the same way fail too.

The operator runs as `<python> -m runner.cli run`, `<python>` being
`$ANSIBLE_OPERATOR_TEST_PYTHON` when set (another virtualenv with this project installed,
e.g. one with a different ansible-core line; its `bin/` goes first on the operator's
`PATH` and it is the operator's `VIRTUAL_ENV`), else the interpreter running the tests.

Adding a case: make its directory, add its row.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic.exceptions import NotFoundError
from support.equivalence import (
    GROUP,
    Case,
    build_project,
    comparable,
    condition,
    custom_kinds,
    failing,
    first_run_events,
    metric_lines,
    settled,
)
from support.kube import apply, release_custom_resources, wait_steady
from support.operator import OperatorProcess, crd, install_crd

from runner.devtools.cluster.processes import free_port

PYTHON_ENV = "ANSIBLE_OPERATOR_TEST_PYTHON"
BACKENDS = ("runner", "fast")
TIMEOUT = 240
RBAC = "rbac.authorization.k8s.io/v1"

CASES = (
    Case("inventory_vars", env={"ANSIBLE_INVENTORY": "{case}/inventory"}),
    Case("filter_and_config", env={"ANSIBLE_CONFIG": "{case}/ansible.cfg"}),
    Case("vault_vars", ansible_args="--vault-password-file {case}/vault-password"),
    Case("collection_role", env={"ANSIBLE_COLLECTIONS_PATH": "{case}/collections"}),
    Case("camel_case_parameters"),
    Case("cluster_scoped_dependents"),
    Case("finalizer_playbook", delete=True),
    Case("requeue_after"),
    Case("selector"),
    Case("secret_unmanaged"),
    Case("status_custom_keys"),
    Case("user_metrics"),
    Case("include_and_import"),
    Case("handlers"),
    Case("block_rescue"),
    Case("loop_until"),
    Case("set_fact_plays"),
    Case("k8s_lookup"),
    Case("delegate_localhost"),
    Case("real_shaped"),
)


@dataclass
class Outcome:
    """What one backend left behind: per case, its objects before and after deletion."""

    namespace: str
    cases: dict[str, dict[str, Any]]
    metrics: str
    log: str
    events: dict[str, dict[str, list[Any]]]
    """Per case, per CR: the job events of its first run (`event_view`)."""


def _python_env() -> tuple[str | None, dict[str, str]]:
    python = os.environ.get(PYTHON_ENV)
    if not python:
        return None, {}
    bin_dir = Path(python).parent
    return python, {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(bin_dir.parent),
    }


class _Namespace:
    """One backend's namespace and the objects of every case in it."""

    def __init__(self, dyn: Any, core: Any, backend: str) -> None:
        self.dyn = dyn
        self.core = core
        self.name = f"eq-{backend}-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": self.name}})

    def resource(self, obj: dict[str, Any]) -> Any:
        return self.dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])

    def get(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        try:
            found = self.resource(obj).get(name=obj["metadata"]["name"], namespace=self.name)
        except NotFoundError:
            return None
        return dict(found.to_dict())

    def configmap(self, name: str) -> dict[str, Any] | None:
        return self.get({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})

    def _cluster_roles(self) -> Any:
        return self.dyn.resources.get(api_version=RBAC, kind="ClusterRole")

    def cluster_roles(self, case: Case) -> list[dict[str, Any]]:
        selector = f"{GROUP}/case={case.name}"
        listed = self._cluster_roles().get(label_selector=selector).to_dict()["items"]
        return [item for item in listed if self.name in item["metadata"]["name"]]

    def delete(self) -> None:
        release_custom_resources(self.dyn, self.name)
        for case in CASES:
            for item in self.cluster_roles(case):
                self._cluster_roles().delete(name=item["metadata"]["name"])
        self.core.delete_namespace(self.name)


def _snapshot(ns: _Namespace, case: Case) -> dict[str, Any]:
    """The case's objects in `ns`: its CRs, the ConfigMaps its runs wrote or that it set
    up, and the cluster-scoped objects it made."""
    expected = case.expected()
    deleted = expected.get("deleted") or {}
    names = {
        *(expected.get("configmaps") or {}),
        *(expected.get("absent") or ()),
        *(deleted.get("configmaps") or {}),
        *(deleted.get("absent") or ()),
        *(obj["metadata"]["name"] for obj in case.objects("setup.yaml")),
    }
    crs = {}
    for obj in case.objects("cr.yaml"):
        found = ns.get(obj)
        crs[obj["metadata"]["name"]] = None if found is None else _cr_view(found)
    return comparable(
        {
            "crs": crs,
            "configmaps": {name: ns.configmap(name) for name in sorted(names)},
            "cluster": [_object_view(item) for item in ns.cluster_roles(case)],
        },
        ns.name,
    )


def _cr_view(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "finalizers": meta.get("finalizers") or [],
        "annotations": meta.get("annotations") or {},
        "status": obj.get("status"),
    }


def _object_view(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    if obj is None:
        return None
    return {key: value for key, value in obj.items() if key not in ("status",)}


def _done(ns: _Namespace, case: Case, *, after_delete: bool) -> bool:
    """Every run the case needs has happened in `ns` (then the objects must be steady)."""
    expected = case.expected()
    if after_delete:
        expected = expected.get("deleted") or {}
        if any(ns.get(obj) is not None for obj in case.objects("cr.yaml")):
            return False
    else:
        unreconciled = set(expected.get("unreconciled") or ())
        statuses = case.manages_status()
        for obj in case.objects("cr.yaml"):
            name = obj["metadata"]["name"]
            if name in unreconciled or not statuses[obj["kind"]]:
                continue
            found = ns.get(obj)
            if found is not None and failing(found.get("status")):
                return True  # `_check_expected` says what failed, without a long wait
            if found is None or not settled(found.get("status")):
                return False
    # Their content is checked afterwards (`_check_expected`), once steady.
    if any(ns.configmap(name) is None for name in expected.get("configmaps") or {}):
        return False
    return all(ns.configmap(name) is None for name in expected.get("absent") or ())


def _wait_all(spaces: list[_Namespace], *, after_delete: bool) -> dict[str, dict[str, Any]]:
    """Wait until every case is done in every namespace and its objects are steady;
    return {namespace: {case: snapshot}}."""
    cases = [case for case in CASES if case.delete or not after_delete]

    def pending() -> list[str]:
        return [
            f"{ns.name}:{case.name}"
            for ns in spaces
            for case in cases
            if not _done(ns, case, after_delete=after_delete)
        ]

    deadline = time.monotonic() + TIMEOUT
    while waiting := pending():
        if time.monotonic() > deadline:
            shown = {
                key: _snapshot(ns, case)
                for ns in spaces
                for case in cases
                if (key := f"{ns.name}:{case.name}") in waiting
            }
            raise AssertionError(f"cases not done after {TIMEOUT} s: {shown}")
        time.sleep(1)
    return wait_steady(
        lambda: {ns.name: {case.name: _snapshot(ns, case) for case in cases} for ns in spaces},
        quiet=3,
        timeout=TIMEOUT,
        message="the objects of every case steady",
        interval=0.5,
    )


@pytest.fixture(scope="module")
def outcomes(
    kubeconfig: Path, dyn: Any, api_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Outcome]]:
    from kubernetes import client

    for kind in custom_kinds(CASES):
        install_crd(dyn, crd(group=GROUP, kind=kind))
    core = client.CoreV1Api(api_client)
    root = tmp_path_factory.mktemp("equivalence")
    project = build_project(root / "project", CASES)
    python, python_env = _python_env()
    spaces: dict[str, _Namespace] = {}
    procs: dict[str, OperatorProcess] = {}
    ports: dict[str, int] = {}
    try:
        for backend in BACKENDS:
            ns = spaces[backend] = _Namespace(dyn, core, backend)
            for case in CASES:
                apply(dyn, case.objects("setup.yaml"), namespace=ns.name)
            ports[backend] = free_port()
            args = ["--ansible-backend", backend]
            args += ["--metrics-bind-address", f"127.0.0.1:{ports[backend]}"]
            if project.ansible_args:
                args += ["--ansible-args", project.ansible_args]
            procs[backend] = OperatorProcess(
                project.root,
                kubeconfig=kubeconfig,
                log=root / backend / "operator.log",
                args=args,
                env={**project.env, **python_env, "WATCH_NAMESPACE": ns.name},
                python=python,
            )
        for backend in BACKENDS:
            for case in CASES:
                apply(dyn, case.objects("cr.yaml"), namespace=spaces[backend].name)
        ordered = [spaces[backend] for backend in BACKENDS]
        before = _wait_all(ordered, after_delete=False)
        events = {
            backend: {
                case.name: {
                    obj["metadata"]["name"]: first_run_events(
                        root / backend / "runner",
                        obj["kind"],
                        spaces[backend].name,
                        obj["metadata"]["name"],
                    )
                    for obj in case.objects("cr.yaml")
                }
                for case in CASES
            }
            for backend in BACKENDS
        }
        for ns in ordered:
            for case in CASES:
                if case.delete:
                    for obj in case.objects("cr.yaml"):
                        ns.resource(obj).delete(name=obj["metadata"]["name"], namespace=ns.name)
        after = _wait_all(ordered, after_delete=True)
        results = {}
        for backend in BACKENDS:
            ns = spaces[backend]
            cases = {
                case.name: {
                    "reconciled": before[ns.name][case.name],
                    "deleted": after[ns.name].get(case.name),
                }
                for case in CASES
            }
            url = f"http://127.0.0.1:{ports[backend]}/metrics"
            with urllib.request.urlopen(url, timeout=10) as response:
                metrics = response.read().decode()
            results[backend] = Outcome(
                ns.name, cases, metrics, procs[backend].log(), events[backend]
            )
        yield results
    finally:
        for backend, proc in procs.items():
            proc.stop()
            print(f"--- {backend} operator: {_summary(proc.log())}")
            print(f"--- {backend} operator log (tail)\n{proc.log()[-4000:]}")
        for ns in spaces.values():
            ns.delete()


def _summary(log: str) -> dict[str, int]:
    """`<Kind> <result>` -> how many reconciles ended so (what to look at first)."""
    found = re.findall(r"reconcile (\S+) \S+: (failed|succeeded) in", log)
    return dict(sorted(Counter(f"{kind} {result}" for kind, result in found).items()))


def _check_expected(case: Case, outcome: Outcome) -> None:
    """What the case's runs must have done, on any backend."""
    expected = case.expected()
    reconciled = outcome.cases[case.name]["reconciled"]
    for name, cr in reconciled["crs"].items():
        failure = condition(cr["status"] if cr else None, "Failure")
        assert not (failure and failure["status"] == "True"), f"{name}: {failure}"
    for name, data in (expected.get("configmaps") or {}).items():
        assert reconciled["configmaps"][name]["data"] == data, name
    for name in expected.get("absent") or ():
        assert reconciled["configmaps"][name] is None, name
    for name, keys in (expected.get("status") or {}).items():
        status = reconciled["crs"][name]["status"]
        assert {key: status.get(key) for key in keys} == keys, name
    for name in expected.get("unreconciled") or ():
        assert reconciled["crs"][name]["status"] is None, name
    for line in expected.get("metrics") or ():
        assert line in outcome.metrics.splitlines(), line
    deleted = expected.get("deleted")
    if deleted:
        after = outcome.cases[case.name]["deleted"]
        assert all(cr is None for cr in after["crs"].values()), "the CRs are gone"
        for name, data in (deleted.get("configmaps") or {}).items():
            assert after["configmaps"][name]["data"] == data, name


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_backends_agree(case: Case, outcomes: dict[str, Outcome]) -> None:
    runner, fast = outcomes["runner"], outcomes["fast"]
    _check_expected(case, runner)
    _check_expected(case, fast)
    assert fast.cases[case.name] == runner.cases[case.name]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_job_events_agree(case: Case, outcomes: dict[str, Outcome]) -> None:
    """The first run of each CR wrote the same job events with both backends (but for
    uuids, pids, times and the namespace's name): same tasks, results, output lines."""
    runner, fast = outcomes["runner"].events[case.name], outcomes["fast"].events[case.name]
    unreconciled = set(case.expected().get("unreconciled") or ())
    for name, events in runner.items():
        if name in unreconciled:
            assert events == fast[name] == [], name
            continue
        assert events, f"{name}: no job events of the runner backend"
        assert [e["event"] for e in fast[name]] == [e["event"] for e in events], name
        for index, (left, right) in enumerate(zip(fast[name], events, strict=True)):
            assert left == right, f"{name}: event {index} ({right['event']})"


def test_metrics_agree(outcomes: dict[str, Outcome]) -> None:
    """The roles' own metrics have the same values; the reconcile results are counted
    for the same kinds, and, as in the original, not for a watch without managed status
    (the Secret watch)."""
    user = {b: metric_lines(o.metrics, ["equivalence_"]) for b, o in outcomes.items()}
    assert user["fast"] == user["runner"]
    series = {
        backend: sorted(
            line.rsplit(" ", 1)[0]
            for line in metric_lines(outcome.metrics, ["ansible_operator_reconcile_result{"])
        )
        for backend, outcome in outcomes.items()
    }
    assert series["fast"] == series["runner"]
    assert series["runner"], "reconcile results are counted"
    assert not [line for line in series["runner"] if "Kind=Secret" in line]
