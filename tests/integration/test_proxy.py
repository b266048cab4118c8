"""The API proxy in-process against the real API server: who may use it, credentials,
owner injection, the cache, streaming watches, dependent-watch registration, and where it
may listen."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from runner.errors import ProxyError
from runner.k8s.client import KubeClient
from runner.proxy.access import basic_authorization
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.owner import (
    PRIMARY_RESOURCE_ANNOTATION,
    PRIMARY_RESOURCE_TYPE_ANNOTATION,
    Owner,
    encode_owner,
)
from runner.proxy.server import ProxyServer
from runner.structs import GVK, NamespacedName
from runner.watches.model import Watch

MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
CONFIGMAP = GVK("", "v1", "ConfigMap")
SECRET = GVK("", "v1", "Secret")


@dataclass
class Proxy:
    server: ProxyServer
    url: str
    cache: InformerCache
    dependents: DependentWatches
    enqueued: list[tuple[GVK, NamespacedName]] = field(default_factory=list)

    def auth(self, owner: Owner | None = None) -> dict[str, str]:
        """The Authorization a run's kubeconfig makes its client send (for `owner`)."""
        username = encode_owner(owner) if owner is not None else ""
        return {"Authorization": basic_authorization(username, self.server.secret)}


@pytest.fixture
async def start_proxy(kube: KubeClient) -> AsyncIterator[Callable[..., Any]]:
    started: list[tuple[ProxyServer, InformerCache]] = []

    async def start(
        *, namespaces: list[str] | None = None, watch_cluster_scoped: bool = False
    ) -> Proxy:
        cache = InformerCache(kube, namespaces=namespaces)
        enqueued: list[tuple[GVK, NamespacedName]] = []
        dependents = DependentWatches(cache, enqueue=lambda gvk, key: enqueued.append((gvk, key)))
        watch = Watch(
            gvk=MEMCACHED,
            role=Path("/unused"),
            blacklist=(SECRET,),
            watch_cluster_scoped_resources=watch_cluster_scoped,
        )
        server = ProxyServer(
            kube,
            watches=[watch],
            namespaces=namespaces,
            cache=cache,
            dependents=dependents,
            port=0,
        )
        started.append((server, cache))
        port = await server.start()
        return Proxy(server, f"http://127.0.0.1:{port}", cache, dependents, enqueued)

    yield start
    for server, cache in started:
        await server.stop()
        await cache.close()


@pytest.fixture
async def owner(kube: KubeClient, namespace: str) -> Owner:
    """A real Memcached CR (garbage collection would remove dependents of a fake one)."""
    created = await kube.create(
        MEMCACHED,
        {
            "apiVersion": MEMCACHED.api_version,
            "kind": "Memcached",
            "metadata": {"name": "owner", "namespace": namespace},
            "spec": {"size": 1},
        },
    )
    return Owner(
        api_version=MEMCACHED.api_version,
        kind="Memcached",
        name="owner",
        uid=created["metadata"]["uid"],
        namespace=namespace,
    )


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"key": "value"},
    }


async def request(
    method: str, url: str, *, headers: dict[str, str] | None = None, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, headers=headers, json=body) as response,
    ):
        text = await response.text()
        return response.status, dict(response.headers), json.loads(text) if text else None


