"""A run stopped before ansible-playbook could record its end still has one."""

from __future__ import annotations

from pathlib import Path

from runner.ansible.artifacts import list_runs
from runner.ansible.runs import _record_stopped


def test_a_run_stopped_early_is_recorded_as_canceled(tmp_path: Path) -> None:
    run_dir = tmp_path / "artifacts" / "123"
    run_dir.mkdir(parents=True)
    _record_stopped(run_dir)
    (run,) = list_runs(tmp_path)
    assert (run.status, run.rc) == ("canceled", 254)


def test_a_recorded_end_is_kept(tmp_path: Path) -> None:
    run_dir = tmp_path / "artifacts" / "123"
    run_dir.mkdir(parents=True)
    (run_dir / "status").write_text("successful")
    (run_dir / "rc").write_text("0")
    _record_stopped(run_dir)
    (run,) = list_runs(tmp_path)
    assert (run.status, run.rc) == ("successful", 0)


def test_no_run_directory_no_record(tmp_path: Path) -> None:
    _record_stopped(tmp_path / "artifacts" / "missing")
    assert not (tmp_path / "artifacts").exists()
