"""Label selectors (Kubernetes semantics) and the field helpers watches.yaml is read with."""

from __future__ import annotations

from typing import Any

import pytest

from runner.labelselector import (
    FieldError,
    LabelSelector,
    LabelSelectorRequirement,
    describe,
    normalize_keys,
    parse_label_selector,
    selector_matches,
)

LABELS = {"app": "memcached", "tier": "cache", "env": ""}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        pytest.param({}, {}, True, id="empty-matches-nothing-labelled"),
        pytest.param({}, LABELS, True, id="empty-matches-everything"),
        pytest.param({"matchLabels": {"app": "memcached"}}, LABELS, True, id="label-equal"),
        pytest.param({"matchLabels": {"app": "redis"}}, LABELS, False, id="label-differs"),
        pytest.param({"matchLabels": {"owner": "me"}}, LABELS, False, id="label-missing"),
        pytest.param({"matchLabels": {"env": ""}}, LABELS, True, id="empty-value-present"),
        pytest.param({"matchLabels": {"other": ""}}, LABELS, False, id="empty-value-absent"),
        pytest.param(
            {"matchLabels": {"app": "memcached", "tier": "web"}},
            LABELS,
            False,
            id="all-labels-must-match",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "memcached"]}]},
            LABELS,
            True,
            id="in-listed",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
            LABELS,
            False,
            id="in-not-listed",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "nope", "operator": "In", "values": ["a"]}]},
            LABELS,
            False,
            id="in-key-absent",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["memcached"]}]},
            LABELS,
            False,
            id="notin-listed",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["redis"]}]},
            LABELS,
            True,
            id="notin-not-listed",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "nope", "operator": "NotIn", "values": ["x"]}]},
            LABELS,
            True,
            id="notin-key-absent",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            LABELS,
            True,
            id="exists-present",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "nope", "operator": "Exists"}]},
            LABELS,
            False,
            id="exists-absent",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "nope", "operator": "DoesNotExist"}]},
            LABELS,
            True,
            id="doesnotexist-absent",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]},
            LABELS,
            False,
            id="doesnotexist-present-empty",
        ),
        pytest.param(
            {
                "matchLabels": {"app": "memcached"},
                "matchExpressions": [
                    {"key": "tier", "operator": "Exists"},
                    {"key": "tier", "operator": "NotIn", "values": ["cache"]},
                ],
            },
            LABELS,
            False,
            id="everything-is-anded",
        ),
    ],
)
def test_selector_matches_like_kubernetes(
    selector: dict[str, Any], labels: dict[str, str], expected: bool
) -> None:
    parsed = parse_label_selector(selector)
    assert parsed.matches(labels) is expected
    assert selector_matches(parsed, labels) is expected


@pytest.mark.parametrize("labels", [{}, LABELS], ids=["unlabelled", "labelled"])
def test_no_selector_matches_everything(labels: dict[str, str]) -> None:
    assert selector_matches(None, labels) is True


def test_parse_builds_frozen_values() -> None:
    parsed = parse_label_selector(
        {
            "matchLabels": {"app.kubernetes.io/name": "memcached"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["cache", "db"]},
                {"key": "env", "operator": "Exists", "values": None},
            ],
        }
    )
    assert parsed == LabelSelector(
        match_labels={"app.kubernetes.io/name": "memcached"},
        match_expressions=(
            LabelSelectorRequirement(key="tier", operator="In", values=("cache", "db")),
            LabelSelectorRequirement(key="env", operator="Exists"),
        ),
    )
    assert hash(parsed) == hash(parse_label_selector({"matchExpressions": parsed_expressions()}))
    with pytest.raises(AttributeError):
        parsed.match_expressions = ()  # type: ignore[misc]


def parsed_expressions() -> list[dict[str, Any]]:
    return [
        {"key": "tier", "operator": "In", "values": ["cache", "db"]},
        {"key": "env", "operator": "Exists"},
    ]


