"""Go-style durations, parsed and printed exactly as Go's `time` package does.

watches.yaml (`reconcilePeriod`), the `--reconcile-period` and leader-election flags, the
`ansible.sdk.operatorframework.io/reconcile-period` annotation and `requeue_after`'s
`period` all carry Go duration strings (`30s`, `1m30s`, `1.5h`, `-2ms`). Users copy them
from projects written for the Go operator, so the same strings must be accepted, the same
strings rejected, and printed values must look like Go's `Duration.String()`.

Arithmetic is done in integer nanoseconds with Go's overflow limits (a duration is an
int64 of nanoseconds); the float-seconds API is a thin layer over it.
"""

from __future__ import annotations

import math

__all__ = [
    "format_duration",
    "format_duration_ns",
    "parse_duration",
    "parse_duration_ns",
]

_NANOSECOND = 1
_MICROSECOND = 1_000 * _NANOSECOND
_MILLISECOND = 1_000 * _MICROSECOND
_SECOND = 1_000 * _MILLISECOND
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE

_UNITS: dict[str, int] = {
    "ns": _NANOSECOND,
    "us": _MICROSECOND,
    "\u00b5s": _MICROSECOND,  # MICRO SIGN
    "\u03bcs": _MICROSECOND,  # GREEK SMALL LETTER MU
    "ms": _MILLISECOND,
    "s": _SECOND,
    "m": _MINUTE,
    "h": _HOUR,
}
_UNIT_NAMES = "ns, us, µs, ms, s, m, h"

# A Go Duration is an int64 count of nanoseconds.
_LIMIT = 1 << 63
_MIN_NS = -_LIMIT
_MAX_NS = _LIMIT - 1


def _quote(text: str) -> str:
    """Quote like Go's time package: non-ASCII and control bytes become `\\xNN`."""
    out = ['"']
    for char in text:
        if char < " " or ord(char) >= 0x80:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
        elif char in '"\\':
            out.append("\\" + char)
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _is_digit(char: str) -> bool:
    return "0" <= char <= "9"


def _leading_fraction(text: str, start: int) -> tuple[int, float, int]:
    """Digits after the point: value, scale (10**digits kept) and the end index.

    Like Go, precision stops accumulating once the value would overflow; it is not an
    error.
    """
    value, scale, index, overflow = 0, 1.0, start, False
    while index < len(text) and _is_digit(text[index]):
        if not overflow:
            if value > (_LIMIT - 1) // 10:
                overflow = True
            else:
                candidate = value * 10 + int(text[index])
                if candidate > _LIMIT:
                    overflow = True
                else:
                    value, scale = candidate, scale * 10
        index += 1
    return value, scale, index


def parse_duration_ns(text: str) -> int:
    """Parse a Go duration string into integer nanoseconds (Go's `time.ParseDuration`).

    Grammar: `[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+`, or `0` alone (optionally signed).
    Raises ValueError for an empty string, a missing or unknown unit, or an overflow.
    """
    original = _quote(text)
    rest = text
    negative = False
    if rest and rest[0] in "+-":
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise ValueError(f"invalid duration {original}: no value")

    total = 0
    index = 0
    while index < len(rest):
        char = rest[index]
        if not (char == "." or _is_digit(char)):
            raise ValueError(f"invalid duration {original}: expected a number at {_quote(char)}")
        start = index
        while index < len(rest) and _is_digit(rest[index]):
            index += 1
        whole_digits = rest[start:index]
        significant = whole_digits.lstrip("0")
        # The length test keeps int() away from Python's limit on huge digit strings.
        whole = int(significant) if 0 < len(significant) <= 20 else 0
        if len(significant) > 20 or whole > _LIMIT:
            raise ValueError(f"invalid duration {original}: out of range")
        fraction, scale, has_fraction = 0, 1.0, False
        if index < len(rest) and rest[index] == ".":
            fraction, scale, end = _leading_fraction(rest, index + 1)
            has_fraction = end != index + 1
            index = end
        if not whole_digits and not has_fraction:
            raise ValueError(f"invalid duration {original}: no digits before the unit")

        unit_start = index
        while index < len(rest) and not (rest[index] == "." or _is_digit(rest[index])):
            index += 1
        unit_text = rest[unit_start:index]
        if not unit_text:
            raise ValueError(f"missing unit in duration {original} (units: {_UNIT_NAMES})")
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise ValueError(
                f"unknown unit {_quote(unit_text)} in duration {original} (units: {_UNIT_NAMES})"
            )

        if whole > _LIMIT // unit:
            raise ValueError(f"invalid duration {original}: out of range")
        value = whole * unit
        if fraction > 0:
            # Same float64 arithmetic as Go, so fractions round identically.
            value += int(float(fraction) * (float(unit) / scale))
            if value > _LIMIT:
                raise ValueError(f"invalid duration {original}: out of range")
        total += value
        if total > _LIMIT:
            raise ValueError(f"invalid duration {original}: out of range")

    if negative:
        return -total
    if total > _MAX_NS:
        raise ValueError(f"invalid duration {original}: out of range")
    return total


def parse_duration(text: str) -> float:
    """Parse a Go duration string into seconds; see `parse_duration_ns`."""
    return parse_duration_ns(text) / _SECOND


def _format_fraction(value: int, precision: int) -> tuple[str, int]:
    """`value / 10**precision` split into `.digits` (trailing zeros dropped) and the rest."""
    divisor = 10**precision
    digits = f"{value % divisor:0{precision}d}".rstrip("0")
    return ("." + digits if digits else ""), value // divisor


def format_duration_ns(nanoseconds: int) -> str:
    """Print integer nanoseconds like Go's `Duration.String()` (`1h0m0s`, `1.5s`, `0s`)."""
    if not _MIN_NS <= nanoseconds <= _MAX_NS:
        raise ValueError(f"duration {nanoseconds}ns is out of range for a Go duration")
    sign = "-" if nanoseconds < 0 else ""
    size = abs(nanoseconds)
    if size == 0:
        return "0s"
    if size < _SECOND:
        # Below one second Go switches to the largest unit that keeps an integer part.
        if size < _MICROSECOND:
            return f"{sign}{size}ns"
        if size < _MILLISECOND:
            fraction, whole = _format_fraction(size, 3)
            return f"{sign}{whole}{fraction}\u00b5s"
        fraction, whole = _format_fraction(size, 6)
        return f"{sign}{whole}{fraction}ms"
    fraction, whole = _format_fraction(size, 9)
    text = f"{whole % 60}{fraction}s"
    minutes = whole // 60
    if minutes > 0:
        text = f"{minutes % 60}m{text}"
        hours = minutes // 60
        if hours > 0:
            # Go stops at hours: days can have different lengths.
            text = f"{hours}h{text}"
    return sign + text


def format_duration(seconds: float) -> str:
    """Print seconds like Go's `Duration.String()`, rounded to the nanosecond."""
    if isinstance(seconds, bool):
        raise TypeError("format_duration() takes seconds as a number, not a bool")
    if isinstance(seconds, int):
        return format_duration_ns(seconds * _SECOND)
    if not math.isfinite(seconds):
        raise ValueError(f"duration {seconds!r} is not a finite number of seconds")
    return format_duration_ns(round(seconds * _SECOND))
