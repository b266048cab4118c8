"""Field selector strings, and LIST answers built from cached objects.

The label selector strings LISTs carry are parsed by `runner.util.labelselector` (tested there).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runner.proxy.filtering import filter_objects, list_body, parse_field_selector_string

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "ns", "labels": {"app": "web"}},
    "spec": {"nodeName": "node-a", "hostNetwork": True, "priority": 7},
    "status": {"phase": "Running", "conditions": [{"type": "Ready"}]},
}


@pytest.mark.parametrize(
    ("selector", "obj", "expected"),
    [
        pytest.param("", POD, True, id="empty-selects-all"),
        pytest.param("metadata.name=web-1", POD, True, id="name"),
        pytest.param("metadata.name==web-1", POD, True, id="name-double-equals"),
        pytest.param("metadata.name=web-2", POD, False, id="name-differs"),
        pytest.param("metadata.name!=web-2", POD, True, id="name-not-equal"),
        pytest.param("metadata.name!=web-1", POD, False, id="name-not-equal-same"),
        pytest.param("metadata.namespace=ns", POD, True, id="namespace"),
        pytest.param("metadata.namespace!=ns", POD, False, id="namespace-not-equal"),
        pytest.param("status.phase=Running", POD, True, id="status-phase"),
        pytest.param("spec.nodeName=node-a", POD, True, id="node-name"),
        pytest.param("spec.nodeName=", POD, False, id="node-name-empty"),
        pytest.param("spec.hostNetwork=true", POD, True, id="boolean-as-lower-case-text"),
        pytest.param("spec.hostNetwork=True", POD, False, id="boolean-case-sensitive"),
        pytest.param("spec.priority=7", POD, True, id="integer-as-text"),
        pytest.param("spec.missing=", POD, True, id="missing-field-is-empty"),
        pytest.param("spec.missing.deeper=", POD, True, id="missing-parent-is-empty"),
        pytest.param("spec.nodeName.deeper=", POD, True, id="path-through-scalar-is-empty"),
        pytest.param("spec.missing!=x", POD, True, id="missing-field-not-equal"),
        pytest.param("metadata.namespace=", {"metadata": {"name": "n"}}, True, id="cluster-scoped"),
        pytest.param("status.conditions=x", POD, False, id="list-never-equal"),
        pytest.param("status.conditions!=x", POD, True, id="list-always-not-equal"),
        pytest.param("status=x", POD, False, id="mapping-never-equal"),
        pytest.param("metadata.name=web-1,status.phase=Running", POD, True, id="and"),
        pytest.param("metadata.name=web-1,status.phase=Pending", POD, False, id="and-one-fails"),
        pytest.param("metadata.name=web-1,,", POD, True, id="empty-terms-skipped"),
        pytest.param(
            "metadata.name=a\\,b", {"metadata": {"name": "a,b"}}, True, id="escaped-comma"
        ),
        pytest.param(
            "metadata.name=a\\=b", {"metadata": {"name": "a=b"}}, True, id="escaped-equals"
        ),
        pytest.param(
            "metadata.name=a\\\\b", {"metadata": {"name": "a\\b"}}, True, id="escaped-backslash"
        ),
        pytest.param("metadata.name=a b", {"metadata": {"name": "a b"}}, True, id="space-in-value"),
        pytest.param("metadata.name=", {"metadata": {"name": ""}}, True, id="empty-value"),
    ],
)
def test_field_selector_matches(selector: str, obj: dict[str, Any], expected: bool) -> None:
    assert parse_field_selector_string(selector)(obj) is expected


@pytest.mark.parametrize(
    ("selector", "bad_part"),
    [
        pytest.param("metadata.name", "can't understand 'metadata.name'", id="no-operator"),
        pytest.param("a=b,c", "can't understand 'c'", id="second-term-no-operator"),
        pytest.param("=x", "'' is not a field path", id="empty-field"),
        pytest.param("metadata..name=x", "'metadata..name'", id="empty-path-segment"),
        pytest.param(".name=x", "'.name'", id="leading-dot"),
        pytest.param("metadata.name =x", "'metadata.name '", id="space-in-field"),
        pytest.param("metadata.name=a=b", "'=' in a value must be escaped", id="unescaped-equals"),
        pytest.param("metadata.name==a=b", "'=' in a value must be escaped", id="double-then-eq"),
        pytest.param("metadata.name=a\\x", "invalid escape sequence '\\x'", id="bad-escape"),
        pytest.param("metadata.name=a\\", "lone", id="trailing-backslash"),
    ],
)
def test_field_selector_errors(selector: str, bad_part: str) -> None:
    with pytest.raises(ValueError, match="invalid field selector") as caught:
        parse_field_selector_string(selector)
    assert bad_part in str(caught.value)


def obj(namespace: str | None, name: str, **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


OBJECTS = [
    obj("b", "z", app="web"),
    obj("a", "y", app="db"),
    obj("b", "a", app="web", tier="front"),
    obj("a", "x"),
    obj(None, "cluster", app="web"),
]


def names(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objects]


@pytest.mark.parametrize(
    ("namespace", "labels", "fields", "expected"),
    [
        pytest.param("", "", "", ["/cluster", "a/x", "a/y", "b/a", "b/z"], id="all-sorted"),
        pytest.param("a", "", "", ["a/x", "a/y"], id="one-namespace"),
        pytest.param("c", "", "", [], id="empty-namespace"),
        pytest.param("", "app=web", "", ["/cluster", "b/a", "b/z"], id="labels"),
        pytest.param("b", "app=web,tier", "", ["b/a"], id="namespace-and-labels"),
        pytest.param("", "!app", "", ["a/x"], id="unlabelled-object"),
        pytest.param("", "app!=web", "", ["a/x", "a/y"], id="not-equal-includes-unlabelled"),
        pytest.param("", "", "metadata.name=a", ["b/a"], id="fields"),
        pytest.param("", "", "metadata.namespace!=b", ["/cluster", "a/x", "a/y"], id="not-ns"),
        pytest.param("b", "app=web", "metadata.name!=z", ["b/a"], id="everything"),
    ],
)
def test_filter_objects(namespace: str, labels: str, fields: str, expected: list[str]) -> None:
    before = copy.deepcopy(OBJECTS)
    result = filter_objects(
        reversed(OBJECTS), namespace=namespace, label_selector=labels, field_selector=fields
    )
    assert names(result) == expected
    assert before == OBJECTS


def test_filter_objects_returns_copies() -> None:
    result = filter_objects(OBJECTS, namespace="", label_selector="", field_selector="")
    assert all(copied is not original for copied in result for original in OBJECTS)
    result[0]["extra"] = True
    assert all("extra" not in original for original in OBJECTS)


def test_filter_objects_tolerates_odd_metadata() -> None:
    odd: list[dict[str, Any]] = [
        {"kind": "X"},
        {"metadata": None},
        {"metadata": {"name": "n", "labels": None}},
    ]
    assert len(filter_objects(odd, namespace="", label_selector="", field_selector="")) == 3
    assert filter_objects(odd, namespace="", label_selector="a", field_selector="") == []
    assert filter_objects(odd, namespace="ns", label_selector="", field_selector="") == []


@pytest.mark.parametrize(
    ("labels", "fields"),
    [
        pytest.param("app in (", "", id="bad-labels"),
        pytest.param("", "metadata.name", id="bad-fields"),
    ],
)
def test_filter_objects_bad_selector(labels: str, fields: str) -> None:
    with pytest.raises(ValueError):
        filter_objects(OBJECTS, namespace="", label_selector=labels, field_selector=fields)


def test_list_body() -> None:
    bare = {"metadata": {"name": "x"}, "data": {}}
    complete = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "y"}}
    half = {"kind": "ConfigMap", "metadata": {"name": "z"}}
    body = list_body(
        [bare, complete, half], api_version="v1", kind="ConfigMap", resource_version="42"
    )
    assert body == {
        "apiVersion": "v1",
        "kind": "ConfigMapList",
        "metadata": {"resourceVersion": "42"},
        "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}},
            complete,
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "z"}},
        ],
    }
    assert list(body["items"][0]) == ["apiVersion", "kind", "metadata", "data"]
    assert body["items"][1] is complete  # kept as is
    assert bare == {"metadata": {"name": "x"}, "data": {}}  # not modified
    assert half == {"kind": "ConfigMap", "metadata": {"name": "z"}}


@pytest.mark.parametrize(
    ("api_version", "kind", "list_kind"),
    [
        pytest.param("apps/v1", "Deployment", "DeploymentList", id="group"),
        pytest.param("cache.example.com/v1alpha1", "Memcached", "MemcachedList", id="crd"),
    ],
)
def test_list_body_empty(api_version: str, kind: str, list_kind: str) -> None:
    assert list_body([], api_version=api_version, kind=kind, resource_version="") == {
        "apiVersion": api_version,
        "kind": list_kind,
        "metadata": {"resourceVersion": ""},
        "items": [],
    }
