"""The scaffolded Makefile finds `ansible-operator`: on PATH, else in bin/ (installed from
the checkout `init` ran from), else it says exactly how to get it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runner.cli.scaffoldcmd import tool_source
from runner.devtools.scaffold.files import toplevel as files_project

REPO = Path(__file__).resolve().parents[4]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def project(tmp_path: Path, source: str) -> Path:
    (tmp_path / "Makefile").write_text(
        files_project.makefile(
            project_name="web-operator", domain="example.com", tool_source=source
        )
    )
    return tmp_path


def make(directory: Path, *args: str, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=directory,
        env={"PATH": path, "HOME": str(directory)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_init_records_the_checkout_it_runs_from() -> None:
    assert tool_source() == str(REPO)
    text = files_project.makefile(project_name="p", domain="d", tool_source=str(REPO))
    assert f"ANSIBLE_OPERATOR_SOURCE ?= {REPO}\n" in text


def fake_tool(tmp_path: Path) -> Path:
    tools = tmp_path / "tools"
    tools.mkdir()
    fake = tools / "ansible-operator"
    fake.write_text('#!/bin/sh\necho fake "$@"\n')
    fake.chmod(0o755)
    return tools


def test_the_command_on_path_is_used(tmp_path: Path) -> None:
    tools = fake_tool(tmp_path)
    (tmp_path / "p").mkdir()
    directory = project(tmp_path / "p", "")
    done = make(directory, "ansible-operator", "cluster-up", path=f"{tools}:/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    assert "fake cluster up" in done.stdout
    assert not (directory / "bin").exists()


def test_without_the_command_or_a_checkout_it_says_how(tmp_path: Path) -> None:
    directory = project(tmp_path, "/nonexistent/checkout")
    done = make(directory, "install", path="/usr/bin:/bin")
    assert done.returncode != 0
    assert (
        "ansible-operator is not on PATH, and ANSIBLE_OPERATOR_SOURCE "
        "('/nonexistent/checkout') is no checkout of it. Put it on PATH (in a checkout: "
        "make install-tool), or install it into bin/ with: make ansible-operator "
        "ANSIBLE_OPERATOR_SOURCE=/path/to/checkout"
    ) in done.stderr
    assert not (directory / "bin").exists()


def test_cluster_up_uses_kubeconfig_when_set(tmp_path: Path) -> None:
    tools = fake_tool(tmp_path)
    (tmp_path / "p").mkdir()
    directory = project(tmp_path / "p", "")
    done = subprocess.run(
        ["make", "cluster-up"],
        cwd=directory,
        env={"PATH": f"{tools}:/usr/bin:/bin", "KUBECONFIG": "/some/kubeconfig"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "KUBECONFIG is set: using that cluster (/some/kubeconfig)" in done.stdout
    assert "fake" not in done.stdout
