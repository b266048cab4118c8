"""No run hangs for ever: a run over its reconcile timeout is stopped and its CR fails,
while the other CRs of the watch keep converging; the API proxy gives up on an API
server that stopped answering instead of leaving the run waiting with it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from support.kube import true_condition, wait_for
from support.operator import crd, install_crd, operator_running, write_project
from support.tcpstall import forwarding, kubeconfig_through

from runner.k8s.client import KubeClient
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.server import ProxyServer
from runner.structs import GVK
from runner.watches.model import Watch

GROUP = "limits.test.example.com"
KIND = "Hung"

# `hang: true` sleeps for an hour: as good as for ever for a test.
ROLE = """
- name: Hang when asked
  ansible.builtin.pause:
    seconds: 3600
  when: hang | default(false) | bool

- name: Otherwise finish at once
  ansible.builtin.debug:
    msg: "done {{ ansible_operator_meta.name }}"
"""


@pytest.fixture(scope="module")
def hung(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=GROUP, kind=KIND))


def _create(resource: Any, name: str, namespace: str, spec: dict[str, Any]) -> None:
    body = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": spec,
    }
    resource.create(body=body, namespace=namespace)


def _condition(resource: Any, name: str, namespace: str, kind: str) -> dict[str, Any] | None:
    return true_condition(resource.get(name=name, namespace=namespace), kind)


@pytest.mark.timeout(240)
def test_a_hung_run_times_out_and_the_watch_keeps_converging(
    hung: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    project = write_project(
        tmp_path / "project",
        watches=[{"group": GROUP, "version": "v1alpha1", "kind": KIND, "role": "r"}],
        roles={"r": ROLE},
    )
    # One worker: without a time limit the hung run would hold it for good. The flag's
    # limit is long; the watch's own variable shortens it.
    with operator_running(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        args=["--max-concurrent-reconciles", "1", "--reconcile-timeout", "1h"],
        env={
            "WATCH_NAMESPACE": namespace,
            "RECONCILE_TIMEOUT_HUNG_LIMITS_TEST_EXAMPLE_COM": "4s",
        },
    ) as proc:
        _create(hung, "stuck", namespace, {"hang": True})
        wait_for(
            lambda: f" {namespace}/stuck: running Ansible" in proc.log(),
            timeout=90,
            message="the hung run started",
        )
        names = [f"fine-{index}" for index in range(3)]
        for name in names:
            _create(hung, name, namespace, {})

        wait_for(
            lambda: all(_condition(hung, name, namespace, "Successful") for name in names),
            timeout=120,
            message="the other CRs converge beside the hung one",
        )
        failure = wait_for(
            lambda: _condition(hung, "stuck", namespace, "Failure"),
            timeout=60,
            message="the hung CR has a Failure condition",
        )
        assert "timed out after 4s" in failure["message"], failure["message"]
        assert proc.running()
    assert "reconcile Hung " in proc.log() and "timed out in" in proc.log()


# -- the proxy and a stalled API server ---------------------------------------------------


@pytest.fixture
async def stalled_proxy(kubeconfig: Path, tmp_path: Path) -> AsyncIterator[Any]:
    """An API proxy whose own connection to the API server runs through a forwarder the
    test can stall; upstream requests get 3 s."""
    admin = yaml.safe_load(kubeconfig.read_text())
    with forwarding(admin["clusters"][0]["cluster"]["server"]) as forwarder:
        path = tmp_path / "through-forwarder.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig_through(admin, forwarder)))
        client = await KubeClient.connect(kubeconfig=str(path))
        cache = InformerCache(client, namespaces=None)
        dependents = DependentWatches(cache, enqueue=lambda _gvk, _key: None)
        watch = Watch(gvk=GVK("cache.example.com", "v1alpha1", "Memcached"), role=Path("/r"))
        server = ProxyServer(
            client,
            watches=[watch],
            namespaces=None,
            cache=cache,
            dependents=dependents,
            port=0,
            request_timeout=3,
        )
        port = await server.start()
        try:
            yield forwarder, f"http://127.0.0.1:{port}", server.authorization()
        finally:
            forwarder.resume()
            await server.stop()
            await cache.close()
            await client.close()


async def test_the_proxy_answers_504_when_the_api_server_stalls(
    stalled_proxy: Any,
) -> None:
    forwarder, url, authorization = stalled_proxy
    version = f"{url}/version"  # never answered from the cache
    async with aiohttp.ClientSession(headers={"Authorization": authorization}) as session:
        async with session.get(version) as response:
            assert response.status == 200, await response.text()
        forwarder.stall()
        started = time.monotonic()
        async with session.get(version, timeout=aiohttp.ClientTimeout(total=60)) as response:
            body = await response.json()
        waited = time.monotonic() - started
        assert response.status == 504, body
        assert body["kind"] == "Status" and body["reason"] == "Timeout"
        assert waited < 30, f"the proxy waited {waited:.0f} s for a stalled API server"
        forwarder.resume()
        await asyncio.sleep(0)
        async with session.get(version) as response:
            assert response.status == 200