async def test_client_credentials_are_replaced_by_the_operators(
    start_proxy: Callable[..., Any], kubeconfig: Path, namespace: str
) -> None:
    proxy = await start_proxy()
    ours = proxy.auth()
    config = yaml.safe_load(kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{server}/api/v1/namespaces/{namespace}", headers=ours, ssl=False) as direct,
    ):
        # The run's credential means nothing to the API server (anonymous: 401 or 403).
        assert direct.status in (401, 403)

    status, _, body = await request(
        "GET", f"{proxy.url}/api/v1/namespaces/{namespace}", headers=ours
    )
    assert status == 200
    assert body["metadata"]["name"] == namespace
    assert "managedFields" not in body["metadata"]  # hidden, like the cached objects


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param(None, id="no-credential"),
        pytest.param("go-operator-password", id="wrong-credential"),
        pytest.param("bearer", id="bearer-instead-of-basic"),
    ],
)
async def test_requests_without_the_run_credential_get_401(
    start_proxy: Callable[..., Any], owner: Owner, namespace: str, authorization: str | None
) -> None:
    proxy = await start_proxy()
    headers = {}
    if authorization == "go-operator-password":
        headers = {"Authorization": basic_authorization(encode_owner(owner), "unused")}
    elif authorization == "bearer":
        headers = {"Authorization": f"Bearer {proxy.server.secret}"}
    base = f"{proxy.url}/api/v1/namespaces/{namespace}/configmaps"
    for method, url, body in (
        ("GET", f"{proxy.url}/api/v1/namespaces/{namespace}", None),
        ("GET", base, None),
        ("POST", base, configmap("intruder")),
        ("GET", f"{proxy.url}/version", None),
    ):
        status, response_headers, answer = await request(method, url, headers=headers, body=body)
        assert status == 401, (method, url, answer)
        assert answer["kind"] == "Status" and answer["reason"] == "Unauthorized"
        assert response_headers["WWW-Authenticate"].startswith("Basic")
    assert proxy.server.stats.refused == 4
    assert proxy.server.stats.injected == 0
    # Nothing was created on the intruder's behalf.
    status, _, listed = await request("GET", base, headers=proxy.auth(owner))
    assert status == 200
    assert "intruder" not in [item["metadata"]["name"] for item in listed["items"]]


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        pytest.param("attacker.example:{port}", False, id="rebound-dns-name"),
        pytest.param("attacker.example", False, id="rebound-dns-name-no-port"),
        pytest.param("127.0.0.1:1", False, id="other-port"),
        pytest.param("localhost.attacker.example:{port}", False, id="lookalike"),
        pytest.param("127.0.0.1:{port}", True, id="ipv4"),
        pytest.param("localhost:{port}", True, id="localhost"),
        pytest.param("[::1]:{port}", True, id="ipv6"),
    ],
)
async def test_foreign_host_headers_are_refused(
    start_proxy: Callable[..., Any], namespace: str, host: str, allowed: bool
) -> None:
    """A web page whose DNS name was rebound to 127.0.0.1 sends its own name as Host: it
    gets nothing, even with the right credential."""
    proxy = await start_proxy()
    headers = {**proxy.auth(), "Host": host.format(port=proxy.server.port)}
    status, _, body = await request(
        "GET", f"{proxy.url}/api/v1/namespaces/{namespace}", headers=headers
    )
    if allowed:
        assert status == 200, body
        assert body["metadata"]["name"] == namespace
    else:
        assert status == 403, body
        assert body["reason"] == "Forbidden"
        assert proxy.server.stats.refused == 1


async def test_create_gets_an_owner_reference_and_starts_a_dependent_watch(
    start_proxy: Callable[..., Any], owner: Owner, namespace: str
) -> None:
    proxy = await start_proxy()
    status, _, created = await request(
        "POST",
        f"{proxy.url}/api/v1/namespaces/{namespace}/configmaps",
        headers=proxy.auth(owner),
        body=configmap("owned"),
    )
    assert status == 201, created
    assert created["metadata"]["ownerReferences"] == [
        {
            "apiVersion": MEMCACHED.api_version,
            "kind": "Memcached",
            "name": "owner",
            "uid": owner.uid,
        }
    ]
    assert proxy.dependents.watching(CONFIGMAP, MEMCACHED)
    assert proxy.server.stats.injected == 1

    # Without an owner identity the request is still served, untouched.
    status, _, plain = await request(
        "POST",
        f"{proxy.url}/api/v1/namespaces/{namespace}/configmaps",
        headers=proxy.auth(),
        body=configmap("plain"),
    )
    assert status == 201
    assert "ownerReferences" not in plain["metadata"]


async def test_cross_namespace_create_gets_annotations(
    start_proxy: Callable[..., Any], owner: Owner, kube: KubeClient, api_client: Any
) -> None:
    from kubernetes import client

    other = f"t-proxy-other-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": other}})
    try:
        proxy = await start_proxy()
        status, _, created = await request(
            "POST",
            f"{proxy.url}/api/v1/namespaces/{other}/configmaps",
            headers=proxy.auth(owner),
            body=configmap("remote"),
        )
        assert status == 201, created
        assert "ownerReferences" not in created["metadata"]
        annotations = created["metadata"]["annotations"]
        assert annotations[PRIMARY_RESOURCE_ANNOTATION] == f"{owner.namespace}/owner"
        assert annotations[PRIMARY_RESOURCE_TYPE_ANNOTATION] == "Memcached.cache.example.com"

        # Once the dependent watch has listed it, deleting it (by anyone) reconciles the
        # owner. (Deleted before that first list, the watch would never have seen it.)
        informer = proxy.cache.informer(CONFIGMAP)
        await wait_until(
            lambda: informer.get(NamespacedName(other, "remote")) is not None,
            message="the dependent watch has the ConfigMap",
        )
        await kube.delete(CONFIGMAP, name="remote", namespace=other)
        await wait_until(lambda: (MEMCACHED, owner.key) in proxy.enqueued, message="owner enqueued")
    finally:
        core.delete_namespace(other)


