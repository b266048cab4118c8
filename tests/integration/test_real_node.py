"""The real node: real pods from an image built here, reached through the API server.

All tests share the session's `real_node_cluster` (one kubelet start per session).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from support import realnode
from support.kube import wait_for, wait_for_default_service_account
from support.realnode import RealNodeCluster, on_real_node

from runner.devtools.cluster import registry
from runner.devtools.cluster.controlplane import FAKE_NODE
from runner.devtools.cluster.realnode import machine, nodeconfig
from runner.devtools.cluster.realnode import ociarchive as oci

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def core(real_node_cluster: RealNodeCluster) -> Iterator[client.CoreV1Api]:
    api = config.new_client_from_config(config_file=str(real_node_cluster.kubeconfig))
    yield client.CoreV1Api(api)
    api.close()


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = f"real-node-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for_default_service_account(core, name)
    yield name
    core.delete_namespace(name)


def tools_pod(name: str) -> dict[str, Any]:
    """The main container stays up for exec, as an unprivileged user."""
    return realnode.tools_pod(
        name,
        {
            "securityContext": {
                "runAsUser": 1001,
                "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        },
    )


def _phase(core: client.CoreV1Api, name: str, namespace: str) -> tuple[str, str] | None:
    pod = core.read_namespaced_pod(name, namespace)
    if pod.status.phase in ("Running", "Failed", "Succeeded"):
        return pod.status.phase, pod.spec.node_name
    return None


def test_pod_runs_on_the_real_node_with_logs_and_exec_through_the_api_server(
    real_node_cluster: RealNodeCluster, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_pod(ns, tools_pod("tools"))

    phase, node = wait_for(
        lambda: _phase(core, "tools", ns), timeout=120, message="pod tools running"
    )

    assert (phase, node) == ("Running", real_node_cluster.node_name)
    # The init container's output: the API server saw the pod's service-account token,
    # sent from the pod network to the `kubernetes` Service address.
    logs = real_node_cluster.kubectl("logs", "-n", ns, "tools", "-c", "whoami")
    assert logs.stdout.strip() == f"system:serviceaccount:{ns}:default"
    executed = real_node_cluster.kubectl(
        "exec", "-n", ns, "tools", "-c", "main", "--", "/kubectl", "version", "--client", "-o=json"
    )
    assert json.loads(executed.stdout)["clientVersion"]["gitVersion"].startswith("v1.")


def test_pods_reach_this_machine_only_as_the_api_server(
    real_node_cluster: RealNodeCluster, core: client.CoreV1Api, ns: str
) -> None:
    """The kubelet's port (anonymous requests allowed, for the API server) answers on
    the node's address from this machine, but not from a pod."""
    state = real_node_cluster.node.load()
    assert state is not None
    kubelet = f"https://{state.node_ip}:{state.kubelet_port}"
    core.create_namespaced_pod(ns, tools_pod("prober"))
    wait_for(lambda: _phase(core, "prober", ns), timeout=120, message="pod prober running")
    probe = [
        "--insecure-skip-tls-verify",
        "--token=anonymous",  # no prompt for credentials; the kubelet ignores it
        "--request-timeout=3s",
        "get",
        "--raw",
        "/healthz",
    ]

    from_machine = real_node_cluster.kubectl(f"--server={kubelet}", *probe)
    from_pod = real_node_cluster.kubectl(
        "exec",
        "-n",
        ns,
        "prober",
        "-c",
        "main",
        "--",
        "/kubectl",
        f"--server={kubelet}",
        *probe,
        check=False,
    )

    assert from_machine.stdout == "ok"
    assert from_pod.returncode != 0
    assert "ok" not in from_pod.stdout


def test_pods_without_the_toleration_stay_on_the_fake_node(
    real_node_cluster: RealNodeCluster, core: client.CoreV1Api, ns: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ordinary"},
        "spec": {"containers": [{"name": "c", "image": "memcached:1.6"}]},
    }

    core.create_namespaced_pod(ns, pod)

    node = wait_for(
        lambda: core.read_namespaced_pod("ordinary", ns).spec.node_name,
        timeout=60,
        message="pod ordinary scheduled",
    )
    assert node == FAKE_NODE


def test_status_shows_the_real_node(real_node_cluster: RealNodeCluster) -> None:
    lines = "\n".join(real_node_cluster.cluster.status())

    assert f"real node {real_node_cluster.node_name}" in lines
    assert "kubelet" in lines and "containerd" in lines
    assert "NOT RUNNING" not in lines


def test_images_are_pulled_from_the_local_registry_also_for_docker_io_names(
    real_node_cluster: RealNodeCluster, core: client.CoreV1Api, ns: str
) -> None:
    """With the local registry started beside the node, `memcached:1.6` (docker.io) and
    `127.0.0.1:<port>/...` are both pulled, over plain HTTP, from it."""
    cluster = real_node_cluster.cluster
    node = real_node_cluster.node
    serving = registry.start(cluster, progress=lambda _message: None)
    pushed = f"{serving.address}/library/memcached:1.6"
    try:
        real_node_cluster.import_archive(
            oci.image_archive(
                oci.ImageSpec(
                    name=pushed,
                    files={
                        "catatonit": oci.ImageFile(Path(machine.program("catatonit")).read_bytes())
                    },
                    entrypoint=("/catatonit", "-P"),
                )
            )
        )
        node.ctr("images", "push", "--plain-http", pushed)
        node.ctr("images", "remove", pushed)  # the kubelet must pull it
        pod = on_real_node(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "pulled"},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {"name": "mirrored", "image": "memcached:1.6"},
                        {"name": "direct", "image": pushed},
                    ],
                },
            }
        )
        core.create_namespaced_pod(ns, pod)
        phase, on_node = wait_for(
            lambda: _phase(core, "pulled", ns), timeout=120, message="pod pulled running"
        )
        log = cluster.addons()[registry.ADDON].log.read_text(encoding="utf-8")
    finally:
        registry.stop(cluster)
        for host in nodeconfig.registry_hosts(serving.port):
            shutil.rmtree(node.layout.registry_config / host, ignore_errors=True)

    assert (phase, on_node) == ("Running", real_node_cluster.node_name)
    # containerd resolves the tag (HEAD), then fetches by digest, naming the upstream.
    assert "/v2/library/memcached/manifests/1.6?ns=docker.io " in log
