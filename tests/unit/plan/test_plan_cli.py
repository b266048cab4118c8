"""`ansible-operator plan`'s exit codes for what never reaches a cluster: 2 means "the
reconcile would change something", so usage errors and bad input exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli.main import main


@pytest.mark.parametrize(
    "argv",
    [
        ["plan", "--no-such-flag", "cr.yaml"],
        ["plan", "-o", "xml", "cr.yaml"],
        ["plan", "--ansible-backend", "slow", "cr.yaml"],
        ["plan", "cr.yaml", "extra.yaml"],
    ],
)
def test_usage_errors_exit_1_not_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    assert "error:" in capsys.readouterr().err


def test_other_commands_keep_argparses_2() -> None:
    with pytest.raises(SystemExit) as done:
        main(["history", "--no-such-flag"])
    assert done.value.code == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan"], "give a CR file or --cr KIND/NAME"),
        (["plan", "cr.yaml", "--cr", "memcached/x"], "give a CR file or --cr KIND/NAME"),
        (["plan", "missing.yaml"], "missing.yaml: cannot read the CR file"),
        (["plan", "--cr", "memcached/x", "--patch", "none.yaml"], "none.yaml: cannot read"),
    ],
)
def test_bad_input_exits_1_naming_it(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "watches.yaml").write_text(
        "- {version: v1alpha1, group: cache.example.com, kind: Memcached, role: memcached}\n"
    )
    (tmp_path / "roles" / "memcached" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "memcached" / "tasks" / "main.yml").write_text("[]\n")
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_a_patch_file_that_is_no_patch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "watches.yaml").write_text(
        "- {version: v1alpha1, group: cache.example.com, kind: Memcached, role: memcached}\n"
    )
    (tmp_path / "roles" / "memcached" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "memcached" / "tasks" / "main.yml").write_text("[]\n")
    (tmp_path / "change.yaml").write_text("just a string\n")
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--cr", "memcached/x", "--patch", "change.yaml"]) == 1
    assert "change.yaml: a patch is a mapping" in capsys.readouterr().err
