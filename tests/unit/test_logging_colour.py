"""Coloured console logs: only on a terminal, never with NO_COLOR, in CI or TERM=dumb."""

from __future__ import annotations

import logging
import re

import pytest

from runner.observability.logging import ConsoleFormatter, use_colour

_SGR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize(
    ("tty", "env", "expected"),
    [
        (True, {"TERM": "xterm-256color"}, True),
        (False, {"TERM": "xterm-256color"}, False),
        (True, {"TERM": "xterm", "NO_COLOR": "1"}, False),
        (True, {"TERM": "xterm", "NO_COLOR": ""}, True),  # no-color.org: empty does not count
        (True, {"TERM": "xterm", "CI": "true"}, False),
        (True, {"TERM": "dumb"}, False),
        (True, {}, True),
    ],
)
def test_use_colour(tty: bool, env: dict[str, str], expected: bool) -> None:
    assert use_colour(tty=tty, env=env) is expected


def _record(level: int, message: str) -> logging.LogRecord:
    return logging.LogRecord("runner.engine", level, __file__, 1, message, None, None)


@pytest.mark.parametrize(
    ("level", "code"),
    [
        (logging.DEBUG, "2"),
        (logging.INFO, "32"),
        (logging.WARNING, "33"),
        (logging.ERROR, "31"),
        (logging.CRITICAL, "1;31"),
    ],
)
def test_the_level_is_coloured(level: int, code: str) -> None:
    line = ConsoleFormatter(colour=True).format(_record(level, "reconciled"))
    name = logging.getLevelName(level)
    assert f"\x1b[{code}m{name:<7}\x1b[0m" in line
    assert "\x1b[2mrunner.engine\x1b[0m" in line
    assert line.endswith("  reconciled")  # the message itself is never coloured


def test_plain_and_coloured_lines_differ_only_by_colour_codes() -> None:
    record = _record(logging.WARNING, "token=abc123secretvalue in a message")
    plain = ConsoleFormatter().format(record)
    coloured = ConsoleFormatter(colour=True).format(record)
    assert _SGR.search(plain) is None
    assert _SGR.sub("", coloured) == plain
    assert " WARNING runner.engine  " in plain
