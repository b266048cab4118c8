"""Go duration strings: the same accepted, the same rejected, printed like Go."""

from __future__ import annotations

import math

import pytest

from runner.util.durations import (
    format_duration,
    format_duration_ns,
    parse_duration,
    parse_duration_ns,
)

NS = 1
US = 1_000
MS = 1_000_000
S = 1_000_000_000
M = 60 * S
H = 60 * M
MAX = (1 << 63) - 1
MIN = -(1 << 63)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # zero, alone and signed
        pytest.param("0", 0, id="zero"),
        pytest.param("+0", 0, id="plus-zero"),
        pytest.param("-0", 0, id="minus-zero"),
        pytest.param("0s", 0, id="zero-seconds"),
        # simple
        pytest.param("5s", 5 * S, id="seconds"),
        pytest.param("30s", 30 * S, id="thirty-seconds"),
        pytest.param("1478s", 1478 * S, id="many-seconds"),
        pytest.param("-5s", -5 * S, id="negative"),
        pytest.param("+5s", 5 * S, id="plus-sign"),
        pytest.param("-0s", 0, id="negative-zero-seconds"),
        pytest.param("10h", 10 * H, id="ten-hours"),
        # decimals
        pytest.param("5.0s", 5 * S, id="decimal-zero"),
        pytest.param("5.6s", 5 * S + 600 * MS, id="decimal"),
        pytest.param("5.s", 5 * S, id="trailing-point"),
        pytest.param(".5s", 500 * MS, id="leading-point"),
        pytest.param("1.004s", 1 * S + 4 * MS, id="decimal-leading-zeros"),
        pytest.param("100.00100s", 100 * S + 1 * MS, id="decimal-trailing-zeros"),
        pytest.param("1.5h", 90 * M, id="fraction-of-hour"),
        # every unit, both micro signs
        pytest.param("10ns", 10 * NS, id="ns"),
        pytest.param("11us", 11 * US, id="us"),
        pytest.param("12\u00b5s", 12 * US, id="micro-sign"),
        pytest.param("12\u03bcs", 12 * US, id="greek-mu"),
        pytest.param("13ms", 13 * MS, id="ms"),
        pytest.param("14s", 14 * S, id="s"),
        pytest.param("15m", 15 * M, id="m"),
        pytest.param("16h", 16 * H, id="h"),
        # composites, in any order
        pytest.param("1m30s", 90 * S, id="minute-thirty"),
        pytest.param("3h30m", 3 * H + 30 * M, id="hours-minutes"),
        pytest.param("10.5s4m", 4 * M + 10 * S + 500 * MS, id="out-of-order"),
        pytest.param("-2m3.4s", -(2 * M + 3 * S + 400 * MS), id="negative-composite"),
        pytest.param("1h2m3s4ms5us6ns", H + 2 * M + 3 * S + 4 * MS + 5 * US + 6, id="all-units"),
        pytest.param("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS, id="composite"),
        # large values and float-accurate fractions
        pytest.param("52763797000ns", 52763797000, id="large-ns"),
        pytest.param("0.3333333333333333333h", 20 * M, id="third-of-hour"),
        pytest.param("9007199254740993ns", (1 << 53) + 1, id="beyond-float53"),
        pytest.param("9223372036854775807ns", MAX, id="max-ns"),
        pytest.param("9223372036854775.807us", MAX, id="max-us"),
        pytest.param("9223372036s854ms775us807ns", MAX, id="max-composite"),
        pytest.param("-9223372036854775808ns", MIN, id="min-ns"),
        pytest.param("-9223372036854775.808us", MIN, id="min-us"),
        pytest.param("-2562047h47m16.854775808s", MIN, id="min-hours"),
        pytest.param("0.100000000000000000000h", 6 * M, id="long-fraction"),
        pytest.param(
            "0.830103483285477580700h", 49 * M + 48 * S + 372539827, id="long-fraction-precise"
        ),
        pytest.param("0000000000000000000000000001s", S, id="leading-zeros"),
        pytest.param("0.1ns", 0, id="sub-nanosecond-truncated"),
    ],
)
def test_parse_duration_ns_accepts_go_durations(text: str, expected: int) -> None:
    assert parse_duration_ns(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("", 'invalid duration ""', id="empty"),
        pytest.param("-", 'invalid duration "-"', id="sign-only"),
        pytest.param("+", 'invalid duration "+"', id="plus-only"),
        pytest.param("3", 'missing unit in duration "3"', id="number-without-unit"),
        pytest.param("1.5", 'missing unit in duration "1.5"', id="decimal-without-unit"),
        pytest.param("1.5.5s", 'missing unit in duration "1.5.5s"', id="two-points"),
        pytest.param("s", 'invalid duration "s"', id="unit-only"),
        pytest.param(".", 'invalid duration "."', id="point-only"),
        pytest.param("-.", 'invalid duration "-."', id="sign-point"),
        pytest.param(".s", 'invalid duration ".s"', id="point-unit"),
        pytest.param("+.s", 'invalid duration "+.s"', id="sign-point-unit"),
        pytest.param("1d", 'unknown unit "d" in duration "1d"', id="days"),
        pytest.param("5 minutes", 'unknown unit " minutes" in duration "5 minutes"', id="words"),
        pytest.param("1h-5m", 'unknown unit "h-" in duration "1h-5m"', id="inner-sign"),
        pytest.param("1e3s", 'unknown unit "e" in duration "1e3s"', id="exponent"),
        pytest.param("1S", 'unknown unit "S"', id="upper-case-unit"),
        pytest.param(" 1s", 'invalid duration " 1s"', id="leading-space"),
        pytest.param("1s ", 'unknown unit "s "', id="trailing-space"),
        pytest.param("\u00851s", 'invalid duration "\\xc2\\x851s"', id="non-ascii-quoted-as-go"),
        pytest.param("9223372036854775808ns", "out of range", id="overflow-ns"),
        pytest.param("-9223372036854775809ns", "out of range", id="underflow-ns"),
        pytest.param("9223372036854775810ns", "out of range", id="overflow-in-digits"),
        pytest.param("9223372036854776us", "out of range", id="overflow-unit"),
        pytest.param("3000000h", "out of range", id="overflow-hours"),
        pytest.param("9223372036854775.808us", "out of range", id="overflow-fraction"),
        pytest.param("9223372036854ms775us808ns", "out of range", id="overflow-sum"),
        pytest.param("1" * 5000 + "s", "out of range", id="huge-digit-string"),
    ],
)
def test_parse_duration_rejects_like_go(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration_ns(text)
    assert message in str(caught.value)


def test_unknown_unit_message_lists_valid_units() -> None:
    with pytest.raises(ValueError, match=r"units: ns, us, µs, ms, s, m, h"):
        parse_duration("10 hours")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("1m30s", 90.0, id="composite"),
        pytest.param("1.5h", 5400.0, id="fraction"),
        pytest.param("300ms", 0.3, id="milliseconds"),
        pytest.param("-2s", -2.0, id="negative"),
        pytest.param("0", 0.0, id="zero"),
        pytest.param("1ns", 1e-9, id="nanosecond"),
    ],
)
def test_parse_duration_returns_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, rel=1e-12, abs=0)


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [
        pytest.param(0, "0s", id="zero"),
        pytest.param(1, "1ns", id="nanosecond"),
        pytest.param(999, "999ns", id="below-microsecond"),
        pytest.param(1100, "1.1\u00b5s", id="microseconds-with-micro-sign"),
        pytest.param(2200 * US, "2.2ms", id="milliseconds"),
        pytest.param(3300 * MS, "3.3s", id="seconds"),
        pytest.param(30 * S, "30s", id="thirty-seconds"),
        pytest.param(4 * M + 5 * S, "4m5s", id="minutes"),
        pytest.param(4 * M + 5001 * MS, "4m5.001s", id="minutes-fraction"),
        pytest.param(5 * H + 6 * M + 7001 * MS, "5h6m7.001s", id="hours"),
        pytest.param(8 * M + 1, "8m0.000000001s", id="minute-and-nanosecond"),
        pytest.param(H, "1h0m0s", id="one-hour"),
        pytest.param(10 * H, "10h0m0s", id="ten-hours"),
        pytest.param(90 * M, "1h30m0s", id="ninety-minutes"),
        pytest.param(MAX, "2562047h47m16.854775807s", id="max"),
        pytest.param(MIN, "-2562047h47m16.854775808s", id="min"),
        pytest.param(-1, "-1ns", id="negative-ns"),
        pytest.param(-1100, "-1.1\u00b5s", id="negative-us"),
        pytest.param(-2200 * US, "-2.2ms", id="negative-ms"),
        pytest.param(-3300 * MS, "-3.3s", id="negative-s"),
        pytest.param(-(4 * M + 5 * S), "-4m5s", id="negative-minutes"),
    ],
)
def test_format_duration_ns_matches_go_string(nanoseconds: int, text: str) -> None:
    assert format_duration_ns(nanoseconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0, "0s", id="int-zero"),
        pytest.param(0.0, "0s", id="float-zero"),
        pytest.param(30, "30s", id="int-seconds"),
        pytest.param(1.5, "1.5s", id="one-and-a-half"),
        pytest.param(1.1, "1.1s", id="float-rounding"),
        pytest.param(3600, "1h0m0s", id="hour"),
        pytest.param(36000.0, "10h0m0s", id="default-reconcile-period"),
        pytest.param(-0.001, "-1ms", id="negative-ms"),
        pytest.param(1e-9, "1ns", id="nanosecond"),
        pytest.param(0.3, "300ms", id="three-hundred-ms"),
    ],
)
def test_format_duration_takes_seconds(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    "text",
    ["1h", "1.5h", "1m30s", "-2m3.4s", "1h2m3s4ms5us6ns", "9223372036854775807ns", "1.1\u00b5s"],
)
def test_format_then_parse_round_trips(text: str) -> None:
    nanoseconds = parse_duration_ns(text)
    assert parse_duration_ns(format_duration_ns(nanoseconds)) == nanoseconds


@pytest.mark.parametrize(
    ("value", "error"),
    [
        pytest.param(math.nan, ValueError, id="nan"),
        pytest.param(math.inf, ValueError, id="infinity"),
        pytest.param(1e12, ValueError, id="beyond-int64-ns"),
        pytest.param(10**12, ValueError, id="int-beyond-int64-ns"),
        pytest.param(True, TypeError, id="bool"),
    ],
)
def test_format_duration_rejects_non_durations(value: float, error: type[Exception]) -> None:
    with pytest.raises(error):
        format_duration(value)


def test_format_duration_ns_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match="out of range"):
        format_duration_ns(MAX + 1)
