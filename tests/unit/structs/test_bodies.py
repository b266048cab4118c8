"""Reading object metadata: the one accessor set, tolerant of what a body may lack."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runner.structs import NamespacedName, bodies

CR: dict[str, Any] = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "metadata": {
        "name": "sample",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "42",
        "generation": 3,
        "creationTimestamp": "2024-01-02T03:04:05Z",
        "deletionTimestamp": "2024-01-02T04:00:00Z",
        "labels": {"app": "memcached"},
        "annotations": {"a": "b"},
        "finalizers": ["cache.example.com/finalizer"],
        "ownerReferences": [{"uid": "o-1", "kind": "X"}, "junk"],
    },
}

ODD_BODIES = [
    pytest.param(None, id="none"),
    pytest.param({}, id="no-metadata"),
    pytest.param({"metadata": None}, id="null-metadata"),
    pytest.param({"metadata": ["not", "a", "mapping"]}, id="list-metadata"),
    pytest.param(
        {
            "metadata": {
                "name": None,
                "namespace": 5,
                "generation": True,
                "labels": ["x"],
                "annotations": "x",
                "finalizers": {"x": 1},
                "ownerReferences": {"uid": "x"},
            }
        },
        id="wrong-types",
    ),
]

READERS: list[tuple[Callable[[Any], object], object, object]] = [
    (bodies.name, "sample", ""),
    (bodies.namespace, "ns", ""),
    (bodies.uid, "u-1", ""),
    (bodies.resource_version, "42", ""),
    (bodies.generation, 3, None),
    (bodies.creation_timestamp, "2024-01-02T03:04:05Z", ""),
    (bodies.deletion_timestamp, "2024-01-02T04:00:00Z", ""),
    (bodies.labels, {"app": "memcached"}, {}),
    (bodies.annotations, {"a": "b"}, {}),
    (bodies.finalizers, ["cache.example.com/finalizer"], []),
    (bodies.owner_references, [{"uid": "o-1", "kind": "X"}], []),
]


@pytest.mark.parametrize(
    ("read", "expected"),
    [pytest.param(read, full, id=read.__name__) for read, full, _ in READERS],
)
def test_accessors_read_metadata(read: Callable[[Any], object], expected: object) -> None:
    assert read(CR) == expected


@pytest.mark.parametrize("body", ODD_BODIES)
def test_accessors_read_what_is_missing_as_empty(body: Any) -> None:
    assert [read(body) for read, _, _ in READERS] == [empty for _, _, empty in READERS]


def test_finalizers_is_a_copy_to_edit() -> None:
    finalizers = bodies.finalizers(CR)
    finalizers.append("other")
    assert CR["metadata"]["finalizers"] == ["cache.example.com/finalizer"]


@pytest.mark.parametrize(
    ("body", "key"),
    [
        pytest.param(CR, NamespacedName("ns", "sample"), id="namespaced"),
        pytest.param({"metadata": {"name": "n"}}, NamespacedName("", "n"), id="cluster-scoped"),
        pytest.param(
            {"metadata": {"name": "n", "namespace": None}}, NamespacedName("", "n"), id="null-ns"
        ),
    ],
)
def test_object_key(body: dict[str, Any], key: NamespacedName) -> None:
    assert bodies.object_key(body) == key


@pytest.mark.parametrize("body", [{}, {"metadata": {"namespace": "ns"}}], ids=["empty", "no-name"])
def test_object_key_needs_a_name(body: dict[str, Any]) -> None:
    with pytest.raises(KeyError):
        bodies.object_key(body)
