"""Label selectors in both spellings, with Kubernetes semantics."""

from __future__ import annotations

from typing import Any

import pytest

from runner.util.fields import FieldError
from runner.util.labelselector import (
    LabelSelector,
    LabelSelectorRequirement,
    parse_label_selector,
    parse_label_selector_string,
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


def test_requirement_with_unknown_operator_refuses_to_guess() -> None:
    with pytest.raises(ValueError, match="unknown label selector operator"):
        LabelSelectorRequirement(key="a", operator="Near").matches({"a": "b"})


# --- the query-string form (a LIST's labelSelector parameter) --------------------------

QUERY_LABELS = {"app": "memcached", "tier": "cache", "env": "", "replicas": "3"}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        pytest.param("", QUERY_LABELS, True, id="empty-selects-all"),
        pytest.param("", {}, True, id="empty-selects-unlabelled"),
        pytest.param("   ", QUERY_LABELS, True, id="blank-selects-all"),
        # equality
        pytest.param("app=memcached", QUERY_LABELS, True, id="equals"),
        pytest.param("app==memcached", QUERY_LABELS, True, id="double-equals"),
        pytest.param("app=redis", QUERY_LABELS, False, id="equals-other-value"),
        pytest.param("owner=me", QUERY_LABELS, False, id="equals-absent-key"),
        pytest.param("env=", QUERY_LABELS, True, id="equals-empty-value"),
        pytest.param("app=", QUERY_LABELS, False, id="equals-empty-value-differs"),
        pytest.param("owner=", QUERY_LABELS, False, id="equals-empty-value-absent"),
        pytest.param("app!=redis", QUERY_LABELS, True, id="not-equals"),
        pytest.param("app!=memcached", QUERY_LABELS, False, id="not-equals-same"),
        pytest.param("owner!=me", QUERY_LABELS, True, id="not-equals-absent-key"),
        pytest.param("env!=", QUERY_LABELS, False, id="not-equals-empty"),
        # sets
        pytest.param("app in (redis,memcached)", QUERY_LABELS, True, id="in"),
        pytest.param("app in (redis)", QUERY_LABELS, False, id="in-not-listed"),
        pytest.param("owner in (me)", QUERY_LABELS, False, id="in-absent-key"),
        pytest.param("app notin (redis)", QUERY_LABELS, True, id="notin"),
        pytest.param("app notin (redis,memcached)", QUERY_LABELS, False, id="notin-listed"),
        pytest.param("owner notin (me)", QUERY_LABELS, True, id="notin-absent-key"),
        pytest.param("env in ()", QUERY_LABELS, True, id="in-empty-set-is-empty-value"),
        pytest.param("app in ()", QUERY_LABELS, False, id="in-empty-set-other-value"),
        pytest.param("env in (a,)", QUERY_LABELS, True, id="in-trailing-comma-adds-empty"),
        pytest.param("env in (,a)", QUERY_LABELS, True, id="in-leading-comma-adds-empty"),
        pytest.param("env in (a,,b)", QUERY_LABELS, True, id="in-double-comma-adds-empty"),
        pytest.param("app in (a,,b)", QUERY_LABELS, False, id="in-double-comma-other"),
        pytest.param("app in (in,notin,memcached)", QUERY_LABELS, True, id="keywords-as-values"),
        # existence
        pytest.param("app", QUERY_LABELS, True, id="exists"),
        pytest.param("env", QUERY_LABELS, True, id="exists-empty-value"),
        pytest.param("owner", QUERY_LABELS, False, id="exists-absent"),
        pytest.param("!owner", QUERY_LABELS, True, id="does-not-exist"),
        pytest.param("!app", QUERY_LABELS, False, id="does-not-exist-present"),
        pytest.param("! owner", QUERY_LABELS, True, id="does-not-exist-space"),
        # integer comparison
        pytest.param("replicas>2", QUERY_LABELS, True, id="greater"),
        pytest.param("replicas>3", QUERY_LABELS, False, id="greater-equal-bound"),
        pytest.param("replicas<4", QUERY_LABELS, True, id="less"),
        pytest.param("replicas<3", QUERY_LABELS, False, id="less-equal-bound"),
        pytest.param("app>1", QUERY_LABELS, False, id="greater-non-integer-label"),
        pytest.param("owner<9", QUERY_LABELS, False, id="less-absent-key"),
        pytest.param("n>1", {"n": "1_000"}, False, id="underscores-are-not-integers"),
        pytest.param("n<1", {"n": " 0"}, False, id="spaces-are-not-integers"),
        pytest.param("n<1", {"n": "-5"}, True, id="negative-label"),
        pytest.param("n>1", {"n": "99999999999999999999"}, False, id="label-beyond-int64"),
        # conjunctions and whitespace
        pytest.param("app=memcached,tier=cache", QUERY_LABELS, True, id="and"),
        pytest.param("app=memcached,tier=web", QUERY_LABELS, False, id="and-one-fails"),
        pytest.param(
            "app in (memcached), tier notin (web),env,!owner, replicas>1",
            QUERY_LABELS,
            True,
            id="all-operators",
        ),
        pytest.param(
            " \tapp  =  memcached ,\n tier  in  ( web , cache ) ",
            QUERY_LABELS,
            True,
            id="whitespace",
        ),
        pytest.param("app in(memcached)", QUERY_LABELS, True, id="no-space-before-paren"),
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
def test_query_string_matches_like_the_api_server(
    selector: str, labels: dict[str, str], expected: bool
) -> None:
    assert parse_label_selector_string(selector).matches(labels) is expected


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
def test_query_string_errors_name_the_bad_part(selector: str, bad_part: str | None) -> None:
    if bad_part is None:
        assert parse_label_selector_string(selector).matches({"app": "in"}) is True
        return
    with pytest.raises(ValueError, match="invalid label selector") as caught:
        parse_label_selector_string(selector)
    assert bad_part in str(caught.value)
    assert repr(selector) in str(caught.value)


@pytest.mark.parametrize(
    ("structured", "query"),
    [
        pytest.param({}, "", id="empty"),
        pytest.param({"matchLabels": {"app": "memcached"}}, "app=memcached", id="equal"),
        pytest.param({"matchLabels": {"env": ""}}, "env=", id="equal-empty"),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "memcached"]}]},
            "app in (memcached,a)",
            id="in",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["memcached"]}]},
            "app notin (memcached)",
            id="notin",
        ),
        pytest.param(
            {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, "tier", id="exists"
        ),
        pytest.param(
            {"matchExpressions": [{"key": "owner", "operator": "DoesNotExist"}]},
            "!owner",
            id="does-not-exist",
        ),
        pytest.param(
            {
                "matchLabels": {"app": "memcached"},
                "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["cache"]}],
            },
            "app=memcached,tier notin (cache)",
            id="and",
        ),
    ],
)
def test_both_spellings_select_the_same_objects(structured: dict[str, Any], query: str) -> None:
    from_yaml = parse_label_selector(structured)
    from_query = parse_label_selector_string(query)
    for labels in ({}, LABELS, QUERY_LABELS, {"app": "a"}, {"app": "x", "tier": "web"}):
        assert from_yaml.matches(labels) is from_query.matches(labels), labels


def test_query_string_builds_the_same_values() -> None:
    assert parse_label_selector_string("b in (y,x), !c, d>2") == LabelSelector(
        match_expressions=(
            LabelSelectorRequirement(key="b", operator="In", values=("x", "y")),
            LabelSelectorRequirement(key="c", operator="DoesNotExist"),
            LabelSelectorRequirement(key="d", operator="Gt", values=("2",)),
        )
    )


@pytest.mark.parametrize("operator", ["Gt", "Lt"])
def test_structured_form_has_no_integer_comparison(operator: str) -> None:
    # metav1.LabelSelectorRequirement allows only In, NotIn, Exists, DoesNotExist.
    with pytest.raises(FieldError, match="valid operators: In, NotIn, Exists, DoesNotExist"):
        parse_label_selector(
            {"matchExpressions": [{"key": "a", "operator": operator, "values": ["1"]}]}
        )
