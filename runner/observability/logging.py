"""Logging set-up from the zap-style flags the Go operator takes.

`--zap-encoder json` gives one JSON object per line (for log collectors); the default
is a readable console line. `--zap-log-level` takes debug/info/error or a number
(zap's 1-9, higher is chattier).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "panic": logging.CRITICAL,
}


def level_from_flag(text: str) -> int:
    lowered = text.strip().lower()
    if lowered in _LEVELS:
        return _LEVELS[lowered]
    try:
        verbosity = int(lowered)
    except ValueError:
        raise ValueError(f"--zap-log-level: invalid level {text!r}") from None
    return logging.DEBUG if verbosity > 0 else logging.INFO


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure(*, level: str, encoder: str, devel: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if encoder == "json" or (not encoder and not devel and not sys.stderr.isatty()):
        handler.setFormatter(JSONFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s  %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if devel and level == "info" else level_from_flag(level))
    # The API clients are chatty at debug level and may print headers.
    for noisy in ("kubernetes_asyncio", "aiohttp", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
