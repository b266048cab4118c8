"""The scaffolded Makefile's `make plan`, run by make against a stand-in ansible-operator
that records its arguments: a file or a kind/name, PLAN_ARGS, and its exit codes (2,
"changes", is a success to make; 1 is not)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runner.devtools.scaffold.generate import init_plan

MAKEFILE = init_plan(domain="example.com", project_name="web-operator").create["Makefile"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "Makefile").write_text(MAKEFILE)
    (tmp_path / "config" / "samples").mkdir(parents=True)
    (tmp_path / "config" / "samples" / "web.yaml").write_text("kind: Web\n")
    tool = tmp_path / "fake-ansible-operator"
    tool.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" > "$RECORD"\n'
        'echo "roles=$ANSIBLE_ROLES_PATH kubeconfig=$KUBECONFIG" >> "$RECORD"\n'
        'exit "${FAKE_EXIT:-0}"\n'
    )
    tool.chmod(0o755)
    return tmp_path


def make_plan(project: Path, *variables: str, exit_code: int = 0) -> tuple[int, list[str], str]:
    record = project / "argv"
    record.unlink(missing_ok=True)
    env = {
        **os.environ,
        "RECORD": str(record),
        "FAKE_EXIT": str(exit_code),
        "KUBECONFIG": "/kube/config",
    }
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "plan",
            f"ANSIBLE_OPERATOR={project / 'fake-ansible-operator'}",
            *variables,
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    argv = record.read_text().splitlines() if record.exists() else []
    return done.returncode, argv, done.stderr


def test_a_file_with_plan_args(project: Path) -> None:
    code, argv, _ = make_plan(
        project, "CR=config/samples/web.yaml", "PLAN_ARGS=--set spec.size=3 -o yaml"
    )
    assert code == 0
    assert argv == [
        "plan",
        "--watches-file",
        "./watches.yaml",
        "config/samples/web.yaml",
        "--set",
        "spec.size=3",
        "-o",
        "yaml",
        f"roles={project}/roles kubeconfig=/kube/config",
    ]


def test_a_kind_and_name_in_the_cluster(project: Path) -> None:
    code, argv, _ = make_plan(project, "CR=web/example")
    assert code == 0
    assert argv[:5] == ["plan", "--watches-file", "./watches.yaml", "--cr", "web/example"]


@pytest.mark.parametrize(("tool_exit", "make_fails"), [(0, False), (2, False), (1, True)])
def test_changes_are_a_success_failures_are_not(
    project: Path, tool_exit: int, make_fails: bool
) -> None:
    code, argv, _ = make_plan(project, "CR=web/example", exit_code=tool_exit)
    assert argv and (code != 0) == make_fails


def test_without_cr_it_says_how(project: Path) -> None:
    code, argv, stderr = make_plan(project)
    assert code != 0 and argv == []
    assert "usage: make plan CR=config/samples/<file>.yaml" in stderr