PRIORITY_CLASS = GVK("scheduling.k8s.io", "v1", "PriorityClass")


@pytest.mark.parametrize(
    ("watch_namespace", "watch_cluster_scoped", "watched"),
    [
        pytest.param(True, True, False, id="under-WATCH_NAMESPACE"),
        pytest.param(False, True, True, id="all-namespaces-watchClusterScopedResources"),
        pytest.param(False, False, False, id="all-namespaces"),
    ],
)
async def test_a_cluster_scoped_dependent_of_a_namespaced_cr_gets_annotations(
    start_proxy: Callable[..., Any],
    owner: Owner,
    namespace: str,
    kube: KubeClient,
    watch_namespace: bool,
    watch_cluster_scoped: bool,
    watched: bool,
) -> None:
    """As the Go operator's proxy: an ownerReference cannot cross scopes, so the object
    gets the primary-resource annotations, whatever the operator watches. It is watched
    as a dependent only with watchClusterScopedResources, and never by an operator
    limited to namespaces (its cache cannot list a cluster-scoped kind)."""
    proxy = await start_proxy(
        namespaces=[namespace] if watch_namespace else None,
        watch_cluster_scoped=watch_cluster_scoped,
    )
    name = f"t-proxy-{uuid.uuid4().hex[:8]}"
    body = {
        "apiVersion": PRIORITY_CLASS.api_version,
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": 7,
    }
    try:
        status, _, created = await request(
            "POST",
            f"{proxy.url}/apis/scheduling.k8s.io/v1/priorityclasses",
            headers=proxy.auth(owner),
            body=body,
        )
        assert status == 201, created
        assert "ownerReferences" not in created["metadata"]
        annotations = created["metadata"]["annotations"]
        assert annotations[PRIMARY_RESOURCE_ANNOTATION] == f"{namespace}/owner"
        assert annotations[PRIMARY_RESOURCE_TYPE_ANNOTATION] == "Memcached.cache.example.com"
        assert proxy.server.stats.injected == 1
        assert proxy.dependents.watching(PRIORITY_CLASS, MEMCACHED) is watched
    finally:
        await kube.delete(PRIORITY_CLASS, name=name, namespace="")


async def test_reads_of_watched_kinds_come_from_the_cache(
    start_proxy: Callable[..., Any], owner: Owner, namespace: str
) -> None:
    proxy = await start_proxy()
    base = f"{proxy.url}/api/v1/namespaces/{namespace}/configmaps"
    for name, tier in (("a", "web"), ("b", "db")):
        status, _, _ = await request(
            "POST", base, headers=proxy.auth(owner), body=configmap(name, tier=tier)
        )
        assert status == 201

    async def cached_get() -> dict[str, Any] | None:
        status, headers, body = await request("GET", f"{base}/a", headers=proxy.auth(owner))
        assert status == 200
        return body if headers.get("X-Cache") == "HIT" else None

    body = await wait_until_value(cached_get, message="GET answered from the cache")
    assert body["metadata"]["name"] == "a"
    assert body["kind"] == "ConfigMap"

    status, headers, listed = await request(
        "GET", f"{base}?labelSelector=tier%3Dweb", headers=proxy.auth()
    )
    assert status == 200
    assert headers.get("X-Cache") == "HIT"
    assert listed["kind"] == "ConfigMapList"
    assert [item["metadata"]["name"] for item in listed["items"]] == ["a"]

    # A missing object is not a cached 404: the API server answers.
    status, headers, _ = await request("GET", f"{base}/missing", headers=proxy.auth())
    assert status == 404
    assert "X-Cache" not in headers

    # Blacklisted kinds are never served from the cache.
    status, headers, _ = await request(
        "GET", f"{proxy.url}/api/v1/namespaces/{namespace}/secrets", headers=proxy.auth(owner)
    )
    assert status == 200
    assert "X-Cache" not in headers
    assert proxy.server.stats.cache_hits >= 2


async def test_dependent_updates_that_matter_enqueue_the_owner(
    start_proxy: Callable[..., Any], owner: Owner, namespace: str, kube: KubeClient
) -> None:
    proxy = await start_proxy()
    status, _, _ = await request(
        "POST",
        f"{proxy.url}/api/v1/namespaces/{namespace}/configmaps",
        headers=proxy.auth(owner),
        body=configmap("watched"),
    )
    assert status == 201
    informer = proxy.cache.informer(CONFIGMAP)  # the dependent watch's informer
    await wait_until(
        lambda: informer.get(NamespacedName(namespace, "watched")) is not None,
        message="informer has the new ConfigMap",
    )
    assert proxy.enqueued == []  # creates never trigger

    await kube.patch(CONFIGMAP, name="watched", namespace=namespace, body={"data": {"key": "x"}})
    await wait_until(lambda: proxy.enqueued, message="owner enqueued after a data change")
    assert proxy.enqueued == [(MEMCACHED, owner.key)]


