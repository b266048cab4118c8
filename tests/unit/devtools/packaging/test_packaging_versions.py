"""Semantic versions, skip ranges and bundle names, as OLM parses them."""

from __future__ import annotations

import pytest

from runner.devtools.packaging import versions


@pytest.mark.parametrize(
    ("text", "valid"),
    [
        pytest.param("0.1.0", True, id="plain"),
        pytest.param("1.2.3-rc.1+build.5", True, id="pre-and-build"),
        pytest.param("v1.2.3", False, id="leading-v"),
        pytest.param("1.2", False, id="two-parts"),
        pytest.param("01.2.3", False, id="leading-zero"),
        pytest.param("1.2.3-01", False, id="numeric-pre-leading-zero"),
    ],
)
def test_is_semver(text: str, valid: bool) -> None:
    assert versions.is_semver(text) is valid


def test_ordering() -> None:
    ordered = ["0.9.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-beta", "1.0.0", "1.0.1", "1.10.0"]
    parsed = [versions.Version(v) for v in reversed(ordered)]
    assert [v.text for v in sorted(parsed)] == ordered
    assert versions.Version("1.0.0+a") == versions.Version("1.0.0+b")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(">=0.1.0 <0.2.0", None, id="and"),
        pytest.param(">=1.0.0 <2.0.0 || >3.0.0", None, id="or"),
        pytest.param("<1.x", None, id="wildcard"),
        pytest.param("", "empty", id="empty"),
        pytest.param(">=1.0.0 ||", "empty", id="dangling-or"),
        pytest.param("soon", "comparison", id="word"),
    ],
)
def test_range_error(text: str, problem: str | None) -> None:
    error = versions.range_error(text)
    assert error is None if problem is None else problem in (error or "")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        pytest.param("memcached-operator.v0.1.0", None, id="ok"),
        pytest.param("Memcached.v1.0.0", "DNS-1123", id="upper-case"),
        pytest.param("a" * 60 + ".v1.0.0", "63 characters", id="too-long-for-a-label"),
        pytest.param("", "empty", id="empty"),
    ],
)
def test_name_error(name: str, problem: str | None) -> None:
    error = versions.name_error(name)
    assert error is None if problem is None else problem in (error or "")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("memcached-operator.v0.1.0", ("memcached-operator", "0.1.0"), id="ok"),
        pytest.param("a.b.v1.2.3-rc.1", ("a.b", "1.2.3-rc.1"), id="dots-and-pre"),
        pytest.param("memcached-operator-0.1.0", None, id="no-v"),
    ],
)
def test_split_csv_name(name: str, expected: tuple[str, str] | None) -> None:
    assert versions.split_csv_name(name) == expected
