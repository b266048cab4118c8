"""A running operator as the cluster sees it: probes, metrics (its own and the roles'),
and Kubernetes Events. (Leader election, failover and handover are tested in process in
tests/integration/engine/; end to end by test_leader_failover.py and test_shutdown.py.)"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kube import condition, create_cr, wait_for
from support.operator import OperatorProcess, Operators, crd, install_crd, write_project

from runner.devtools.cluster.processes import free_port

GROUP = "observe.test.example.com"

ROLE = """
- name: Count runs in a role metric
  operator_sdk.util.osdk_metric:
    name: observed_runs
    description: Runs of the observe role
    counter:
      increment: true

- name: Record the size in a gauge
  operator_sdk.util.osdk_metric:
    name: observed_size
    description: The size asked for
    gauge:
      set: "{{ size | default(0) }}"

- name: Empty specs, accepted as the original accepts them
  operator_sdk.util.osdk_metric:
    name: "observed_empty_{{ item }}"
    description: "An empty {{ item }}"
    counter: "{{ {} if item == 'counter' else omit }}"
    gauge: "{{ {} if item == 'gauge' else omit }}"
    histogram: "{{ {} if item == 'histogram' else omit }}"
    summary: "{{ {} if item == 'summary' else omit }}"
  loop: [counter, gauge, histogram, summary]

- name: Fail when asked
  ansible.builtin.fail:
    msg: "asked to fail: {{ reason | default('no reason') }}"
  when: fail | default(false) | bool
"""

QUIET_ROLE = """
- name: Nothing to do
  ansible.builtin.debug:
    msg: "{{ ansible_operator_meta.name }}"
"""


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


@pytest.fixture(scope="module")
def kinds(dyn: Any) -> dict[str, Any]:
    return {kind: install_crd(dyn, crd(group=GROUP, kind=kind)) for kind in ("Observed",)}


@pytest.fixture
def start(kubeconfig: Path, tmp_path: Path) -> Iterator[Callable[..., OperatorProcess]]:
    operators = Operators(kubeconfig=kubeconfig, directory=tmp_path)

    def run(kind: str, role: str, *args: str, env: dict[str, str] | None = None) -> OperatorProcess:
        watches = [
            {
                "group": GROUP,
                "version": "v1alpha1",
                "kind": kind,
                "role": "r",
                "reconcilePeriod": "0s",
            }
        ]
        project = write_project(tmp_path / "project", watches=watches, roles={"r": role})
        return operators.start(project, args=list(args), env=env)

    yield run
    operators.stop_all(tail=3000)


def events_of(api_client: Any, namespace: str, name: str) -> list[Any]:
    from kubernetes import client

    listed = client.CoreV1Api(api_client).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    )
    return list(listed.items)


def test_probes_metrics_and_events(
    start: Callable[..., OperatorProcess],
    kinds: dict[str, Any],
    api_client: Any,
    namespace: str,
) -> None:
    metrics_port, health_port = free_port(), free_port()
    proc = start(
        "Observed",
        ROLE,
        "--metrics-bind-address",
        f"127.0.0.1:{metrics_port}",
        "--health-probe-bind-address",
        f"127.0.0.1:{health_port}",
    )
    health = f"http://127.0.0.1:{health_port}"
    wait_for(lambda: http_get(f"{health}/readyz")[0] == 200, timeout=120, message="ready")
    assert http_get(f"{health}/healthz") == (200, "ok")

    observed = kinds["Observed"]
    create_cr(observed, "good", namespace, {"size": 3})
    create_cr(observed, "bad", namespace, {"fail": True, "reason": "planted failure"})

    def successful(name: str) -> bool:
        found = condition(observed.get(name=name, namespace=namespace), "Successful")
        return bool(found and found["status"] == "True")

    wait_for(lambda: successful("good"), timeout=60, message="good Successful")

    def failure_events() -> list[Any]:
        found = [e for e in events_of(api_client, namespace, "bad") if e.type == "Warning"]
        return found if found and found[0].count >= 2 else []

    warnings = wait_for(failure_events, timeout=60, message="a repeated Warning on bad")
    assert len(warnings) == 1, "repeats must fold into one Event"
    assert warnings[0].reason == "ReconcileFailed"
    assert "asked to fail: planted failure" in warnings[0].message

    # Fixing the CR gives a Normal event.
    observed.patch(
        name="bad",
        namespace=namespace,
        body={"spec": {"fail": False}},
        content_type="application/merge-patch+json",
    )
    wait_for(lambda: successful("bad"), timeout=90, message="bad Successful after the fix")
    wait_for(
        lambda: any(
            e.type == "Normal" and e.reason == "ReconcileSucceeded"
            for e in events_of(api_client, namespace, "bad")
        ),
        timeout=90,
        message="a Normal event after recovery",
    )

    status, text = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    assert status == 200
    gvk = f'GVK="{GROUP}/v1alpha1, Kind=Observed"'
    for expected in (
        "ansible_operator_build_info{",
        f'ansible_operator_reconcile_result{{{gvk},result="succeeded"}}',
        f'ansible_operator_reconcile_result{{{gvk},result="failed"}}',
        f"ansible_operator_reconciles_bucket{{{gvk},",
        f'resource_created_at_seconds{{group="{GROUP}",kind="Observed",name="good"',
        # By priority: "0"/"-100", or "" for a queue without priorities.
        'workqueue_depth{name="observed-v1alpha1-controller",priority="',
        'workqueue_retries_total{name="observed-v1alpha1-controller"}',
        'controller_runtime_reconcile_total{controller="observed-v1alpha1-controller",result="error"}',
        "observed_runs ",  # exactly the name the role gave, as in the original
        "observed_size ",
        "observed_empty_counter 0.0",  # registered, left as it is
        "observed_empty_gauge 0.0",
        "observed_empty_histogram_sum 0.0",  # observed 0
        'observed_empty_histogram_bucket{le="0.005"} ',
        "observed_empty_summary_sum 0.0",
    ):
        assert expected in text, f"{expected!r} missing from /metrics"
    assert proc.running()


def test_secure_metrics_require_an_allowed_token(
    start: Callable[..., OperatorProcess],
    kinds: dict[str, Any],
    kubeconfig: Path,
    api_client: Any,
    namespace: str,
) -> None:
    import ssl

    import yaml

    port = free_port()
    proc = start(
        "Observed",
        QUIET_ROLE,
        "--metrics-bind-address",
        f"127.0.0.1:{port}",
        "--metrics-secure",
        "--metrics-require-rbac",
    )
    url = f"https://127.0.0.1:{port}/metrics"
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE  # the certificate is self-signed

    def get(token: str | None) -> int:
        request = urllib.request.Request(url)
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10, context=insecure) as response:
                return int(response.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except OSError:
            return 0

    wait_for(lambda: get(None) != 0, timeout=90, message="metrics served over HTTPS")
    assert get(None) == 401
    assert get("not-a-token") == 403
    # A real token (it passes the TokenReview) of an account no RBAC rule lets read
    # /metrics: the SubjectAccessReview denies it.
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "nobody"}})
    issued = core.create_namespaced_service_account_token(
        "nobody", namespace, {"spec": {"expirationSeconds": 600}}
    )
    denied = urllib.request.Request(url, headers={"Authorization": f"Bearer {issued.status.token}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(denied, timeout=10, context=insecure)
    assert refused.value.code == 403
    reason = refused.value.read().decode()
    assert f"system:serviceaccount:{namespace}:nobody may not get /metrics" in reason
    admin = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    assert get(admin) == 200
    assert proc.running()
