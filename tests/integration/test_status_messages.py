"""What a failed run writes into `status.conditions` and its Event: masked, and capped
so that the status write succeeds however long the role's failure message is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from support.kube import condition, create_cr, true_condition, wait_for
from support.operator import OperatorProcess, crd, install_crd, write_project

from runner.util.redact import MESSAGE_LIMIT, REDACTED

GROUP = "messages.test.example.com"
TOKEN = "sha256~Pl4nted-T0ken-7c0ffee"

# Fails with `spec.message`, after `spec.filler` characters of padding.
FAIL_ROLE = """
- name: Fail with the message the spec asks for
  ansible.builtin.fail:
    msg: "{{ 'x' * (filler | default(0) | int) }}{{ message }}"
"""


@pytest.fixture(scope="module")
def failing(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=GROUP, kind="Failing"))


@pytest.fixture
def operator(
    failing: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> Iterator[OperatorProcess]:
    # ansible-runner's event callback drops a task result longer than MAX_EVENT_RES
    # (700,000 characters) to `{}`; raised, a role's whole 2 MB message reaches us.
    watches = [{"group": GROUP, "version": "v1alpha1", "kind": "Failing", "role": "fail"}]
    project = write_project(tmp_path / "project", watches=watches, roles={"fail": FAIL_ROLE})
    proc = OperatorProcess(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": namespace, "MAX_EVENT_RES": "10000000"},
    )
    yield proc
    proc.stop()
    print(proc.log()[-4000:])


def failure(resource: Any, name: str, namespace: str) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        return true_condition(resource.get(name=name, namespace=namespace), "Failure")

    return probe


def test_a_token_in_a_failure_message_is_masked(
    failing: Any, operator: OperatorProcess, api_client: Any, namespace: str
) -> None:
    message = f"GET https://vault.example.com/v1/x failed: Authorization: Bearer {TOKEN}"
    create_cr(failing, "leaky", namespace, {"message": message})
    found = wait_for(failure(failing, "leaky", namespace), timeout=90, message="Failure")
    assert TOKEN not in found["message"]
    assert found["message"].endswith(f"Authorization: Bearer {REDACTED}")

    def warning() -> Any:
        listed = client.CoreV1Api(api_client).list_namespaced_event(
            namespace, field_selector="involvedObject.name=leaky"
        )
        return next((e for e in listed.items if e.reason == "ReconcileFailed"), None)

    event = wait_for(warning, timeout=60, message="a ReconcileFailed Event")
    assert TOKEN not in event.message
    assert REDACTED in event.message
    assert TOKEN not in operator.log()


def test_a_two_megabyte_failure_message_still_gives_a_failure_condition(
    failing: Any, operator: OperatorProcess, namespace: str
) -> None:
    create_cr(
        failing,
        "verbose",
        namespace,
        {"filler": 2_000_000, "message": " and at the end: the real error"},
    )
    found = wait_for(failure(failing, "verbose", namespace), timeout=120, message="Failure")
    assert found["reason"] == "Failed"
    assert len(found["message"]) <= MESSAGE_LIMIT
    assert found["message"].endswith(" and at the end: the real error")
    assert found["ansibleResult"]["failures"] == 1
    running = condition(failing.get(name="verbose", namespace=namespace), "Running")
    assert running is not None and running["status"] == "False"