def test_parse_accepts_field_names_in_any_case_like_go_json() -> None:
    parsed = parse_label_selector(
        {"MatchLabels": {"a": "b"}, "matchexpressions": [{"Key": "c", "OPERATOR": "Exists"}]}
    )
    assert parsed.match_labels == {"a": "b"}
    assert parsed.match_expressions == (LabelSelectorRequirement(key="c", operator="Exists"),)


EXPR_0 = "selector.matchExpressions[0]"


def expression(**fields: Any) -> dict[str, Any]:
    return {"matchExpressions": [fields]}


def bad(name: str, raw: object, key: str, fragment: str) -> Any:
    return pytest.param(raw, key, fragment, id=name)


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        bad(
            "not-mapping",
            ["a"],
            "selector",
            'expected a mapping with matchLabels/matchExpressions, got list ["a"]',
        ),
        bad(
            "unknown-key",
            {"matchLabel": {}},
            "selector.matchLabel",
            "unknown key; did you mean 'matchLabels'?",
        ),
        bad(
            "labels-not-mapping",
            {"matchLabels": ["a"]},
            "selector.matchLabels",
            'expected a mapping, got list ["a"]',
        ),
        bad(
            "label-value-int",
            {"matchLabels": {"app": 1}},
            "selector.matchLabels.app",
            "label value must be a string, got integer 1 (quote it",
        ),
        bad(
            "label-value-bool",
            {"matchLabels": {"app": True}},
            "selector.matchLabels.app",
            "got boolean true",
        ),
        bad(
            "label-key-space",
            {"matchLabels": {"bad key": "x"}},
            "selector.matchLabels.bad key",
            "invalid label key 'bad key'",
        ),
        bad(
            "label-key-prefix",
            {"matchLabels": {"Bad_Prefix/x": "y"}},
            "selector.matchLabels.Bad_Prefix/x",
            "the prefix must be a DNS subdomain",
        ),
        bad(
            "label-key-empty-prefix",
            {"matchLabels": {"/x": "y"}},
            "selector.matchLabels./x",
            "the prefix must be a DNS subdomain",
        ),
        bad(
            "label-key-empty-name",
            {"matchLabels": {"example.com/": "y"}},
            "selector.matchLabels.example.com/",
            "invalid label key 'example.com/'",
        ),
        bad(
            "label-key-too-long",
            {"matchLabels": {"a" * 64: "y"}},
            "selector.matchLabels." + "a" * 64,
            "at most 63",
        ),
        bad(
            "label-value-bad-start",
            {"matchLabels": {"app": "-x"}},
            "selector.matchLabels.app",
            "invalid label value '-x'",
        ),
        bad(
            "label-value-too-long",
            {"matchLabels": {"app": "v" * 64}},
            "selector.matchLabels.app",
            "invalid label value",
        ),
        bad(
            "expressions-not-list",
            {"matchExpressions": {"key": "a"}},
            "selector.matchExpressions",
            "expected a list, got mapping",
        ),
        bad(
            "expression-not-mapping",
            {"matchExpressions": ["a"]},
            EXPR_0,
            'expected a mapping with key, operator, values; got string "a"',
        ),
        bad("missing-key", expression(operator="Exists"), EXPR_0 + ".key", "is required"),
        bad("empty-key", expression(key="", operator="Exists"), EXPR_0 + ".key", "is required"),
        bad(
            "bad-operator",
            expression(key="a", operator="Within", values=["x"]),
            EXPR_0 + ".operator",
            'invalid operator string "Within" (valid operators: In, NotIn, Exists, DoesNotExist)',
        ),
        bad(
            "operator-is-case-sensitive",
            expression(key="a", operator="in", values=["x"]),
            EXPR_0 + ".operator",
            'invalid operator string "in"',
        ),
        bad(
            "missing-operator",
            expression(key="a"),
            EXPR_0 + ".operator",
            "invalid operator null",
        ),
        bad(
            "values-with-exists",
            expression(key="a", operator="Exists", values=["x"]),
            EXPR_0 + ".values",
            'operator Exists takes no values, got list ["x"]',
        ),
        bad(
            "values-with-doesnotexist",
            expression(key="a", operator="DoesNotExist", values=["x"]),
            EXPR_0 + ".values",
            "operator DoesNotExist takes no values",
        ),
        bad(
            "in-without-values",
            expression(key="a", operator="In"),
            EXPR_0 + ".values",
            "operator In needs at least one value",
        ),
        bad(
            "notin-empty-values",
            expression(key="a", operator="NotIn", values=[]),
            EXPR_0 + ".values",
            "operator NotIn needs at least one value",
        ),
        bad(
            "values-not-list",
            expression(key="a", operator="In", values="x"),
            EXPR_0 + ".values",
            'expected a list, got string "x"',
        ),
        bad(
            "value-int",
            expression(key="a", operator="In", values=[1]),
            EXPR_0 + ".values[0]",
            "label value must be a string, got integer 1",
        ),
        bad(
            "second-expression",
            {
                "matchExpressions": [
                    {"key": "ok", "operator": "Exists"},
                    {"key": "a", "operator": "Nope"},
                ]
            },
            "selector.matchExpressions[1].operator",
            "invalid operator",
        ),
    ],
)
def test_parse_rejects_bad_selectors(raw: object, key: str, fragment: str) -> None:
    with pytest.raises(FieldError) as caught:
        parse_label_selector(raw, path=("selector",))
    assert caught.value.key == key
    assert fragment in caught.value.problem
    assert str(caught.value) == f"{key}: {caught.value.problem}"


