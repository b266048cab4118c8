"""Informer against the real API server: events, store, relist after Gone, namespaces."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.k8s.client import KubeClient
from runner.k8s.informer import Informer
from runner.structs import GVK, NamespacedName

MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
NAMESPACE = GVK("", "v1", "Namespace")

Event = tuple[str, str, dict[str, Any], dict[str, Any] | None]


@pytest.fixture
def other_namespaces(api_client: Any) -> Iterator[Callable[[], str]]:
    """Makes more namespaces for one test; deletes them afterwards."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    made: list[str] = []

    def make() -> str:
        name = f"t-informer-extra-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": name}})
        made.append(name)
        return name

    yield make
    for name in made:
        core.delete_namespace(name)


class Recorder:
    """Collects informer events; `names()` gives (type, namespace/name) pairs."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = new["metadata"]
        self.events.append((kind, f"{meta.get('namespace', '')}/{meta['name']}", new, old))

    def names(self) -> list[tuple[str, str]]:
        return [(kind, key) for kind, key, _, _ in self.events]


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 60)
        yield task
    finally:
        informer.stop()
        await asyncio.wait_for(task, 10)


async def eventually(probe: Callable[[], Any], *, timeout: float = 45, what: str) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = probe()
        if value:
            return value
        if loop.time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def memcached(name: str, *, size: int = 1, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": MEMCACHED.api_version,
        "kind": MEMCACHED.kind,
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"size": size},
    }


async def test_added_modified_deleted(kube: KubeClient, namespace: str) -> None:
    seen = Recorder()
    informer = Informer(kube, MEMCACHED, namespaces=[namespace], on_event=seen)
    key = f"{namespace}/m"
    async with running(informer):
        assert seen.events == []
        await kube.create(MEMCACHED, memcached("m"), namespace=namespace)
        await eventually(lambda: ("ADDED", key) in seen.names(), what="ADDED")
        await kube.patch(MEMCACHED, name="m", namespace=namespace, body={"spec": {"size": 4}})
        await eventually(lambda: ("MODIFIED", key) in seen.names(), what="MODIFIED")
        await kube.delete(MEMCACHED, name="m", namespace=namespace)
        await eventually(lambda: ("DELETED", key) in seen.names(), what="DELETED")

    assert seen.names() == [("ADDED", key), ("MODIFIED", key), ("DELETED", key)]
    _, _, added, added_old = seen.events[0]
    assert added_old is None
    assert added["spec"] == {"size": 1}
    _, _, modified, modified_old = seen.events[1]
    assert modified["spec"] == {"size": 4}
    assert modified_old is not None and modified_old["spec"] == {"size": 1}
    _, _, deleted, deleted_old = seen.events[2]
    assert deleted_old is not None and deleted_old["spec"] == {"size": 4}
    assert deleted["metadata"]["name"] == "m"
    assert informer.get(NamespacedName(namespace, "m")) is None


async def test_initial_list_and_store(kube: KubeClient, namespace: str) -> None:
    for name in ("a", "b", "c"):
        await kube.create(MEMCACHED, memcached(name), namespace=namespace)
    server_copy = await kube.get(MEMCACHED, name="a", namespace=namespace)
    assert server_copy["metadata"].get("managedFields")

    seen = Recorder()
    informer = Informer(kube, MEMCACHED, namespaces=[namespace], on_event=seen, page_size=2)
    async with running(informer):
        # Synced means the first list was delivered.
        assert sorted(seen.names()) == [("ADDED", f"{namespace}/{n}") for n in "abc"]
        stored = informer.get(NamespacedName(namespace, "a"))
        assert stored is not None
        assert "managedFields" not in stored["metadata"]
        assert stored["metadata"]["uid"] == server_copy["metadata"]["uid"]
        assert (stored["apiVersion"], stored["kind"]) == (MEMCACHED.api_version, "Memcached")
        assert len(informer.list()) == 3
        assert len(informer) == 3

        await kube.patch(MEMCACHED, name="b", namespace=namespace, body={"spec": {"size": 9}})

        def updated() -> bool:
            obj = informer.get(NamespacedName(namespace, "b"))
            return obj is not None and obj["spec"]["size"] == 9

        await eventually(updated, what="store update")
        watched = informer.get(NamespacedName(namespace, "b"))
        assert watched is not None and "managedFields" not in watched["metadata"]


async def test_relist_after_gone_emits_only_differences(
    kube: KubeClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("keep", "change", "remove"):
        await kube.create(MEMCACHED, memcached(name), namespace=namespace)
    seen = Recorder()
    informer = Informer(kube, MEMCACHED, namespaces=[namespace], on_event=seen)
    async with running(informer):
        pass
    assert len(seen.events) == 3
    seen.events.clear()

    # While nobody watches: one change, one deletion, one new object.
    await kube.patch(MEMCACHED, name="change", namespace=namespace, body={"spec": {"size": 2}})
    await kube.delete(MEMCACHED, name="remove", namespace=namespace)
    await kube.create(MEMCACHED, memcached("new"), namespace=namespace)
    # Resume from a version the server no longer has: the watch answers 410 Gone and
    # the informer must relist and diff against the store it kept.
    informer._resume[namespace] = "1"
    caplog.set_level(logging.INFO, logger="ansible-operator.informer")
    async with running(informer):
        expected = {
            ("MODIFIED", f"{namespace}/change"),
            ("DELETED", f"{namespace}/remove"),
            ("ADDED", f"{namespace}/new"),
        }
        await eventually(lambda: expected <= set(seen.names()), what="relist differences")
        await asyncio.sleep(0.3)
    assert sorted(seen.names()) == sorted(expected)
    assert any("410" in r.getMessage() and "relisting" in r.getMessage() for r in caplog.records)
    assert informer._resume[namespace] not in (None, "1")
    kinds = {key: (new, old) for _, key, new, old in seen.events}
    new, old = kinds[f"{namespace}/change"]
    assert new["spec"] == {"size": 2}
    assert old is not None and old["spec"] == {"size": 1}
    assert {o["metadata"]["name"] for o in informer.list()} == {"keep", "change", "new"}


def expired(token: str) -> str:
    """The same place in the list as `token`, at a revision the API server no longer has
    (a continue token carries the list's revision and the key to start after)."""
    state = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    state["rv"] = 1
    return base64.urlsafe_b64encode(json.dumps(state).encode()).decode().rstrip("=")


def compact_etcd(kubeconfig: Path) -> None:
    """Compact the local cluster's etcd up to its current revision, as the API server
    does every five minutes: a continue token of an older revision then gets 410, also
    on a cluster younger than that. (Skipped for a cluster that is not a local one.)"""
    from runner.devtools.cluster.local import LocalCluster

    state = LocalCluster(kubeconfig.resolve().parent).load_state()
    if state is None:
        return
    base = f"http://127.0.0.1:{state.ports['etcd']}/v3/kv"

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{base}/{path}", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            answer: dict[str, Any] = json.load(response)
            return answer

    revision = post("range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"]
    post("compaction", {"revision": revision})


async def test_an_expired_continue_token_relists_from_the_start(
    kube: KubeClient,
    kubeconfig: Path,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: Any,
) -> None:
    names = [f"m{i}" for i in range(5)]
    for name in names:
        await kube.create(MEMCACHED, memcached(name), namespace=namespace)
    compact_etcd(kubeconfig)
    # The second page of the first list asks to continue from a compacted revision, as a
    # list whose pages are far apart in time does: the API server answers 410 Expired.
    real = kube._json
    forged: list[str] = []

    async def with_an_expired_token(method: str, path: str, **options: Any) -> dict[str, Any]:
        query = options.pop("query", None) or []
        if not forged and any(key == "continue" for key, _ in query):
            query = [(k, expired(v) if k == "continue" else v) for k, v in query]
            forged.append(path)
        return await real(method, path, query=query, **options)

    monkeypatch.setattr(kube, "_json", with_an_expired_token)
    caplog.set_level(logging.INFO, logger="ansible-operator.informer")
    seen = Recorder()
    informer = Informer(kube, MEMCACHED, namespaces=[namespace], on_event=seen, page_size=2)
    async with running(informer):
        pass
    assert forged, "the list was not paginated"
    relisted = [r.getMessage() for r in caplog.records if "relisting" in r.getMessage()]
    assert any("410" in message and "Expired" in message for message in relisted), relisted
    # Every object once, none twice, nothing missing: the relist started from scratch.
    assert sorted(seen.names()) == [("ADDED", f"{namespace}/{name}") for name in names]
    assert {o["metadata"]["name"] for o in informer.list()} == set(names)


async def test_direct_relist_without_changes_is_silent(kube: KubeClient, namespace: str) -> None:
    await kube.create(MEMCACHED, memcached("x"), namespace=namespace)
    seen = Recorder()
    informer = Informer(kube, MEMCACHED, namespaces=[namespace], on_event=seen)
    async with running(informer):
        seen.events.clear()
        await informer.relist()
        assert seen.events == []


async def test_namespace_restricted_informer(
    kube: KubeClient, namespace: str, other_namespaces: Callable[[], str]
) -> None:
    second, outside = other_namespaces(), other_namespaces()
    seen = Recorder()
    informer = Informer(kube, MEMCACHED, namespaces=[namespace, second], on_event=seen)
    only_first = Recorder()
    single = Informer(kube, MEMCACHED, namespaces=[namespace], on_event=only_first)
    async with running(informer), running(single):
        for ns in (namespace, second, outside):
            await kube.create(MEMCACHED, memcached("m"), namespace=ns)
        await eventually(
            lambda: {k for _, k in seen.names()} == {f"{namespace}/m", f"{second}/m"},
            what="events from both watched namespaces",
        )
        await eventually(lambda: only_first.events, what="event in the single namespace")
        # The object outside was created last; give its event time to (not) arrive.
        await asyncio.sleep(0.5)
    assert {k for _, k in seen.names()} == {f"{namespace}/m", f"{second}/m"}
    assert only_first.names() == [("ADDED", f"{namespace}/m")]
    assert informer.get(NamespacedName(outside, "m")) is None
    assert single.get(NamespacedName(second, "m")) is None


async def test_all_namespaces_and_cluster_scoped(
    kube: KubeClient, namespace: str, other_namespaces: Callable[[], str]
) -> None:
    extra = other_namespaces()
    await kube.create(MEMCACHED, memcached("here"), namespace=namespace)
    everywhere = Informer(kube, MEMCACHED, namespaces=None)
    # A cluster-scoped kind ignores the namespace list: one stream of everything.
    namespaces = Informer(kube, NAMESPACE, namespaces=[namespace])
    async with running(everywhere), running(namespaces):
        assert everywhere.get(NamespacedName(namespace, "here")) is not None
        await kube.create(MEMCACHED, memcached("there"), namespace=extra)
        await eventually(
            lambda: everywhere.get(NamespacedName(extra, "there")), what="cluster-wide event"
        )
        assert namespaces.get(NamespacedName("", "default")) is not None
        assert namespaces.get(NamespacedName("", extra)) is not None


async def test_label_selector(kube: KubeClient, namespace: str) -> None:
    seen = Recorder()
    informer = Informer(
        kube, MEMCACHED, namespaces=[namespace], label_selector="team=a", on_event=seen
    )
    async with running(informer):
        await kube.create(MEMCACHED, memcached("other", labels={"team": "b"}), namespace=namespace)
        await kube.create(MEMCACHED, memcached("ours", labels={"team": "a"}), namespace=namespace)
        await eventually(lambda: seen.events, what="labelled object")
        await asyncio.sleep(0.3)
    assert seen.names() == [("ADDED", f"{namespace}/ours")]


async def test_metadata_only_keeps_metadata_and_no_spec(kube: KubeClient, namespace: str) -> None:
    await kube.create(MEMCACHED, memcached("listed", labels={"team": "a"}), namespace=namespace)
    seen = Recorder()
    informer = Informer(kube, MEMCACHED, namespaces=[namespace], on_event=seen, metadata_only=True)
    async with running(informer):
        await kube.create(MEMCACHED, memcached("watched", size=3), namespace=namespace)
        await eventually(lambda: len(seen.events) == 2, what="the watched object")
        await kube.patch(
            MEMCACHED, name="watched", namespace=namespace,
            body={"metadata": {"labels": {"team": "b"}}},
        )  # fmt: skip

        def relabelled() -> bool:
            obj = informer.get(NamespacedName(namespace, "watched"))
            return obj is not None and obj["metadata"].get("labels") == {"team": "b"}

        await eventually(relabelled, what="the label change")
    server_copy = await kube.get(MEMCACHED, name="watched", namespace=namespace)
    assert seen.names()[:2] == [("ADDED", f"{namespace}/listed"), ("ADDED", f"{namespace}/watched")]
    for _, _, obj, _ in seen.events:  # from the list and from the watch alike
        assert set(obj) == {"apiVersion", "kind", "metadata"}, obj
        assert (obj["apiVersion"], obj["kind"]) == (MEMCACHED.api_version, "Memcached")
        assert "managedFields" not in obj["metadata"]
    listed = seen.events[0][2]["metadata"]
    assert listed["labels"] == {"team": "a"} and listed["resourceVersion"]
    stored = informer.get(NamespacedName(namespace, "watched"))
    assert stored is not None
    assert stored["metadata"]["resourceVersion"] == server_copy["metadata"]["resourceVersion"]


async def test_watch_restarts_after_server_timeouts(
    kube: KubeClient, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    watches = 0
    original = kube.watch

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal watches
        watches += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(kube, "watch", counting)
    seen = Recorder()
    informer = Informer(kube, MEMCACHED, namespaces=[namespace], on_event=seen, watch_timeout=1)
    async with running(informer):
        # The first watch ends after its 1 s server timeout; the informer starts another.
        await eventually(lambda: watches >= 2, timeout=30, what="a second watch")
        await kube.create(MEMCACHED, memcached("late"), namespace=namespace)
        await eventually(lambda: seen.events, what="event after a watch restart")
    assert watches >= 2
    assert seen.names() == [("ADDED", f"{namespace}/late")]


async def test_survives_an_unreachable_server(kubeconfig: Path, tmp_path: Path) -> None:
    config = yaml.safe_load(kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    dead = tmp_path / "kubeconfig"
    dead.write_text(yaml.safe_dump(config))
    client = await KubeClient.connect(kubeconfig=str(dead))
    try:
        for namespaces in (None, ["a", "b"]):
            informer = Informer(
                client, MEMCACHED, namespaces=namespaces, backoff_base=0.01, backoff_max=0.05
            )
            task = asyncio.create_task(informer.run())
            await asyncio.sleep(0.3)
            assert not task.done()
            assert not informer.synced.is_set()
            informer.stop()
            await asyncio.wait_for(task, 5)
    finally:
        await client.close()


async def test_cancelling_run_stops_cleanly(kube: KubeClient, namespace: str) -> None:
    informer = Informer(kube, MEMCACHED, namespaces=[namespace])
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(informer.synced.wait(), 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    names = {t.get_name() for t in asyncio.all_tasks()}
    assert not any(name.startswith("informer-") for name in names)


async def test_stop_before_run_returns_at_once(kube: KubeClient, namespace: str) -> None:
    informer = Informer(kube, MEMCACHED, namespaces=[namespace])
    informer.stop()
    await asyncio.wait_for(informer.run(), 5)
    # The stop request was used up: the next run lists and watches again.
    async with running(informer):
        assert informer.synced.is_set()
