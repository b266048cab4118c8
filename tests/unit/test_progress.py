"""Progress lines of long steps: the bar, the status line, the rate of plain lines."""

from __future__ import annotations

import io

import pytest

from runner.util.progress import LineLimiter, Ticker, bar, format_elapsed, interactive, status_line


@pytest.mark.parametrize(
    ("done", "total", "expected"),
    [
        (0, 10, "[..........]"),
        (5, 10, "[#####.....]"),
        (10, 10, "[##########]"),
        (15, 10, "[##########]"),  # more built than counted: full, never longer
        (-1, 10, "[..........]"),
        (3, 0, "[..........]"),  # unknown total: empty
        (1, 3, "[###.......]"),
    ],
)
def test_bar(done: int, total: int, expected: str) -> None:
    assert bar(done, total, width=10) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(0, "0 s"), (59.9, "59 s"), (60, "1 min 00 s"), (190, "3 min 10 s"), (3720, "1 h 02 min")],
)
def test_format_elapsed(seconds: float, expected: str) -> None:
    assert format_elapsed(seconds) == expected


def test_status_line_with_and_without_a_total() -> None:
    assert status_line("building kwok", 190, 412, 1250) == (
        "building kwok [########................] 412/1250 packages, 3 min 10 s"
    )
    assert status_line("building kwok", 190, 1300, 1250).count("1250/1250") == 1
    assert status_line("building kwok", 5, 7) == "building kwok: 7 packages, 5 s"
    assert status_line("waiting for the CSV", 42) == "waiting for the CSV: 42 s"


def test_line_limiter_lets_one_line_through_per_interval() -> None:
    limiter = LineLimiter(30)
    limiter.start(100.0)
    seen = [now for now in range(100, 200) if limiter.due(float(now))]
    assert seen == [130, 160, 190]


def test_line_limiter_without_start_waits_a_full_interval() -> None:
    limiter = LineLimiter(30)
    assert not limiter.due(0.0)
    assert not limiter.due(29.0)
    assert limiter.due(30.0)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_interactive_only_on_a_terminal_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert interactive(_Tty())
    assert not interactive(io.StringIO())
    monkeypatch.setenv("CI", "true")
    assert not interactive(_Tty())


def test_a_short_step_prints_nothing_off_a_terminal() -> None:
    out = io.StringIO()
    with Ticker("building x", counts=lambda: (1, 2), stream=out):
        pass
    assert out.getvalue() == ""


def test_the_ticker_line_uses_the_counts() -> None:
    ticker = Ticker("building x", counts=lambda: (1, 2), stream=io.StringIO())
    with ticker:
        assert ticker.line().startswith("building x [############............] 1/2 packages, ")


def test_wrap_clears_the_status_line_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    out, said = _Tty(), []
    ticker = Ticker("waiting", stream=out)
    ticker.wrap(said.append)("CSV x: Pending")
    assert said == ["CSV x: Pending"] and out.getvalue() == "\r\x1b[K"
    plain = Ticker("waiting", stream=io.StringIO())
    assert plain.wrap(print) is print