@pytest.mark.parametrize(
    ("path", "key"),
    [
        pytest.param((), "", id="empty"),
        pytest.param(("role",), "role", id="one"),
        pytest.param(("finalizer", "name"), "finalizer.name", id="nested"),
        pytest.param(("blacklist", 2, "kind"), "blacklist[2].kind", id="index"),
        pytest.param(("a", 0, 1), "a[0][1]", id="two-indexes"),
    ],
)
def test_field_error_key_is_readable(path: tuple[str | int, ...], key: str) -> None:
    error = FieldError(path, "problem")
    assert error.key == key
    assert str(error) == (f"{key}: problem" if key else "problem")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(None, "null", id="null"),
        pytest.param(True, "boolean true", id="bool"),
        pytest.param(5, "integer 5", id="int"),
        pytest.param(1.5, "number 1.5", id="float"),
        pytest.param("5 minutes", 'string "5 minutes"', id="string"),
        pytest.param({"a": 1}, 'mapping {"a": 1}', id="mapping"),
        pytest.param([1, "b"], 'list [1, "b"]', id="list"),
        pytest.param("x" * 100, 'string "' + "x" * 76 + "...", id="long-is-cut"),
    ],
)
def test_describe_names_type_and_value(value: object, text: str) -> None:
    assert describe(value) == text


def test_normalize_keys_maps_any_case_to_canonical() -> None:
    fields = normalize_keys({"Kind": "K", "VERSION": "v1"}, ("group", "version", "kind"), path=())
    assert fields == {"kind": "K", "version": "v1"}


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        bad("typo", {"knd": 1}, "knd", "did you mean 'kind'? known keys: group, version, kind"),
        bad("no-suggestion", {"zzz": 1}, "zzz", "unknown key; known keys: group, version, kind"),
        bad("non-string", {1: 1}, "1", "unknown key"),
        bad("twice", {"kind": 1, "Kind": 2}, "Kind", "given twice (also as 'kind')"),
    ],
)
def test_normalize_keys_rejects(raw: dict[Any, Any], key: str, fragment: str) -> None:
    with pytest.raises(FieldError) as caught:
        normalize_keys(raw, ("group", "version", "kind"), path=())
    assert caught.value.key == key
    assert fragment in caught.value.problem


def test_requirement_with_unknown_operator_refuses_to_guess() -> None:
    with pytest.raises(ValueError, match="unknown label selector operator"):
        LabelSelectorRequirement(key="a", operator="Near").matches({"a": "b"})
