"""Progress of long steps (Go builds, image builds, waits) that a person can read.

On a terminal a status line redraws in place about once a second: a bar when the step
knows how far it is (packages built of total), else the elapsed time. Elsewhere (a pipe,
a log file, CI) the same status is printed as a plain line at most every 30 s, so a log
shows the step is alive without filling up. The pure parts (`bar`, `status_line`,
`LineLimiter`) are what the tests check; `Ticker` is the thread that prints them.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TextIO

__all__ = [
    "LINE_INTERVAL",
    "LineLimiter",
    "Ticker",
    "bar",
    "format_elapsed",
    "interactive",
    "status_line",
]

LINE_INTERVAL = 30.0
"""Seconds between two plain progress lines when the output is not a terminal."""
REDRAW_INTERVAL = 1.0
"""Seconds between two redraws of the status line on a terminal."""

Counts = Callable[[], tuple[int, int]]
"""Returns (done, total) of a step; total 0 when unknown."""


def format_elapsed(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `1 h 02 min`."""
    whole = int(max(seconds, 0))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def bar(done: int, total: int, *, width: int = 24) -> str:
    """`[#########...............]` filled in proportion to done/total (clamped)."""
    if total <= 0:
        return "[" + "." * width + "]"
    filled = round(width * min(max(done, 0), total) / total)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def status_line(
    label: str, elapsed: float, done: int = 0, total: int = 0, *, unit: str = "packages"
) -> str:
    """One line of progress: `label [###...] 412/1250 packages, 3 min 10 s`, or without a
    known total `label: 3 min 10 s` (`, 412 packages` when some were counted)."""
    took = format_elapsed(elapsed)
    if total > 0:
        return f"{label} {bar(done, total)} {min(done, total)}/{total} {unit}, {took}"
    if done > 0:
        return f"{label}: {done} {unit}, {took}"
    return f"{label}: {took}"


@dataclass
class LineLimiter:
    """Lets a plain progress line through at most once per `interval` seconds; the first
    one only after a full interval (a step that ends sooner prints no progress lines)."""

    interval: float = LINE_INTERVAL
    last: float | None = None

    def start(self, now: float) -> None:
        self.last = now

    def due(self, now: float) -> bool:
        if self.last is None:
            self.last = now
            return False
        if now - self.last >= self.interval:
            self.last = now
            return True
        return False


def interactive(stream: TextIO) -> bool:
    """Redraw in place only on a terminal, and never in CI (whose logs show every \\r)."""
    if os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Ticker:
    """Shows the progress of one step while it runs (a background thread).

    `with Ticker("building kubernetes", counts=lambda: (done, total)):` redraws on a
    terminal, prints a line every 30 s elsewhere, and clears its line at the end (the
    caller prints the step's outcome).
    """

    def __init__(
        self,
        label: str,
        *,
        counts: Counts | None = None,
        unit: str = "packages",
        stream: TextIO | None = None,
        line_interval: float = LINE_INTERVAL,
        plain: bool = False,
    ) -> None:
        self.label = label
        self.counts = counts
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        # plain: lines only, for steps whose own output scrolls the terminal.
        self.tty = interactive(self.stream) and not plain
        self.limiter = LineLimiter(line_interval)
        self.started = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def line(self) -> str:
        done, total = self.counts() if self.counts else (0, 0)
        return status_line(self.label, time.monotonic() - self.started, done, total, unit=self.unit)

    def _run(self) -> None:
        while not self._stop.wait(REDRAW_INTERVAL if self.tty else 1.0):
            if self.tty:
                self._write("\r\x1b[K" + self.line())
            elif self.limiter.due(time.monotonic()):
                self._write(self.line() + "\n")

    def _write(self, text: str) -> None:
        with self._lock:
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError):  # closed or broken output: progress is optional
                self._stop.set()

    def wrap(self, progress: Callable[[str], None]) -> Callable[[str], None]:
        """`progress` for the step's own messages: on a terminal the status line is
        cleared first, so a message never lands after it (it redraws a second later)."""
        if not self.tty:
            return progress

        def cleared(message: str) -> None:
            self._write("\r\x1b[K")
            progress(message)

        return cleared

    def __enter__(self) -> Ticker:
        self.started = time.monotonic()
        self.limiter.start(self.started)
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.tty:
            self._write("\r\x1b[K")

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started
