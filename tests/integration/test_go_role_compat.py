"""A role written for the Go operator runs unchanged: the variables it reads are there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes.dynamic.exceptions import NotFoundError
from support.kube import wait_for
from support.operator import OperatorProcess, write_project

GO_STYLE_ROLE = """
- name: Record what a role written for the Go operator reads
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-compat"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        size: "{{ size | string }}"
        name: "{{ ansible_operator_meta.name }}"
        kind: "{{ _cache_example_com_memcached.kind }}"
        spec_size: "{{ _cache_example_com_memcached_spec.size | string }}"
        camel: "{{ memcached_image_tag | string }}"
"""


def test_go_operator_role_variables(
    dyn: Any, memcached_crd: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    watches = [
        {"group": "cache.example.com", "version": "v1alpha1", "kind": "Memcached", "role": "go"}
    ]
    project = write_project(tmp_path / "p", watches=watches, roles={"go": GO_STYLE_ROLE})
    proc = OperatorProcess(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "op.log",
        env={"WATCH_NAMESPACE": namespace},
    )
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    try:
        memcached_crd.create(
            body={
                "apiVersion": "cache.example.com/v1alpha1",
                "kind": "Memcached",
                "metadata": {"name": "legacy"},
                "spec": {"size": 2, "memcachedImageTag": "1.6"},
            },
            namespace=namespace,
        )

        def recorded() -> dict[str, str] | None:
            try:
                return dict(configmaps.get(name="legacy-compat", namespace=namespace).data)
            except NotFoundError:
                return None

        data = wait_for(recorded, timeout=90, message="the Go-style role ran")
        assert data == {
            "size": "2",
            "name": "legacy",
            "kind": "Memcached",
            "spec_size": "2",
            "camel": "1.6",
        }
    finally:
        proc.stop()
        print(proc.log()[-3000:])
