"""Label and field selector strings, and LIST answers built from cached objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runner.proxy.filtering import (
    filter_objects,
    list_body,
    parse_field_selector_string,
    parse_label_selector_string,
)

LABELS = {"app": "memcached", "tier": "cache", "env": "", "replicas": "3"}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        pytest.param("", LABELS, True, id="empty-selects-all"),
        pytest.param("", {}, True, id="empty-selects-unlabelled"),
        pytest.param("   ", LABELS, True, id="blank-selects-all"),
        # equality
        pytest.param("app=memcached", LABELS, True, id="equals"),
        pytest.param("app==memcached", LABELS, True, id="double-equals"),
        pytest.param("app=redis", LABELS, False, id="equals-other-value"),
        pytest.param("owner=me", LABELS, False, id="equals-absent-key"),
        pytest.param("env=", LABELS, True, id="equals-empty-value"),
        pytest.param("app=", LABELS, False, id="equals-empty-value-differs"),
        pytest.param("owner=", LABELS, False, id="equals-empty-value-absent"),
        pytest.param("app!=redis", LABELS, True, id="not-equals"),
        pytest.param("app!=memcached", LABELS, False, id="not-equals-same"),
        pytest.param("owner!=me", LABELS, True, id="not-equals-absent-key"),
        pytest.param("env!=", LABELS, False, id="not-equals-empty"),
        # sets
        pytest.param("app in (redis,memcached)", LABELS, True, id="in"),
        pytest.param("app in (redis)", LABELS, False, id="in-not-listed"),
        pytest.param("owner in (me)", LABELS, False, id="in-absent-key"),
        pytest.param("app notin (redis)", LABELS, True, id="notin"),
        pytest.param("app notin (redis,memcached)", LABELS, False, id="notin-listed"),
        pytest.param("owner notin (me)", LABELS, True, id="notin-absent-key"),
        pytest.param("env in ()", LABELS, True, id="in-empty-set-is-empty-value"),
        pytest.param("app in ()", LABELS, False, id="in-empty-set-other-value"),
        pytest.param("env in (a,)", LABELS, True, id="in-trailing-comma-adds-empty"),
        pytest.param("env in (,a)", LABELS, True, id="in-leading-comma-adds-empty"),
        pytest.param("env in (a,,b)", LABELS, True, id="in-double-comma-adds-empty"),
        pytest.param("app in (a,,b)", LABELS, False, id="in-double-comma-other"),
        pytest.param("app in (in,notin,memcached)", LABELS, True, id="keywords-as-values"),
        # existence
        pytest.param("app", LABELS, True, id="exists"),
        pytest.param("env", LABELS, True, id="exists-empty-value"),
        pytest.param("owner", LABELS, False, id="exists-absent"),
        pytest.param("!owner", LABELS, True, id="does-not-exist"),
        pytest.param("!app", LABELS, False, id="does-not-exist-present"),
        pytest.param("! owner", LABELS, True, id="does-not-exist-space"),
        # integer comparison
        pytest.param("replicas>2", LABELS, True, id="greater"),
        pytest.param("replicas>3", LABELS, False, id="greater-equal-bound"),
        pytest.param("replicas<4", LABELS, True, id="less"),
        pytest.param("replicas<3", LABELS, False, id="less-equal-bound"),
        pytest.param("app>1", LABELS, False, id="greater-non-integer-label"),
        pytest.param("owner<9", LABELS, False, id="less-absent-key"),
        pytest.param("n>1", {"n": "1_000"}, False, id="underscores-are-not-integers"),
        pytest.param("n<1", {"n": " 0"}, False, id="spaces-are-not-integers"),
        pytest.param("n<1", {"n": "-5"}, True, id="negative-label"),
        pytest.param("n>1", {"n": "99999999999999999999"}, False, id="label-beyond-int64"),
        # conjunctions and whitespace
        pytest.param("app=memcached,tier=cache", LABELS, True, id="and"),
        pytest.param("app=memcached,tier=web", LABELS, False, id="and-one-fails"),
        pytest.param(
            "app in (memcached), tier notin (web),env,!owner, replicas>1",
            LABELS,
            True,
            id="all-operators",
        ),
        pytest.param(
            " \tapp  =  memcached ,\n tier  in  ( web , cache ) ", LABELS, True, id="whitespace"
        ),
        pytest.param("app in(memcached)", LABELS, True, id="no-space-before-paren"),
        pytest.param(
            "app.kubernetes.io/name=memcached",
            {"app.kubernetes.io/name": "memcached"},
            True,
            id="prefixed-key",
        ),
        pytest.param("in=x", {"in": "x"}, True, id="keyword-as-key"),
        pytest.param("app=memcached", {}, False, id="no-labels"),
    ],
)
def test_label_selector_matches(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector_string(selector)(labels) is expected


@pytest.mark.parametrize(
    ("selector", "bad_part"),
    [
        pytest.param(",", "','", id="lone-comma"),
        pytest.param("app=x,", "the end of the selector", id="trailing-comma"),
        pytest.param("app=x,,b", "','", id="double-comma"),
        pytest.param(",app", "','", id="leading-comma"),
        pytest.param("=x", "'='", id="missing-key"),
        pytest.param("app=x y", "'y'", id="two-values"),
        pytest.param("app x", "'x'", id="missing-operator"),
        pytest.param("app in x", "'x'", id="in-without-parens"),
        pytest.param("app in (x", "the end of the selector", id="unclosed-paren"),
        pytest.param("app in (x y)", "'y'", id="set-missing-comma"),
        pytest.param("app in", "the end of the selector", id="in-without-values"),
        pytest.param("app in (x))", "')'", id="extra-paren"),
        pytest.param("app=(x)", "'('", id="paren-as-value"),
        pytest.param("app=!x", "'!'", id="bang-as-value"),
        pytest.param("!app=x", "'='", id="negated-with-operator"),
        pytest.param("!", "the end of the selector", id="bang-only"),
        pytest.param("!!app", "'!'", id="double-bang"),
        pytest.param("app=in", None, id="keyword-value-ok"),  # valid: see below
        pytest.param("app>x", "must be an integer", id="greater-non-integer"),
        pytest.param("app<", "must be an integer", id="less-empty"),
        pytest.param("app>-1", "invalid label value", id="negative-bound-is-not-a-label-value"),
        pytest.param("app=x_", "invalid label value 'x_'", id="bad-value"),
        pytest.param("app=" + "v" * 64, "invalid label value", id="value-too-long"),
        pytest.param("-app=x", "invalid label key '-app'", id="bad-key"),
        pytest.param("Foo.Com/app=x", "invalid label key", id="bad-prefix"),
        pytest.param("k" * 64, "invalid label key", id="key-too-long"),
        pytest.param("app in (x_)", "invalid label value 'x_'", id="bad-set-value"),
        pytest.param("app=x)", "')'", id="stray-paren"),
    ],
)
def test_label_selector_errors(selector: str, bad_part: str | None) -> None:
    if bad_part is None:
        assert parse_label_selector_string(selector)({"app": "in"}) is True
        return
    with pytest.raises(ValueError, match="invalid label selector") as caught:
        parse_label_selector_string(selector)
    assert bad_part in str(caught.value)
    assert repr(selector) in str(caught.value)


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
