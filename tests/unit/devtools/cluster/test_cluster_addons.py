"""Add-on processes of a cluster state directory (OLM's operators, opm): recorded with
pid files, replaced by name, listed by `status`, stopped by `down` (no cluster needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.devtools.cluster import processes as process
from runner.devtools.cluster.local import LocalCluster

SLEEP = shutil.which("sleep")
pytestmark = pytest.mark.skipif(SLEEP is None, reason="needs sleep")


def _sleeper() -> list[str]:
    assert SLEEP is not None
    return [SLEEP, "60"]


def test_addons_are_recorded_replaced_and_stopped(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "state", cache=tmp_path / "cache")
    (tmp_path / "state").mkdir()
    first = cluster.start_addon("one", _sleeper(), env={"PATH": "/usr/bin:/bin"})
    two = cluster.start_addon("two", _sleeper())
    assert list(cluster.addons()) == ["one", "two"]
    assert (tmp_path / "state" / "pids" / "one.pid").read_text().strip() == str(first.pid)
    assert process.is_running(first.pid, first.binary)

    again = cluster.start_addon("one", _sleeper())  # same name: the old one is stopped
    assert again.pid != first.pid
    assert not process.is_running(first.pid, first.binary)

    assert cluster.stop_addon("two")
    assert not cluster.stop_addon("two")
    assert not (tmp_path / "state" / "pids" / "two.pid").exists()
    assert not process.is_running(two.pid, two.binary)

    stopped = cluster.down(keep=True, progress=lambda _m: None)
    assert stopped == ["one"]
    assert cluster.addons() == {}
    assert not process.is_running(again.pid, again.binary)
