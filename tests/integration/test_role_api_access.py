"""A role's API work of every kind reaches the cluster through the API proxy, which
answers only this operator process's runs: `k8s`, `k8s_info`, `lookup('k8s')` and
`operator_sdk.util.k8s_status`, on both backends, with nothing in the role about it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.kube import true_condition, wait_for
from support.operator import crd, install_crd, operator_running, write_project

GROUP = "apiaccess.test.example.com"

ROLE = """
- name: Create a ConfigMap
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-data"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        greeting: "{{ greeting }}"

- name: Read it back
  kubernetes.core.k8s_info:
    kind: ConfigMap
    namespace: "{{ ansible_operator_meta.namespace }}"
    name: "{{ ansible_operator_meta.name }}-data"
  register: found

- name: Report what both ways of reading saw
  operator_sdk.util.k8s_status:
    api_version: apiaccess.test.example.com/v1alpha1
    kind: Reader
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      fromInfo: "{{ found.resources[0].data.greeting }}"
      fromLookup: >-
        {{ lookup('kubernetes.core.k8s', kind='ConfigMap',
                  namespace=ansible_operator_meta.namespace,
                  resource_name=ansible_operator_meta.name ~ '-data').data.greeting }}
"""


@pytest.fixture(scope="module")
def readers(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=GROUP, kind="Reader"))


@pytest.mark.parametrize("backend", ["fast", "runner"])
def test_a_roles_api_tasks_work_through_the_guarded_proxy(
    backend: str,
    kubeconfig: Path,
    tmp_path: Path,
    namespace: str,
    readers: Any,
    api_client: Any,
) -> None:
    from kubernetes import client

    watch = {"group": GROUP, "version": "v1alpha1", "kind": "Reader", "role": "reader"}
    project = write_project(tmp_path / "project", watches=[watch], roles={"reader": ROLE})
    with operator_running(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        args=["--ansible-backend", backend],
    ) as operator:
        readers.create(
            body={
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "Reader",
                "metadata": {"name": "r", "namespace": namespace},
                "spec": {"greeting": f"hello from {backend}"},
            },
            namespace=namespace,
        )

        def done() -> Any:
            found = readers.get(name="r", namespace=namespace)
            return found if true_condition(found, "Successful") else None

        cr = wait_for(done, timeout=180, message="Reader r Successful")
        assert cr.status.fromInfo == f"hello from {backend}"
        assert cr.status.fromLookup == f"hello from {backend}"
        made = client.CoreV1Api(api_client).read_namespaced_config_map("r-data", namespace)
        (reference,) = made.metadata.owner_references  # the owner still travels along
        assert (reference.kind, reference.name) == ("Reader", "r")
        assert "refused" not in operator.log()
