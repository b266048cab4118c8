"""runner.ansible.disk: the global artifacts cap, removal of data directories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.ansible.artifacts import link_latest
from runner.ansible.disk import (
    ArtifactBudget,
    ArtifactDir,
    dir_usage,
    over_budget,
    remove_data_dir,
    scan,
)
from runner.structs.gvk import GVK

MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
CLUSTERED = GVK("cache.example.com", "v1alpha1", "Pool")
SECRET = GVK("", "v1", "Secret")
NOW = 1_800_000_000.0


def entry(
    name: str, size: int, mtime: float, *, latest: bool = False, finished: bool = True
) -> ArtifactDir:
    return ArtifactDir(path=Path(name), size=size, mtime=mtime, is_latest=latest, finished=finished)


@pytest.mark.parametrize(
    ("listing", "limit", "busy", "expected"),
    [
        pytest.param([entry("a", 10, 1), entry("b", 10, 2)], 0, (), [], id="zero-no-cap"),
        pytest.param([entry("a", 10, 1), entry("b", 10, 2)], -5, (), [], id="negative-no-cap"),
        pytest.param([entry("a", 10, 1), entry("b", 10, 2)], 20, (), [], id="fits-exactly"),
        pytest.param(
            [entry("new", 10, 3), entry("old", 10, 1), entry("mid", 10, 2)],
            15,
            (),
            ["old", "mid"],
            id="oldest-first-until-it-fits",
        ),
        pytest.param(
            [entry("old", 10, 1, latest=True), entry("mid", 10, 2), entry("new", 10, 3)],
            25,
            (),
            ["mid"],
            id="latest-target-kept",
        ),
        pytest.param(
            [entry("old", 10, 1), entry("mid", 10, 2), entry("new", 10, 3)],
            25,
            (Path("old"),),
            ["mid"],
            id="run-in-progress-kept",
        ),
        pytest.param(
            [entry("a", 50, 1, latest=True), entry("b", 50, 2, latest=True), entry("c", 1, 3)],
            10,
            (),
            ["c"],
            id="only-latest-left-over-limit",
        ),
        pytest.param(
            [entry("fresh", 10, NOW - 60, finished=False), entry("done", 10, NOW - 30)],
            5,
            (),
            ["done"],
            id="fresh-unfinished-kept",
        ),
        pytest.param(
            [entry("stuck", 10, NOW - 7200, finished=False), entry("done", 10, NOW - 30)],
            15,
            (),
            ["stuck"],
            id="old-unfinished-removed",
        ),
    ],
)
def test_over_budget(
    listing: list[ArtifactDir], limit: int, busy: tuple[Path, ...], expected: list[str]
) -> None:
    chosen = over_budget(listing, limit=limit, busy=busy, now=NOW)
    assert chosen == [Path(name) for name in expected]


# -- IO -------------------------------------------------------------------------------


def make_data_dir(base: Path, relative: str) -> Path:
    path = base / relative
    (path / "artifacts").mkdir(parents=True)
    (path / "env").mkdir()
    (path / "env/extravars").write_text("{}")
    return path


def make_run(
    data_dir: Path, ident: str, *, started: float, size: int = 1000, finished: bool = True
) -> Path:
    run = data_dir / "artifacts" / ident
    (run / "job_events").mkdir(parents=True)
    (run / "command").write_text("{}")
    (run / "stdout").write_bytes(b"x" * size)
    if finished:
        (run / "status").write_text("successful")
    os.utime(run / "command", (started, started))
    return run


@pytest.fixture
def base(tmp_path: Path) -> Path:
    path = tmp_path / "runner"
    path.mkdir()
    return path


def test_scan_lists_runs_with_latest_and_reuses_finished_sizes(base: Path) -> None:
    one = make_data_dir(base, "cache.example.com/v1alpha1/Memcached/ns/one")
    two = make_data_dir(base, "v1/Secret/ns/two")
    make_run(one, "11", started=1000)
    make_run(one, "12", started=2000)
    make_run(two, "21", started=1500, finished=False)
    link_latest(one, "12")
    (one / "artifacts/.hidden").mkdir()

    first = scan(base)
    listing = {entry.path.name: entry for entry in first}

    assert sorted(listing) == ["11", "12", "21"]
    assert listing["12"].is_latest and not listing["11"].is_latest
    assert listing["11"].mtime == 1000
    assert not listing["21"].finished
    assert listing["11"].size == dir_usage(one / "artifacts/11") >= 1000

    for ident in ("11", "21"):  # never happens to a finished run
        (base / listing[ident].path / "stdout").write_bytes(b"x" * 100_000)
    link_latest(one, "11")
    again = {e.path.name: e for e in scan(base, known={e.path: e for e in first})}
    assert again["11"].size == listing["11"].size  # finished: not measured again
    assert again["21"].size > listing["21"].size  # unfinished: measured again
    assert again["11"].is_latest and not again["12"].is_latest


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_budget_updates_incrementally_and_rescans_when_due(base: Path) -> None:
    one = make_data_dir(base, "g.io/v1/K/ns/one")
    two = make_data_dir(base, "g.io/v1/K/ns/two")
    make_run(one, "1", started=NOW - 300)
    make_run(two, "2", started=NOW - 200)
    link_latest(one, "1")
    link_latest(two, "2")
    size = dir_usage(one / "artifacts/1")
    clock = Clock()
    budget = ArtifactBudget(base, limit=int(size * 2.5), rescan_interval=60, clock=clock)

    assert budget.enforce() == []  # the first pass scans everything
    assert len(budget.listing()) == 2

    make_run(one, "3", started=NOW - 100)
    link_latest(one, "3")
    removed = budget.enforce(changed=[one])
    assert removed == [one / "artifacts/1"]  # the oldest that is nobody's latest
    assert not removed[0].exists()
    assert sorted(e.path.name for e in budget.listing()) == ["2", "3"]

    # Changes elsewhere are seen at the next full rescan only.
    three = make_data_dir(base, "g.io/v1/K/ns/three")
    make_run(three, "4", started=NOW - 50)
    link_latest(three, "4")
    budget.enforce(changed=[one])
    assert len(budget.listing()) == 2
    clock.now += 61
    budget.enforce()
    assert sorted(e.path.name for e in budget.listing()) == ["2", "3", "4"]

    budget.forget(three)
    assert sorted(e.path.name for e in budget.listing()) == ["2", "3"]


def test_budget_keeps_busy_runs_and_no_limit_does_nothing(base: Path) -> None:
    one = make_data_dir(base, "g.io/v1/K/ns/one")
    old = make_run(one, "1", started=NOW - 300)
    make_run(one, "2", started=NOW - 200)
    link_latest(one, "2")
    assert ArtifactBudget(base, limit=0).enforce() == []
    budget = ArtifactBudget(base, limit=1)
    assert budget.enforce(busy={old}) == []
    assert budget.enforce() == [old]


def test_scan_does_not_follow_links_out_of_the_base(base: Path, tmp_path: Path) -> None:
    outside = make_data_dir(tmp_path, "outside/v1/Secret/ns/x")
    make_run(outside, "1", started=1000)
    (base / "v1").mkdir()
    (base / "v1" / "Secret").symlink_to(tmp_path / "outside/v1/Secret")
    assert scan(base) == []
    assert ArtifactBudget(base, limit=1).enforce() == []
    assert (outside / "artifacts/1").exists()


@pytest.mark.parametrize(
    "relative",
    [
        pytest.param("..", id="parent"),
        pytest.param(".", id="base-itself"),
        pytest.param("../elsewhere", id="sibling"),
        pytest.param("v1/../../elsewhere", id="dotdot-inside"),
    ],
)
def test_remove_data_dir_refuses_paths_outside_the_base(
    base: Path, tmp_path: Path, relative: str
) -> None:
    (tmp_path / "elsewhere").mkdir()
    assert remove_data_dir(base, base / relative) is False
    assert base.exists() and (tmp_path / "elsewhere").exists()


def test_remove_data_dir(base: Path, tmp_path: Path) -> None:
    data_dir = make_data_dir(base, "v1/Secret/ns/s")
    make_run(data_dir, "1", started=1000)
    assert remove_data_dir(base, data_dir)
    assert not (base / "v1/Secret/ns").exists()
    assert (base / "v1/Secret").exists()
    assert remove_data_dir(base, data_dir)  # already gone
    target = make_data_dir(tmp_path, "target")
    (base / "v1/Secret/link").symlink_to(target)
    assert remove_data_dir(base, base / "v1/Secret/link") is False
    assert target.exists()