async def test_watch_requests_are_streamed(
    start_proxy: Callable[..., Any], owner: Owner, namespace: str, kube: KubeClient
) -> None:
    proxy = await start_proxy()
    url = f"{proxy.url}/api/v1/namespaces/{namespace}/configmaps?watch=true&timeoutSeconds=5"
    events: list[dict[str, Any]] = []
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, headers=proxy.auth(owner)) as response,
    ):
        assert response.status == 200
        obj = configmap("streamed")
        obj["metadata"]["namespace"] = namespace
        await kube.create(CONFIGMAP, obj)
        async for line in response.content:
            if line.strip():
                events.append(json.loads(line))
            if any(e["object"]["metadata"]["name"] == "streamed" for e in events):
                break
    assert any(e["type"] == "ADDED" for e in events)


async def test_listens_on_loopback_only_unless_asked(kube: KubeClient) -> None:
    cache = InformerCache(kube, namespaces=None)
    dependents = DependentWatches(cache, enqueue=lambda gvk, key: None)
    options: dict[str, Any] = {"watches": [], "namespaces": None, "cache": cache}
    with pytest.raises(ProxyError, match="refusing to listen"):
        ProxyServer(kube, host="0.0.0.0", dependents=dependents, **options)
    ProxyServer(kube, host="0.0.0.0", allow_remote=True, dependents=dependents, **options)
    ProxyServer(kube, host="::1", dependents=dependents, **options)

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = ProxyServer(kube, port=taken.getsockname()[1], dependents=dependents, **options)
        with pytest.raises(ProxyError, match="cannot listen"):
            await busy.start()
    await cache.close()


async def wait_until(probe: Callable[[], Any], *, message: str, timeout: float = 15) -> None:
    async def value() -> Any:
        return probe()

    await wait_until_value(value, message=message, timeout=timeout)


async def wait_until_value(probe: Callable[[], Any], *, message: str, timeout: float = 15) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await probe()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s: {message}")
        await asyncio.sleep(0.1)


FINDER = """\
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
from runner.ansible.bundledcollection import bundled_collections_path
_AnsibleCollectionFinder(paths=[str(bundled_collections_path())])._install()
"""

DISCOVER = (
    FINDER
    + """\
import json, sys
from runner.ansible.hooks import kubemodules
kubemodules.install()
kinds = [("v1", "ConfigMap"), ("apps/v1", "Deployment")]
print(json.dumps(kubemodules.discover(sys.argv[1], kinds, authorization=sys.argv[2])))
"""
)

RESOLVE_AS_OWNER = (
    FINDER
    + """\
import importlib, sys
from kubernetes import client
from runner.ansible.hooks import kubemodules
kubemodules.install()
k8s = importlib.import_module("ansible_collections.kubernetes.core.plugins.module_utils.k8s.client")
configuration = client.Configuration()
configuration.host = sys.argv[1]
found = k8s.create_api_client(configuration).resources.get(api_version="apps/v1", kind="Deployment")
print(found.name)
"""
)


async def python(*args: str, tmp: Path) -> str:
    """Run this interpreter off the event loop the proxy serves on; its stdout."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, *args, env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0
    return out.decode()


async def test_discovery_at_warm_up_fills_the_caches_every_owner_reads(
    start_proxy: Callable[..., Any], owner: Owner, tmp_path: Path
) -> None:
    """The zygote's discovery (no owner in the URL) writes the discovery caches of
    `kubernetes.core` and `operator_sdk.util`; a module of any owner then finds what it
    looks up there and asks the API nothing."""
    proxy = await start_proxy()
    authorization = proxy.auth()["Authorization"]
    assert json.loads(await python("-c", DISCOVER, proxy.url, authorization, tmp=tmp_path)) == []
    names = sorted(path.name.split("-")[0] for path in tmp_path.iterdir())
    assert names == ["k8srcp", "osrcp"]
    for path in tmp_path.iterdir():
        content = path.read_text()
        assert "configmaps" in content and "deployments" in content

    before = proxy.server.stats.requests
    as_owner = proxy.url.replace("http://", f"http://{encode_owner(owner)}@")
    assert (await python("-c", RESOLVE_AS_OWNER, as_owner, tmp=tmp_path)).strip() == "deployments"
    assert proxy.server.stats.requests == before
