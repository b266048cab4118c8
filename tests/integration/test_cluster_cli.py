"""`ansible-operator cluster` as a user drives it: up, idempotent up, status, kubeconfig,
env, down — and nothing it started is left running."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.cluster_cli import cluster_cli

from runner.devtools.cluster import processes as process
from runner.devtools.cluster.local import LocalCluster


def _cli(*args: str, state_dir: Path) -> subprocess.CompletedProcess[str]:
    return cluster_cli(state_dir, *args, timeout=240)


@pytest.fixture
def state_dir(tmp_path: Path) -> object:
    directory = tmp_path / "cluster"
    yield directory
    LocalCluster(directory).down()  # never leave processes behind, even on failure


def test_up_status_env_down(state_dir: Path) -> None:
    up = _cli("up", state_dir=state_dir)
    assert up.returncode == 0, up.stderr
    assert "cluster ready in" in up.stderr
    kubeconfig = Path(up.stdout.strip())
    assert kubeconfig == state_dir / "kubeconfig"

    again = _cli("up", state_dir=state_dir)
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stderr

    assert _cli("kubeconfig", state_dir=state_dir).stdout.strip() == str(kubeconfig)
    assert _cli("env", state_dir=state_dir).stdout.strip() == f"export KUBECONFIG={kubeconfig}"

    status = _cli("status", state_dir=state_dir)
    assert status.returncode == 0, status.stdout
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        assert f"{name} " in status.stdout
    assert "NOT RUNNING" not in status.stdout
    assert ": ready;" in status.stdout

    recorded = json.loads((state_dir / "state.json").read_text())["processes"]
    down = _cli("down", state_dir=state_dir)
    assert down.returncode == 0, down.stderr
    for name, proc in recorded.items():
        assert not process.is_running(proc["pid"], proc["binary"]), f"{name} still runs"
    assert not state_dir.exists()

    after = _cli("status", state_dir=state_dir)
    assert after.returncode == 3
    assert "no cluster" in after.stdout


def test_api_server_port_in_use_is_refused(state_dir: Path) -> None:
    import socket

    with socket.socket() as blocker:
        blocker.bind((process.LOOPBACK, 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        result = _cli("up", "--apiserver-port", str(port), state_dir=state_dir)
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert not (state_dir / "state.json").exists() or not any(
        process.is_running(p["pid"], p["binary"])
        for p in json.loads((state_dir / "state.json").read_text())["processes"].values()
    )


def test_kubeconfig_without_cluster_is_a_clear_error(tmp_path: Path) -> None:
    result = _cli("kubeconfig", state_dir=tmp_path / "none")
    assert result.returncode == 1
    assert "no cluster in" in result.stderr
    assert "ansible-operator cluster up" in result.stderr
    assert os.path.exists(tmp_path) and not (tmp_path / "none").exists()
