"""KubeClient against the real API server: discovery, CRUD, pagination, watch, errors."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from runner.k8s.apierrors import APIError, Conflict, Gone, NotFound, Unavailable
from runner.k8s.client import KubeClient
from runner.structs import GVK

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "config/crd/bases/cache.example.com_memcacheds.yaml"
MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
CONFIGMAP = GVK("", "v1", "ConfigMap")
NAMESPACE = GVK("", "v1", "Namespace")


def memcached(name: str, *, size: int = 1, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": MEMCACHED.api_version,
        "kind": MEMCACHED.kind,
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"size": size},
    }


async def test_discovery_of_builtin_and_custom_kinds(kube: KubeClient) -> None:
    res = await kube.resource(MEMCACHED)
    assert (res.plural, res.namespaced) == ("memcacheds", True)
    assert {"get", "list", "watch", "create"} <= res.verbs
    assert "status" in res.subresources
    cm = await kube.resource(CONFIGMAP)
    assert (cm.plural, cm.namespaced, cm.api_version) == ("configmaps", True, "v1")
    ns = await kube.resource(NAMESPACE)
    assert not ns.namespaced
    assert ns.path(namespace="ignored", name="x") == "/api/v1/namespaces/x"


async def test_unknown_kinds_are_not_found(kube: KubeClient) -> None:
    with pytest.raises(NotFound):
        await kube.resource(GVK("cache.example.com", "v1alpha1", "Nothing"))
    with pytest.raises(NotFound):
        await kube.resource(GVK("nope.example.com", "v1", "Thing"))


async def test_discovery_finds_crds_created_after_a_miss(kube: KubeClient, dyn: Any) -> None:
    group = f"late{uuid.uuid4().hex[:6]}.example.com"
    gvk = GVK(group, "v1", "Late")
    with pytest.raises(NotFound):
        await kube.resource(gvk)
    body = yaml.safe_load(CRD.read_text())
    body["metadata"]["name"] = f"lates.{group}"
    body["spec"]["group"] = group
    body["spec"]["names"] = {"kind": "Late", "listKind": "LateList", "plural": "lates"}
    body["spec"]["versions"][0]["name"] = "v1"
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create(body=body)
    try:
        for _ in range(600):  # 60 s: a busy API server publishes a new CRD late
            try:
                res = await kube.resource(gvk)
                break
            except NotFound:
                await asyncio.sleep(0.1)
        else:
            pytest.fail("the new CRD never showed up in discovery")
        assert res.plural == "lates"
    finally:
        crds.delete(name=f"lates.{group}")


async def test_create_get_and_not_found(kube: KubeClient, namespace: str) -> None:
    created = await kube.create(MEMCACHED, memcached("a", size=2), namespace=namespace)
    assert created["metadata"]["namespace"] == namespace
    got = await kube.get(MEMCACHED, name="a", namespace=namespace)
    assert got["spec"] == {"size": 2}
    assert got["metadata"]["uid"] == created["metadata"]["uid"]
    with pytest.raises(NotFound) as caught:
        await kube.get(MEMCACHED, name="missing", namespace=namespace)
    assert caught.value.status == 404
    assert caught.value.body.get("kind") == "Status"
    assert "missing" in caught.value.message
    with pytest.raises(Conflict) as exists:
        await kube.create(MEMCACHED, memcached("a"), namespace=namespace)
    assert exists.value.reason == "AlreadyExists"


async def test_create_takes_the_namespace_from_the_body(kube: KubeClient, namespace: str) -> None:
    body = memcached("from-body")
    body["metadata"]["namespace"] = namespace
    created = await kube.create(MEMCACHED, body)
    assert created["metadata"]["namespace"] == namespace


async def test_list_follows_pages_and_fills_kind(kube: KubeClient, namespace: str) -> None:
    names = [f"m{i}" for i in range(7)]
    for name in names:
        await kube.create(MEMCACHED, memcached(name, labels={"page": "yes"}), namespace=namespace)
    await kube.create(MEMCACHED, memcached("other"), namespace=namespace)

    items, resource_version = await kube.list(
        MEMCACHED, namespace=namespace, label_selector="page=yes", limit=3
    )
    assert sorted(i["metadata"]["name"] for i in items) == names
    assert {(i["apiVersion"], i["kind"]) for i in items} == {
        ("cache.example.com/v1alpha1", "Memcached")
    }
    assert int(resource_version) > 0

    everything, _ = await kube.list(MEMCACHED, namespace=namespace, limit=2)
    assert len(everything) == 8
    cluster_wide, _ = await kube.list(MEMCACHED, namespace=None, label_selector="page=yes")
    assert {
        i["metadata"]["name"] for i in cluster_wide if i["metadata"]["namespace"] == namespace
    } == set(names)


async def test_stale_replace_status_conflicts(kube: KubeClient, namespace: str) -> None:
    original = await kube.create(MEMCACHED, memcached("s"), namespace=namespace)
    first = await kube.replace_status(MEMCACHED, obj={**original, "status": {"round": 1}})
    assert first["status"] == {"round": 1}
    assert first["metadata"]["resourceVersion"] != original["metadata"]["resourceVersion"]
    with pytest.raises(Conflict) as caught:
        await kube.replace_status(MEMCACHED, obj={**original, "status": {"round": 2}})
    assert caught.value.status == 409
    current = await kube.get(MEMCACHED, name="s", namespace=namespace)
    assert current["status"] == {"round": 1}


async def test_patch_status_and_spec(kube: KubeClient, namespace: str) -> None:
    await kube.create(MEMCACHED, memcached("p"), namespace=namespace)
    patched = await kube.patch(
        MEMCACHED,
        name="p",
        namespace=namespace,
        body={"status": {"ready": True}},
        subresource="status",
    )
    assert patched["status"] == {"ready": True}
    assert patched["spec"] == {"size": 1}
    # The main resource ignores status; the status subresource ignores spec.
    merged = await kube.patch(
        MEMCACHED, name="p", namespace=namespace, body={"spec": {"size": 3}, "status": {"x": 1}}
    )
    assert merged["spec"] == {"size": 3}
    assert merged["status"] == {"ready": True}
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"via": "json-patch"}}]
    json_patched = await kube.patch(
        MEMCACHED, name="p", namespace=namespace, body=ops, patch_type="json"
    )
    assert json_patched["metadata"]["labels"] == {"via": "json-patch"}


async def test_strategic_patch_on_builtin_kind(kube: KubeClient, namespace: str) -> None:
    await kube.create(
        CONFIGMAP, {"metadata": {"name": "c"}, "data": {"a": "1"}}, namespace=namespace
    )
    patched = await kube.patch(
        CONFIGMAP, name="c", namespace=namespace, body={"data": {"b": "2"}}, patch_type="strategic"
    )
    assert patched["data"] == {"a": "1", "b": "2"}


async def test_stale_merge_patch_with_resource_version_conflicts(
    kube: KubeClient, namespace: str
) -> None:
    original = await kube.create(MEMCACHED, memcached("rv"), namespace=namespace)
    await kube.patch(MEMCACHED, name="rv", namespace=namespace, body={"spec": {"size": 2}})
    stale = {"metadata": {"resourceVersion": original["metadata"]["resourceVersion"]}}
    with pytest.raises(Conflict):
        await kube.patch(
            MEMCACHED, name="rv", namespace=namespace, body={**stale, "spec": {"size": 5}}
        )


async def test_delete(kube: KubeClient, namespace: str) -> None:
    await kube.create(MEMCACHED, memcached("d"), namespace=namespace)
    await kube.delete(MEMCACHED, name="d", namespace=namespace, propagation_policy="Foreground")
    # Foreground deletion waits for the garbage collector, which learns of a new kind
    # only at its next discovery resync (30 s).
    for _ in range(1200):
        try:
            await kube.get(MEMCACHED, name="d", namespace=namespace)
        except NotFound:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("object never went away")
    with pytest.raises(NotFound):
        await kube.delete(MEMCACHED, name="d", namespace=namespace)


async def test_watch_yields_changes_after_the_list(kube: KubeClient, namespace: str) -> None:
    await kube.create(MEMCACHED, memcached("before"), namespace=namespace)
    _, resource_version = await kube.list(MEMCACHED, namespace=namespace)
    seen: list[tuple[str, str]] = []

    async def consume() -> None:
        stream = kube.watch(
            MEMCACHED, namespace=namespace, resource_version=resource_version, timeout_seconds=30
        )
        async with contextlib.aclosing(stream) as events:
            async for kind, obj in events:
                if kind == "BOOKMARK":
                    assert obj["metadata"]["resourceVersion"]
                    continue
                assert obj["kind"] == "Memcached"
                seen.append((kind, obj["metadata"]["name"]))
                if kind == "DELETED":
                    return

    consumer = asyncio.create_task(consume())
    await kube.create(MEMCACHED, memcached("w"), namespace=namespace)
    await kube.patch(MEMCACHED, name="w", namespace=namespace, body={"spec": {"size": 2}})
    await kube.delete(MEMCACHED, name="w", namespace=namespace)
    await asyncio.wait_for(consumer, 20)
    assert seen == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


async def test_watch_ends_when_the_server_times_it_out(kube: KubeClient, namespace: str) -> None:
    _, resource_version = await kube.list(MEMCACHED, namespace=namespace)
    loop = asyncio.get_running_loop()
    start = loop.time()
    stream = kube.watch(
        MEMCACHED, namespace=namespace, resource_version=resource_version, timeout_seconds=1
    )
    async with contextlib.aclosing(stream) as events:
        kinds = [kind async for kind, _ in events]
    assert set(kinds) <= {"BOOKMARK"}
    assert loop.time() - start < 15


async def test_requests_go_through_beside_more_watches_than_the_librarys_pool(
    kube: KubeClient, namespace: str
) -> None:
    """An operator holds a watch per kind and namespace; beyond 100 (the library's pool)
    every other request used to wait for a free connection until it timed out."""
    _, resource_version = await kube.list(CONFIGMAP, namespace=namespace)

    async def hold() -> None:
        stream = kube.watch(
            CONFIGMAP, namespace=namespace, resource_version=resource_version, timeout_seconds=60
        )
        async with contextlib.aclosing(stream) as events:
            async for _ in events:
                pass

    watches = [asyncio.create_task(hold()) for _ in range(110)]
    try:
        await asyncio.sleep(3)  # every watch has sent its request by now
        assert not [task for task in watches if task.done()], "the watches are open"
        await asyncio.wait_for(kube.get(NAMESPACE, name=namespace, namespace=None), 10)
    finally:
        for task in watches:
            task.cancel()
        await asyncio.gather(*watches, return_exceptions=True)


async def test_watch_from_a_too_old_version_is_gone(kube: KubeClient, namespace: str) -> None:
    stream = kube.watch(MEMCACHED, namespace=namespace, resource_version="1", timeout_seconds=5)
    with pytest.raises(Gone) as caught:
        async with contextlib.aclosing(stream) as events:
            async for _ in events:
                pass
    assert caught.value.status == 410


async def test_unreachable_server_is_unavailable(kubeconfig: Path, tmp_path: Path) -> None:
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    dead = tmp_path / "kubeconfig"
    dead.write_text(yaml.safe_dump(config))
    client = await KubeClient.connect(kubeconfig=str(dead))
    try:
        with pytest.raises(Unavailable) as caught:
            await client.get(CONFIGMAP, name="x", namespace="default")
        assert caught.value.status == 0
        assert caught.value.__cause__ is not None
        assert isinstance(caught.value, APIError)
    finally:
        await client.close()


async def test_credentials_can_be_reused_by_another_http_client(kube: KubeClient) -> None:
    assert kube.server.startswith("https://")
    context = kube.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    headers = await kube.auth_headers()
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{kube.server}/version", ssl=context, headers=headers) as response,
    ):
        assert response.status == 200
        assert "gitVersion" in await response.json()


async def test_forward_passes_any_answer_through(kube: KubeClient, namespace: str) -> None:
    response = await kube.forward(
        "GET", f"/api/v1/namespaces/{namespace}/configmaps", query=[("limit", "1")]
    )
    async with response:
        assert response.status == 200
        assert (await response.json())["kind"] == "ConfigMapList"
    missing = await kube.forward("GET", f"/api/v1/namespaces/{namespace}/configmaps/none")
    async with missing:
        assert missing.status == 404


async def test_connect_uses_kubeconfig_from_the_environment(
    kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    client = await KubeClient.connect()
    try:
        items, _ = await client.list(NAMESPACE, namespace=None, limit=1)
        assert any(i["metadata"]["name"] == "default" for i in items)
    finally:
        await client.close()
