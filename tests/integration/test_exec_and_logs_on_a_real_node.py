"""`kubernetes.core.k8s_exec` and `k8s_log` from a role, through the operator's API proxy,
on a real pod (a real kubelet and containerd: the session's `real_node_cluster`)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from support import realnode
from support.kube import condition, wait_for, wait_for_default_service_account
from support.operator import crd, install_crd, operator_running, write_project
from support.realnode import RealNodeCluster

from runner.k8s.client import KubeClient
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.server import ProxyServer

pytestmark = pytest.mark.timeout(600)

GROUP = "podwork.test.example.com"
SERVING = "Starting to serve on 127.0.0.1:8001"

ROLE = """
- name: Run a command in the pod
  kubernetes.core.k8s_exec:
    namespace: "{{ ansible_operator_meta.namespace }}"
    pod: "{{ pod }}"
    container: main
    command: /kubectl version --client -o json
  register: executed

- name: Read the running container's log
  kubernetes.core.k8s_log:
    namespace: "{{ ansible_operator_meta.namespace }}"
    name: "{{ pod }}"
    container: main
  register: logged

- name: Read the finished init container's log
  kubernetes.core.k8s_log:
    namespace: "{{ ansible_operator_meta.namespace }}"
    name: "{{ pod }}"
    container: whoami
  register: finished

- name: Report what the pod said
  operator_sdk.util.k8s_status:
    api_version: podwork.test.example.com/v1alpha1
    kind: PodWork
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      execRc: "{{ executed.rc }}"
      clientVersion: "{{ (executed.stdout | from_json).clientVersion.gitVersion }}"
      log: "{{ logged.log | trim }}"
      whoami: "{{ finished.log | trim }}"
"""


def tools_pod(name: str) -> dict[str, Any]:
    """The main container prints one line (`kubectl proxy` starting) and keeps running, to
    exec into and to follow."""
    return realnode.tools_pod(name, {"command": ["/kubectl", "proxy", "--port=8001"]})


@pytest.fixture(scope="module")
def real_api(real_node_cluster: RealNodeCluster) -> Iterator[Any]:
    api = config.new_client_from_config(config_file=str(real_node_cluster.kubeconfig))
    yield api
    api.close()


@pytest.fixture(scope="module")
def pod_work(real_api: Any) -> Any:
    return install_crd(DynamicClient(real_api), crd(group=GROUP, kind="PodWork"))


@pytest.fixture
def pod_namespace(real_api: Any) -> Iterator[str]:
    """A namespace with a running tools pod `tools` on the real node."""
    core = client.CoreV1Api(real_api)
    name = f"podwork-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    try:
        wait_for_default_service_account(core, name)
        core.create_namespaced_pod(name, tools_pod("tools"))
        wait_for(
            lambda: _logged(core, name, SERVING),
            timeout=180,
            message="pod tools running on the real node, its main container serving",
        )
        yield name
    finally:
        core.delete_namespace(name)


def _logged(core: client.CoreV1Api, namespace: str, text: str) -> bool:
    try:
        # The client gives None for a container that has logged nothing yet.
        return text in (core.read_namespaced_pod_log("tools", namespace, container="main") or "")
    except client.ApiException:
        return False


@pytest.mark.parametrize("backend", ["fast", "runner"])
def test_a_role_execs_and_reads_logs_through_the_proxy(
    backend: str,
    real_node_cluster: RealNodeCluster,
    pod_work: Any,
    pod_namespace: str,
    tmp_path: Path,
) -> None:
    watch = {"group": GROUP, "version": "v1alpha1", "kind": "PodWork", "role": "podwork"}
    project = write_project(tmp_path / "project", watches=[watch], roles={"podwork": ROLE})
    with operator_running(
        project,
        kubeconfig=real_node_cluster.kubeconfig,
        log=tmp_path / "operator.log",
        args=["--ansible-backend", backend],
    ) as operator:
        pod_work.create(
            body={
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "PodWork",
                "metadata": {"name": "work", "namespace": pod_namespace},
                "spec": {"pod": "tools"},
            },
            namespace=pod_namespace,
        )

        def finished() -> Any:
            found = pod_work.get(name="work", namespace=pod_namespace)
            for kind in ("Successful", "Failure"):
                seen = condition(found, kind)
                if seen and seen["status"] == "True":
                    return found
            return None

        cr = wait_for(finished, timeout=240, message="PodWork work reconciled")
        failure = condition(cr, "Failure")
        assert failure is None or failure["status"] != "True", failure
        assert cr.status.execRc == 0
        assert cr.status.clientVersion.startswith("v1.")
        assert cr.status.log == SERVING
        assert cr.status.whoami == f"system:serviceaccount:{pod_namespace}:default"
        assert "Upgrade request required" not in operator.log()


async def test_a_followed_log_streams_while_the_container_runs(
    real_node_cluster: RealNodeCluster, pod_work: Any, pod_namespace: str
) -> None:
    """The first line of a followed log (`kubectl logs -f`, or a client's
    `follow=True`; `k8s_log` has no follow) arrives while the container still runs: a
    proxy that read the whole answer first would wait for the container to end. And an
    exec over WebSocket, as `k8s_exec` makes it, returns the command's output."""
    kube = await KubeClient.connect(kubeconfig=str(real_node_cluster.kubeconfig))
    cache = InformerCache(kube, namespaces=None)
    dependents = DependentWatches(cache, enqueue=lambda gvk, key: None)
    proxy = ProxyServer(
        kube, watches=[], namespaces=None, cache=cache, dependents=dependents, port=0
    )
    await proxy.start()
    try:
        url = (
            f"http://127.0.0.1:{proxy.port}/api/v1/namespaces/{pod_namespace}/pods/tools/log"
            "?container=main&follow=true"
        )
        async with (
            aiohttp.ClientSession() as session,
            session.get(url, headers={"Authorization": proxy.authorization()}) as response,
        ):
            assert response.status == 200
            line = await asyncio.wait_for(response.content.readline(), 30)
            assert line.decode().strip() == SERVING
        exec_url = (
            f"http://127.0.0.1:{proxy.port}/api/v1/namespaces/{pod_namespace}/pods/tools/exec"
            "?container=main&command=/kubectl&command=version&command=--client"
            "&command=-o&command=json&stdout=true"
        )
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                exec_url,
                protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"),
                headers={"Authorization": proxy.authorization()},
            ) as ws,
        ):
            out = b""
            async for message in ws:
                if message.type == aiohttp.WSMsgType.BINARY and message.data[:1] == b"\x01":
                    out += message.data[1:]
        assert json.loads(out)["clientVersion"]["gitVersion"].startswith("v1.")
    finally:
        await proxy.stop()
        await cache.close()
        await kube.close()
