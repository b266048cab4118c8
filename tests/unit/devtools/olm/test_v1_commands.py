"""`olm ... --v1` beside OLM v0's commands: which need --namespace, and what the v1
commands say before any cluster exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.cli.main import main


@pytest.mark.parametrize("action", ["cleanup", "bundle-upgrade x", "approve", "kubeconfig"])
def test_olm_v0_commands_still_need_a_namespace(
    action: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["olm", "--state-dir", str(tmp_path), *action.split()]) == 1
    assert "--namespace is required" in capsys.readouterr().err


def test_olm_v1_commands_need_a_running_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["olm", "--state-dir", str(tmp_path), "run-bundle", "--v1", "r/b:v1", "-n", "demo"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "no running cluster" in err and "olm install --v1" in err


def test_olm_v1_cleanup_names_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["olm", "--state-dir", str(tmp_path), "cleanup", "--v1"]) == 1
    assert "no `olm run-bundle --v1`" in capsys.readouterr().err
