"""runner.ansible.hooks.modexec: the checks that keep a forked module run equal to a new one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.ansible.hooks import inprocess, modexec


@pytest.fixture
def warm_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file the zygote is taken to have imported."""
    path = tmp_path / "module_utils.py"
    path.write_text("ANSWER = 1\n")
    info = path.stat()
    monkeypatch.setattr(modexec, "_warm_sources", [(str(path), info.st_mtime_ns, info.st_size)])
    monkeypatch.setattr(modexec, "_sources_checked", [float("-inf")])
    return path


def test_unchanged_sources(warm_file: Path) -> None:
    assert modexec.sources_unchanged()


def test_edited_source(warm_file: Path) -> None:
    warm_file.write_text("ANSWER = 22\n")
    assert not modexec.sources_unchanged()


def test_touched_source(warm_file: Path) -> None:
    info = warm_file.stat()
    os.utime(warm_file, ns=(info.st_atime_ns, info.st_mtime_ns + 1))
    assert not modexec.sources_unchanged()


def test_removed_source(warm_file: Path) -> None:
    warm_file.unlink()
    assert not modexec.sources_unchanged()


def test_a_check_holds_for_a_second(warm_file: Path) -> None:
    assert modexec.sources_unchanged()
    warm_file.write_text("ANSWER = 22\n")
    assert modexec.sources_unchanged()  # checked a moment ago
    modexec._sources_checked[0] -= 2
    assert not modexec.sources_unchanged()


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(None, 0, id="none"),
        pytest.param(0, 0, id="zero"),
        pytest.param(3, 3, id="int"),
        pytest.param("fatal", 1, id="message"),
    ],
)
def test_exit_codes_as_python_gives_them(
    code: object, expected: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inprocess.system_exit_code(SystemExit(code)) == expected
    if isinstance(code, str):
        assert capsys.readouterr().err == "fatal\n"
