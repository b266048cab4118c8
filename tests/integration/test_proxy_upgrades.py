"""Exec and logs through the API proxy, as `kubernetes.core.k8s_exec` and `k8s_log` do
them: the proxy relays the protocol switch to the API server and splices the streams.

On the shared cluster's fake (kwok) node there is no kubelet to exec into, so what is
checked there is that the request gets through to the API server's upgrade handling: the
answer is the node's, not the API server's "Upgrade request required" that a proxy
dropping `Connection: Upgrade` gets. The real thing, on a real node, is in
`test_exec_and_logs_on_a_real_node.py`.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.kube import wait_for

from runner.devtools.cluster import build
from runner.devtools.cluster.components import components
from runner.devtools.cluster.controlplane import FAKE_NODE
from runner.k8s.client import KubeClient
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.owner import KUBECTL_ENV, Owner
from runner.proxy.server import ProxyServer

ERROR_CHANNEL = 3
OWNER = Owner(api_version="v1", kind="ConfigMap", name="owner", uid="u-1", namespace="default")


@pytest.fixture
async def proxy_kubeconfig(kube: KubeClient, tmp_path: Path) -> AsyncIterator[Path]:
    """A run's kubeconfig for an API proxy serving in this test's event loop."""
    cache = InformerCache(kube, namespaces=None)
    dependents = DependentWatches(cache, enqueue=lambda gvk, key: None)
    proxy = ProxyServer(
        kube, watches=[], namespaces=None, cache=cache, dependents=dependents, port=0
    )
    await proxy.start()
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(proxy.kubeconfig(OWNER)))
    try:
        yield path
    finally:
        await proxy.stop()
        await cache.close()


def in_thread(function: Any) -> Any:
    """Run a blocking client call off the event loop the proxy serves on."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = function()
        except Exception as exc:
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


async def joined(thread: threading.Thread, result: dict[str, Any], timeout: float = 60) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while thread.is_alive():
        assert asyncio.get_running_loop().time() < deadline, "the client call did not return"
        await asyncio.sleep(0.05)
    return result


def fake_pod(api_client: Any, namespace: str) -> None:
    """A pod "fake" Running on the kwok node (no kubelet behind it)."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "fake"},
            "spec": {"nodeName": FAKE_NODE, "containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    wait_for(
        lambda: core.read_namespaced_pod("fake", namespace).status.phase == "Running",
        timeout=60,
        message="pod on the fake node Running",
    )


async def test_exec_through_the_proxy_reaches_the_api_servers_upgrade_handling(
    proxy_kubeconfig: Path, api_client: Any, namespace: str
) -> None:
    from kubernetes import client, config
    from kubernetes.stream import stream

    fake_pod(api_client, namespace)
    through_proxy = config.new_client_from_config(config_file=str(proxy_kubeconfig))

    def run_exec() -> Any:
        session = stream(
            client.CoreV1Api(through_proxy).connect_get_namespaced_pod_exec,
            "fake",
            namespace,
            command=["true"],
            stderr=True,
            stdout=True,
            stdin=False,
            tty=False,
            _preload_content=False,
        )
        session.run_forever(timeout=30)
        return session.read_channel(ERROR_CHANNEL)  # the API server's Status

    thread, result = in_thread(run_exec)
    outcome = await joined(thread, result)
    through_proxy.close()
    error = str(outcome.get("error", outcome.get("value")))
    assert "Upgrade request required" not in error
    # kube-apiserver went on to the node (here kwok's fake one, at 127.0.0.1 where nothing
    # serves its kubelet port) for the session; the wording depends on whether the API
    # server dials nodes by address (clusters started with a real node in mind) or by name.
    assert any(
        said in error for said in ("upgrade connection", "dialing backend", "error sending request")
    ), error


async def test_kubectl_with_a_runs_kubeconfig_and_environment(
    proxy_kubeconfig: Path, api_client: Any, namespace: str
) -> None:
    """`kubectl` in a role (`command:` with the run's KUBECONFIG and environment) sends
    the secret from the kubeconfig too, and its exec reaches the node."""
    fake_pod(api_client, namespace)
    kubectl = build.binary_path(components()["kubectl"], build.cache_root())
    env = {**os.environ, "KUBECONFIG": str(proxy_kubeconfig), **KUBECTL_ENV}

    async def run(*args: str) -> subprocess.CompletedProcess[str]:
        return await asyncio.to_thread(
            subprocess.run,
            [str(kubectl), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    got = await run("get", "pod", "fake", "-n", namespace, "-o", "name")
    assert (got.returncode, got.stdout.strip()) == (0, "pod/fake"), got.stderr
    executed = await run("exec", "-n", namespace, "fake", "--", "true")
    assert executed.returncode != 0  # nothing to exec into on a fake node
    assert "Upgrade request required" not in executed.stderr
    assert "unable to upgrade connection" in executed.stderr, executed.stderr
