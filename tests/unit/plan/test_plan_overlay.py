"""runner.plan.overlay: what a plan's writes did, as later reads see it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.plan.overlay import Found, ObjectKey, Overlay, settled


def cm(name: str, namespace: str = "ns", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }


def key(name: str, namespace: str = "ns") -> ObjectKey:
    return ObjectKey("", "configmaps", namespace, name)


def test_unknown_present_absent() -> None:
    overlay = Overlay()
    assert overlay.lookup(key("a")) == (Found.UNKNOWN, None)
    overlay.write(key("a"), cm("a"), live=None)
    found, obj = overlay.lookup(key("a"))
    assert found is Found.PRESENT and obj is not None and obj["metadata"]["name"] == "a"
    overlay.delete(key("a"), live=None)
    assert overlay.lookup(key("a")) == (Found.ABSENT, None)


def test_an_entry_keeps_the_live_object_of_its_first_touch() -> None:
    overlay = Overlay()
    live = {**cm("a"), "data": {"x": "1"}}
    overlay.write(key("a"), {**live, "data": {"x": "2"}}, live=live)
    overlay.write(key("a"), {**live, "data": {"x": "3"}}, live={**live, "data": {"x": "9"}})
    [entry] = overlay.entries()
    assert entry.live is not None and entry.live["data"] == {"x": "1"}
    assert entry.current is not None and entry.current["data"] == {"x": "3"}
    assert entry.writes == 2


def test_objects_only_the_plan_has_get_a_resource_version() -> None:
    overlay = Overlay()
    kept = overlay.write(key("a"), cm("a"), live=None)
    assert kept is not None and kept["metadata"]["resourceVersion"] == "1"
    kept = overlay.write(key("b"), {**cm("b"), "metadata": {"resourceVersion": "77"}}, live=None)
    assert kept is not None and kept["metadata"]["resourceVersion"] == "77"


def test_reads_get_copies() -> None:
    overlay = Overlay()
    overlay.write(key("a"), cm("a"), live=None)
    _, obj = overlay.lookup(key("a"))
    assert obj is not None
    obj["metadata"]["name"] = "changed"
    assert overlay.lookup(key("a"))[1]["metadata"]["name"] == "a"  # type: ignore[index]


def test_deleting_without_finalizers_is_gone() -> None:
    deleting = {**cm("a"), "metadata": {"name": "a", "deletionTimestamp": "2024-01-01T00:00:00Z"}}
    assert settled(deleting) is None
    held = {**deleting, "metadata": {**deleting["metadata"], "finalizers": ["x"]}}
    assert settled(held) == held
    overlay = Overlay()
    assert overlay.write(key("a"), deleting, live=cm("a")) is None
    assert overlay.lookup(key("a")) == (Found.ABSENT, None)


def test_lists_merge_the_plan_into_the_cluster() -> None:
    overlay = Overlay()
    overlay.write(
        key("changed"), cm("changed", app="web", new="yes"), live=cm("changed", app="web")
    )
    overlay.write(key("moved-out"), cm("moved-out", app="db"), live=cm("moved-out", app="web"))
    overlay.delete(key("deleted"), live=cm("deleted", app="web"))
    overlay.write(key("created"), cm("created", app="web"), live=None)
    overlay.write(key("other"), cm("other", app="db"), live=None)
    overlay.write(key("elsewhere", "other-ns"), cm("elsewhere", "other-ns", app="web"), live=None)
    overlay.write(ObjectKey("", "secrets", "ns", "s"), {"metadata": {"name": "s"}}, live=None)
    live = [cm(name, app="web") for name in ("changed", "deleted", "kept", "moved-out")]

    def web(obj: Mapping[str, Any]) -> bool:
        return obj["metadata"]["labels"].get("app") == "web"

    items = overlay.merge_list(
        group="", resource="configmaps", namespace="ns", live_items=live, selects=web
    )
    assert [item["metadata"]["name"] for item in items] == ["changed", "created", "kept"]
    assert items[0]["metadata"]["labels"]["new"] == "yes"
    everywhere = overlay.merge_list(
        group="", resource="configmaps", namespace="", live_items=live, selects=web
    )
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere][-1] == (
        "other-ns",
        "elsewhere",
    )
