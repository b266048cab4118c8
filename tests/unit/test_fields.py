"""The field helpers hand-written mappings (watches.yaml, selectors) are read with."""

from __future__ import annotations

from typing import Any

import pytest

from runner.util.fields import FieldError, describe, normalize_keys


def bad(name: str, raw: object, key: str, fragment: str) -> Any:
    return pytest.param(raw, key, fragment, id=name)


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
