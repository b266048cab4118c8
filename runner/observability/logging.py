"""Logging set-up from the zap-style flags the Go operator takes.

`--zap-encoder json` gives one JSON object per line (for log collectors): `ts`, `level`,
`logger`, `msg`, the record's own fields (a run's `job`, `gvk`, `cr_namespace`, ...)
and `error` with the traceback. The default is a readable console line (JSON too when
stderr is not a terminal and `--zap-devel` is off), its level coloured on a terminal
unless NO_COLOR or CI is set. `--zap-log-level` takes
debug/info/error or a number (zap's 1-9, higher is chattier).

Both formats pass every line through `runner.util.redact.redact_message`, a last line of
defence against a credential reaching the logs from a message nobody thought of (an API
error quoting a request, a role's failure message); a line longer than
`runner.util.redact.LOG_LIMIT` keeps its end.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from runner.util.redact import LOG_LIMIT, redact, redact_message

__all__ = ["ConsoleFormatter", "JSONFormatter", "configure", "level_from_flag", "use_colour"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "panic": logging.CRITICAL,
}

# Attributes every LogRecord has; anything else was passed as `extra=`.
_STANDARD_ATTRIBUTES = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()
) | {"message", "asctime", "taskName"}
_ENTRY_KEYS = ("ts", "level", "logger", "msg", "error")


def level_from_flag(text: str) -> int:
    lowered = text.strip().lower()
    if lowered in _LEVELS:
        return _LEVELS[lowered]
    try:
        verbosity = int(lowered)
    except ValueError:
        raise ValueError(f"--zap-log-level: invalid level {text!r}") from None
    if verbosity <= 0:  # as zap's flag: custom levels count up from 1
        raise ValueError(f"--zap-log-level: invalid level {text!r}")
    return logging.DEBUG


class JSONFormatter(logging.Formatter):
    """One JSON object per record, credentials masked."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact_message(record.getMessage(), LOG_LIMIT),
        }
        for key, value in vars(record).items():
            if key in _STANDARD_ATTRIBUTES or key in _ENTRY_KEYS or key.startswith("_"):
                continue
            entry[key] = redact(value)
        if record.exc_info:
            entry["error"] = redact_message(self.formatException(record.exc_info), LOG_LIMIT)
        elif record.exc_text:
            entry["error"] = redact_message(record.exc_text, LOG_LIMIT)
        return json.dumps(entry, default=str)


# SGR colours of the level on a terminal: debug dim, info green, warning yellow, error
# red, critical bold red; the logger's name dim.
_LEVEL_COLOURS = {
    logging.DEBUG: "2",
    logging.INFO: "32",
    logging.WARNING: "33",
    logging.ERROR: "31",
    logging.CRITICAL: "1;31",
}
_DIM, _RESET = "\x1b[2m", "\x1b[0m"


def use_colour(*, tty: bool, env: Mapping[str, str]) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org), in CI, or
    on a terminal that says it cannot (TERM=dumb)."""
    return tty and not env.get("NO_COLOR") and not env.get("CI") and env.get("TERM") != "dumb"


class ConsoleFormatter(logging.Formatter):
    """A readable line per record, credentials masked; with `colour`, the level and the
    logger's name are coloured (the message never is: it may be copied into a report)."""

    def __init__(self, *, colour: bool = False) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s  %(message)s")
        self.colour = colour

    def format(self, record: logging.LogRecord) -> str:
        shown = logging.makeLogRecord(vars(record))
        level = f"{record.levelname:<7}"
        if self.colour:
            code = _LEVEL_COLOURS.get(record.levelno, "0")
            shown.levelname = f"\x1b[{code}m{level}{_RESET}"
            shown.name = f"{_DIM}{record.name}{_RESET}"
        else:
            shown.levelname = level
        return redact_message(super().format(shown), LOG_LIMIT)


def configure(*, level: str, encoder: str, devel: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if encoder == "json" or (not encoder and not devel and not sys.stderr.isatty()):
        handler.setFormatter(JSONFormatter())
    else:
        colour = use_colour(tty=sys.stderr.isatty(), env=os.environ)
        handler.setFormatter(ConsoleFormatter(colour=colour))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if devel and level == "info" else level_from_flag(level))
    # The API clients are chatty at debug level and may print headers; ansible-runner's
    # event plugins (ansible-runner-http, when installed) log a line per job event.
    for noisy in ("kubernetes_asyncio", "aiohttp", "urllib3", "kubernetes", "ansible-runner"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
