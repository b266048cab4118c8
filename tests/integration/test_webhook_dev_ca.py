"""`ansible-operator run` against the local cluster signs its webhook serving certificate
with the cluster's own CA (the one in the state dir next to the kubeconfig), registers
that CA, and the API server calls the webhook with it."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from support.kube import wait_for
from support.operator import OperatorProcess, install_crd, write_project

GROUP = f"whca{uuid.uuid4().hex[:6]}.example.com"
KIND = "Gadget"
PLURAL = "gadgets"

VALIDATE = """
- name: size is at most 5
  ansible.builtin.fail:
    msg: "size {{ size }} is larger than 5"
  when: (size | default(0) | int) > 5
"""


def _crd() -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "plural": PLURAL, "singular": "gadget"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}],
        },
    }


@pytest.fixture
def cluster_ca(kubeconfig: Path) -> bytes:
    ca = kubeconfig.resolve().parent / "pki" / "ca.crt"
    if not (ca.is_file() and ca.with_name("ca.key").is_file()):
        pytest.skip("the test cluster is not a local cluster of ours (no pki/ next to it)")
    return ca.read_bytes()


@pytest.fixture
def operator(tmp_path: Path, kubeconfig: Path, dyn: Any) -> Iterator[OperatorProcess]:
    install_crd(dyn, _crd())
    project = write_project(tmp_path / "project", watches=[], roles={"validate": VALIDATE})
    (project / "webhooks.yaml").write_text(
        yaml.safe_dump(
            [{"group": GROUP, "version": "v1", "kind": KIND, "validating": {"role": "validate"}}]
        )
    )
    proc = OperatorProcess(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        args=["--webhook-bind-address", "127.0.0.1:0"],
        env={"ANSIBLE_GATHERING": "explicit"},
    )
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    try:
        yield proc
    finally:
        code = proc.stop()
        print(proc.log()[-4000:])
        crds.delete(name=f"{PLURAL}.{GROUP}")
        assert code == 0


def test_run_serves_webhooks_with_the_local_clusters_ca(
    operator: OperatorProcess, cluster_ca: bytes, dyn: Any, namespace: str
) -> None:
    configurations = dyn.resources.get(
        api_version="admissionregistration.k8s.io/v1", kind="ValidatingWebhookConfiguration"
    )

    def registered() -> list[dict[str, Any]]:
        assert operator.running(), operator.log()[-3000:]
        return [
            webhook
            for item in configurations.get().to_dict()["items"]
            for webhook in item.get("webhooks") or []
            if GROUP in webhook["name"]
        ]

    webhooks = wait_for(registered, timeout=90, message="webhook registered")
    assert base64.b64decode(webhooks[0]["clientConfig"]["caBundle"]) == cluster_ca
    assert "signed by the local cluster's CA" in operator.log()

    gadgets = dyn.resources.get(api_version=f"{GROUP}/v1", kind=KIND)
    body = {
        "apiVersion": f"{GROUP}/v1",
        "kind": KIND,
        "metadata": {"name": "big", "namespace": namespace},
        "spec": {"size": 9},
    }

    def denied() -> str:
        # The API server's configuration informer may not have the new webhook yet.
        try:
            gadgets.create(body=body, namespace=namespace)
        except ApiException as err:
            return str(err.body)
        gadgets.delete(name="big", namespace=namespace)
        return ""

    message = wait_for(denied, timeout=30, message="denied by the role")
    assert "size 9 is larger than 5" in message
