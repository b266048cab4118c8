"""runner.watches.extravars: snake_case keys and the extra-vars of a run (SPEC "Extra-vars")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runner.watches.extravars import (
    build_extra_vars,
    cr_var_name,
    mark_unsafe,
    snake_case_keys,
    to_snake_case,
)

# The Go original's own table (paramconv_test.go, TestToSnake), case by case.
GO_TABLE = [
    pytest.param("var", "var", id="go-keep-the-same"),
    pytest.param("888", "888", id="go-only-numbers"),
    pytest.param("k8s_var", "k8s_var", id="go-numbers-and-underscore"),
    pytest.param("_k8s_var", "_k8s_var", id="go-starts-with-underscore"),
    pytest.param("k8s var", "k8s_var", id="go-space-becomes-underscore"),
    pytest.param(
        "ThisShouldHaveUnderscores", "_this_should_have_underscores", id="go-camel-leading-capital"
    ),
    pytest.param("sizeK8sBuckets", "size_k8s_buckets", id="go-camel-and-numbers"),
    pytest.param("_CanYou_Handle_mixedVars", "_can_you_handle_mixed_vars", id="go-mixed"),
    pytest.param("this_should_be_a_noop", "this_should_be_a_noop", id="go-noop"),
    pytest.param("egressIPs", "egress_ips", id="go-plural-special-word-at-end"),
    pytest.param("egressIPsEgress", "egress_ips_egress", id="go-plural-special-word-in-middle"),
    pytest.param("egressIPsegress", "egress_ips_egress", id="go-plural-special-word-then-lower"),
    pytest.param("IPsegress", "_ips_egress", id="go-plural-special-word-at-start"),
    pytest.param("egressIP", "egress_ip", id="go-special-word-at-end"),
    pytest.param("egressIPEgress", "egress_ip_egress", id="go-special-word-in-middle"),
    pytest.param("egressIPegress", "egress_ip_egress", id="go-special-word-then-lower"),
    pytest.param("URLegressIPEgressHTTP", "url_egress_ip_egress_http", id="go-multiple-special"),
    pytest.param(
        "URLsegressIPsEgressHTTPs", "_urls_egress_ips_egress_https", id="go-multiple-plurals"
    ),
    pytest.param(
        "THIS_IS_SKIP_NOT_SK_IP", "_this_is_skip_not_sk_ip", id="go-all-upper-skips-special"
    ),
]

# The Go original's MapToSnake table: keys that are already snake_case stay.
GO_MAP_TABLE = {
    "var": "value",
    "var_var": "value",
    "size_k8s_test": "value",
    "888": "value",
}

# SPEC examples and other behaviour checked against the original's algorithm.
MORE_CASES = [
    pytest.param("httpURL", "http_url", id="spec-http-url"),
    pytest.param("Foo", "_foo", id="spec-leading-capital"),
    pytest.param("HTTPServer", "http_server", id="spec-acronym-first-word-no-prefix"),
    pytest.param("a1b2c3", "a_1_b2c3", id="spec-digits"),
    pytest.param("JSONData", "_json_data", id="only-http-url-ip-are-acronyms"),
    pytest.param("IPs", "__ips", id="plural-acronym-alone-double-underscore"),
    pytest.param("IP", "ip", id="acronym-alone-all-upper"),
    pytest.param("URL", "url", id="url-alone"),
    pytest.param("aB", "ab", id="one-letter-word-not-split"),
    pytest.param("replicaCount", "replica_count", id="plain-camel"),
    pytest.param("max-surge", "max_surge", id="dash"),
    pytest.param("  padded  ", "padded", id="spaces-trimmed"),
    pytest.param("", "", id="empty"),
    pytest.param("   ", "", id="only-spaces"),
    pytest.param("v1beta1", "v1beta1", id="digits-need-letter-digit-letter-digit"),
    pytest.param("v1b2", "v_1_b2", id="digit-run-split"),
    pytest.param("ipAddress", "ip_address", id="lower-acronym-untouched"),
]


@pytest.mark.parametrize(("key", "expected"), GO_TABLE + MORE_CASES)
def test_to_snake_case(key: str, expected: str) -> None:
    assert to_snake_case(key) == expected


def test_go_map_table_keeps_snake_keys() -> None:
    assert snake_case_keys(GO_MAP_TABLE) == GO_MAP_TABLE


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param({"fooBar": 1}, {"foo_bar": 1}, id="flat"),
        pytest.param(
            {"outerKey": {"innerKey": {"deepKey": "x"}}},
            {"outer_key": {"inner_key": {"deep_key": "x"}}},
            id="nested-maps",
        ),
        pytest.param(
            {"itemList": [{"itemName": "a"}, {"itemName": "b"}, "plainString", 3]},
            {"item_list": [{"item_name": "a"}, {"item_name": "b"}, "plainString", 3]},
            id="maps-in-lists",
        ),
        pytest.param(
            {"listOfLists": [[{"deepKey": 1}]]},
            {"list_of_lists": [[{"deep_key": 1}]]},
            id="lists-in-lists",
        ),
        pytest.param(
            {"someKey": "camelCaseValue", "n": None, "b": True, "f": 1.5},
            {"some_key": "camelCaseValue", "n": None, "b": True, "f": 1.5},
            id="values-untouched",
        ),
        pytest.param([{"aB": 1}], [{"ab": 1}], id="top-level-list"),
        pytest.param("notAMap", "notAMap", id="scalar"),
    ],
)
def test_snake_case_keys(value: Any, expected: Any) -> None:
    before = copy.deepcopy(value)
    assert snake_case_keys(value) == expected
    assert value == before


def test_snake_case_keys_shares_nothing_with_input() -> None:
    value = {"outerKey": {"inner": [1, 2]}}
    out = snake_case_keys(value)
    out["outer_key"]["inner"].append(3)
    assert value == {"outerKey": {"inner": [1, 2]}}


@pytest.mark.parametrize(
    ("group", "kind", "expected"),
    [
        pytest.param("cache.example.com", "Memcached", "_cache_example_com_memcached", id="dots"),
        pytest.param(
            "cert-manager.k8s.io", "Certificate", "_cert_manager_k8s_io_certificate", id="dashes"
        ),
        pytest.param("", "Secret", "__secret", id="core-group"),
        pytest.param(
            "Apps.Example.COM", "MyKind", "_Apps_Example_COM_mykind", id="only-kind-lowered"
        ),
    ],
)
def test_cr_var_name(group: str, kind: str, expected: str) -> None:
    assert cr_var_name(group, kind) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("s", {"__ansible_unsafe": "s"}, id="string"),
        pytest.param(
            {"a": "x", "b": 1, "c": None, "d": False},
            {"a": {"__ansible_unsafe": "x"}, "b": 1, "c": None, "d": False},
            id="map-only-strings-wrapped",
        ),
        pytest.param(
            {"l": ["x", {"k": "{{ lookup('pipe', 'id') }}"}, 2]},
            {
                "l": [
                    {"__ansible_unsafe": "x"},
                    {"k": {"__ansible_unsafe": "{{ lookup('pipe', 'id') }}"}},
                    2,
                ]
            },
            id="nested-lists-and-maps",
        ),
    ],
)
def test_mark_unsafe(value: Any, expected: Any) -> None:
    assert mark_unsafe(value) == expected


def _cr(
    spec: Any = None, *, namespace: str | None = "ns", with_spec: bool = True
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "example", "uid": "1234"}
    if namespace is not None:
        metadata["namespace"] = namespace
    cr: dict[str, Any] = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": metadata,
    }
    if with_spec:
        cr["spec"] = spec
    return cr


def _build(obj: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "obj": obj,
        "group": "cache.example.com",
        "kind": "Memcached",
        "snake_case": True,
        "mark_unsafe": False,
        "watch_vars": {},
        "finalizer_vars": None,
    }
    kwargs.update(overrides)
    return build_extra_vars(**kwargs)


def _case(obj: dict[str, Any], expected: dict[str, Any], *, id: str, **overrides: Any) -> Any:
    return pytest.param(obj, overrides, expected, id=id)


CR_KEY = "_cache_example_com_memcached"
SPEC_KEY = "_cache_example_com_memcached_spec"
META = {"ansible_operator_meta": {"name": "example", "namespace": "ns"}}

BUILD_CASES = [
    _case(
        _cr({"sizeK8sBuckets": 3, "nestedConf": {"innerKey": "v"}}),
        {
            "size_k8s_buckets": 3,
            "nested_conf": {"inner_key": "v"},
            **META,
            CR_KEY: _cr({"sizeK8sBuckets": 3, "nestedConf": {"innerKey": "v"}}),
            SPEC_KEY: {"sizeK8sBuckets": 3, "nestedConf": {"innerKey": "v"}},
        },
        id="snake-cased-spec-raw-cr-vars",
    ),
    _case(
        _cr({"sizeK8sBuckets": 3}),
        {
            "sizeK8sBuckets": 3,
            **META,
            CR_KEY: _cr({"sizeK8sBuckets": 3}),
            SPEC_KEY: {"sizeK8sBuckets": 3},
        },
        id="snake-case-off",
        snake_case=False,
    ),
    _case(
        _cr(with_spec=False),
        {**META, CR_KEY: _cr({}), SPEC_KEY: {}},
        id="no-spec-gets-empty-spec",
    ),
    _case(
        _cr("not-a-map"),
        {**META, CR_KEY: _cr({}), SPEC_KEY: {}},
        id="non-map-spec-gets-empty-spec",
    ),
    _case(
        _cr({"size": 1}, namespace=None),
        {
            "size": 1,
            "ansible_operator_meta": {"name": "example", "namespace": ""},
            CR_KEY: _cr({"size": 1}, namespace=None),
            SPEC_KEY: {"size": 1},
        },
        id="cluster-scoped-empty-namespace",
    ),
    _case(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "example", "namespace": "ns"}},
        {
            **META,
            "__secret": {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "example", "namespace": "ns"},
                "spec": {},
            },
            "__secret_spec": {},
        },
        id="core-group",
        group="",
        kind="Secret",
    ),
    _case(
        _cr({"size": 1, "image": "memcached"}),
        {
            "size": 5,
            "image": "memcached",
            "extra": "from-watch",
            **META,
            CR_KEY: _cr({"size": 1, "image": "memcached"}),
            SPEC_KEY: {"size": 1, "image": "memcached"},
        },
        id="watch-vars-override-spec",
        watch_vars={"size": 5, "extra": "from-watch"},
    ),
    _case(
        _cr({"size": 1}),
        {
            "size": 9,
            "extra": "from-watch",
            "cleanup": True,
            **META,
            CR_KEY: _cr({"size": 1}),
            SPEC_KEY: {"size": 1},
        },
        id="finalizer-vars-override-watch-vars",
        watch_vars={"size": 5, "extra": "from-watch"},
        finalizer_vars={"size": 9, "cleanup": True},
    ),
    _case(
        _cr({"ansibleOperatorMeta": "x", "ansible_operator_meta": "spoof"}),
        {
            "ansible_operator_meta": {"name": "example", "namespace": "ns"},
            CR_KEY: _cr({"ansibleOperatorMeta": "x", "ansible_operator_meta": "spoof"}),
            SPEC_KEY: {"ansibleOperatorMeta": "x", "ansible_operator_meta": "spoof"},
        },
        id="meta-overrides-spec-key",
    ),
    _case(
        _cr({"size": 1}),
        {
            "size": 1,
            "ansible_operator_meta": "from-watch",
            CR_KEY: _cr({"size": 1}),
            SPEC_KEY: {"size": 1},
        },
        id="watch-vars-override-meta",
        watch_vars={"ansible_operator_meta": "from-watch"},
    ),
    _case(
        _cr({"imageName": "memcached:{{ x }}", "size": 3, "tags": ["a", 1], "conf": {"k": "v"}}),
        {
            "image_name": {"__ansible_unsafe": "memcached:{{ x }}"},
            "size": 3,
            "tags": [{"__ansible_unsafe": "a"}, 1],
            "conf": {"k": {"__ansible_unsafe": "v"}},
            "plain": "watch-string",
            **META,
            CR_KEY: {
                "apiVersion": {"__ansible_unsafe": "cache.example.com/v1alpha1"},
                "kind": {"__ansible_unsafe": "Memcached"},
                "metadata": {
                    "name": {"__ansible_unsafe": "example"},
                    "uid": {"__ansible_unsafe": "1234"},
                    "namespace": {"__ansible_unsafe": "ns"},
                },
                "spec": {
                    "imageName": {"__ansible_unsafe": "memcached:{{ x }}"},
                    "size": 3,
                    "tags": [{"__ansible_unsafe": "a"}, 1],
                    "conf": {"k": {"__ansible_unsafe": "v"}},
                },
            },
            SPEC_KEY: {
                "imageName": {"__ansible_unsafe": "memcached:{{ x }}"},
                "size": 3,
                "tags": [{"__ansible_unsafe": "a"}, 1],
                "conf": {"k": {"__ansible_unsafe": "v"}},
            },
        },
        id="mark-unsafe-spec-and-cr-not-meta-or-vars",
        mark_unsafe=True,
        watch_vars={"plain": "watch-string"},
    ),
    _case(
        _cr({"name": "x"}),
        {
            "name": {"__ansible_unsafe": "x"},
            "final": "finalizer-string",
            **META,
            CR_KEY: mark_unsafe(_cr({"name": "x"})),
            SPEC_KEY: {"name": {"__ansible_unsafe": "x"}},
        },
        id="mark-unsafe-not-finalizer-vars",
        mark_unsafe=True,
        finalizer_vars={"final": "finalizer-string"},
    ),
]


@pytest.mark.parametrize(("obj", "overrides", "expected"), BUILD_CASES)
def test_build_extra_vars(
    obj: dict[str, Any], overrides: dict[str, Any], expected: dict[str, Any]
) -> None:
    before = copy.deepcopy(obj)
    watch_before = copy.deepcopy(overrides.get("watch_vars"))
    assert _build(obj, **overrides) == expected
    assert obj == before
    assert overrides.get("watch_vars") == watch_before


def test_build_extra_vars_shares_nothing_with_inputs() -> None:
    obj = _cr({"list": [1]})
    watch_vars = {"wl": [1]}
    out = _build(obj, snake_case=False, watch_vars=watch_vars)
    out["list"].append(2)
    out[CR_KEY]["spec"]["list"].append(3)
    out[SPEC_KEY]["list"].append(4)
    out["wl"].append(5)
    assert obj == _cr({"list": [1]})
    assert watch_vars == {"wl": [1]}


def test_build_extra_vars_key_order() -> None:
    out = _build(_cr({"b": 1, "a": 2}), watch_vars={"w": 1}, finalizer_vars={"f": 1})
    assert list(out) == ["b", "a", "ansible_operator_meta", CR_KEY, SPEC_KEY, "w", "f"]
