"""runner.ansible.artifacts: rotation to maxRunnerArtifacts, `latest`, reading runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runner.ansible.artifacts import (
    find_data_dirs,
    latest_run,
    link_latest,
    list_runs,
    read_events,
    read_stdout,
    rotate,
)


def make_run(
    data_dir: Path, ident: str, *, started: float, status: str | None = "successful"
) -> Path:
    run = data_dir / "artifacts" / ident
    (run / "job_events").mkdir(parents=True)
    (run / "command").write_text("{}")
    if status is not None:
        (run / "status").write_text(status)
        (run / "rc").write_text("0" if status == "successful" else "2")
    (run / "stdout").write_text(f"output of {ident}\n")
    os.utime(run / "command", (started, started))
    # Directory mtimes change with their contents: the order must not depend on them.
    os.utime(run, (2_000_000_000 - started, 2_000_000_000 - started))
    return run


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "g" / "v1" / "Kind" / "ns" / "name"
    (path / "artifacts").mkdir(parents=True)
    return path


# Idents are random numbers: their order says nothing about the runs' order.
IDENTS = ["90", "7", "500", "12", "3"]


def make_runs(data_dir: Path) -> None:
    for index, ident in enumerate(IDENTS):
        make_run(data_dir, ident, started=1_700_000_000 + index)


def test_list_runs_newest_first(data_dir: Path) -> None:
    make_runs(data_dir)
    runs = list_runs(data_dir)
    assert [run.ident for run in runs] == list(reversed(IDENTS))
    assert runs[0].status == "successful"
    assert runs[0].rc == 0
    assert runs[0].started.timestamp() == 1_700_000_004


@pytest.mark.parametrize(
    ("keep", "remaining"),
    [
        pytest.param(2, ["3", "12"], id="keep-2"),
        pytest.param(1, ["3"], id="keep-1"),
        pytest.param(5, list(reversed(IDENTS)), id="exactly-enough"),
        pytest.param(20, list(reversed(IDENTS)), id="more-than-enough"),
        pytest.param(0, list(reversed(IDENTS)), id="zero-keeps-all"),
        pytest.param(-1, list(reversed(IDENTS)), id="negative-keeps-all"),
    ],
)
def test_rotate(data_dir: Path, keep: int, remaining: list[str]) -> None:
    make_runs(data_dir)
    link_latest(data_dir, "3")
    removed = rotate(data_dir, keep=keep)
    assert [run.ident for run in list_runs(data_dir)] == remaining
    assert len(removed) == len(IDENTS) - len(remaining)
    assert all(not path.exists() for path in removed)
    # `latest` is not a run and survives rotation.
    assert os.readlink(data_dir / "artifacts" / "latest") == "3"


def test_rotate_never_removes_latest_target(data_dir: Path) -> None:
    make_runs(data_dir)
    link_latest(data_dir, "90")  # the oldest, e.g. after a clock step
    rotate(data_dir, keep=1)
    assert sorted(run.ident for run in list_runs(data_dir)) == ["3", "90"]


def test_link_latest_replaces_link(data_dir: Path) -> None:
    make_runs(data_dir)
    link_latest(data_dir, "500")
    link_latest(data_dir, "3")
    latest = data_dir / "artifacts" / "latest"
    assert latest.is_symlink()
    assert os.readlink(latest) == "3"
    assert (latest / "stdout").read_text() == "output of 3\n"
    assert [p.name for p in (data_dir / "artifacts").iterdir() if p.name.startswith(".")] == []
    latest_info = latest_run(data_dir)
    assert latest_info is not None
    assert latest_info.ident == "3"


def test_latest_run_without_link_is_newest(data_dir: Path) -> None:
    assert latest_run(data_dir) is None
    make_runs(data_dir)
    run = latest_run(data_dir)
    assert run is not None
    assert run.ident == "3"


def test_unfinished_and_foreign_entries(data_dir: Path) -> None:
    make_run(data_dir, "1", started=1_700_000_000, status=None)
    (data_dir / "artifacts" / "stray-file").write_text("x")
    (data_dir / "artifacts" / "dangling").symlink_to("nowhere")
    runs = list_runs(data_dir)
    assert [run.ident for run in runs] == ["1"]
    assert runs[0].status is None
    assert runs[0].rc is None


def test_read_stdout_and_events(data_dir: Path) -> None:
    run_dir = make_run(data_dir, "42", started=1_700_000_000)
    events = run_dir / "job_events"
    for counter in (10, 2, 1):
        (events / f"{counter}-uuid{counter}.json").write_text(
            json.dumps({"counter": counter, "event": f"e{counter}"})
        )
    (events / "uuid9-partial.json").write_text("{}")
    (events / "3-broken.json").write_text("{not json")
    (run,) = list_runs(data_dir)
    assert read_stdout(run) == "output of 42\n"
    assert [event["counter"] for event in read_events(run)] == [1, 2, 10]
    (run_dir / "stdout").unlink()
    assert read_stdout(run) == ""


def test_find_data_dirs(tmp_path: Path) -> None:
    base = tmp_path / "runner"
    odd = ("g/v1/K/artifacts/env", "g/v1/K/env/extravars")
    for relative in ("g/v1/K/ns/a", "g/v1/K/ns/b", "v1/Secret/s", *odd):
        (base / relative / "artifacts").mkdir(parents=True)
        (base / relative / "env").mkdir()
        (base / relative / "env/extravars").write_text("{}")
    (base / "g/v1/K/ns/incomplete").mkdir(parents=True)
    (base / "g/v1/K/ns/no-inputs/artifacts").mkdir(parents=True)
    # Namespaces called `artifacts` and `env` do not make the kind a data directory.
    assert [p.relative_to(base).as_posix() for p in find_data_dirs(base)] == [
        "g/v1/K/artifacts/env",
        "g/v1/K/env/extravars",
        "g/v1/K/ns/a",
        "g/v1/K/ns/b",
        "v1/Secret/s",
    ]
    assert list(find_data_dirs(tmp_path / "missing")) == []
