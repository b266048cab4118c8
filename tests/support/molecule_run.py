"""`molecule test` of a project's scenario on the tests' cluster, its wall time printed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
TAIL_LINES = 120


def molecule_test(
    project: Path, scenario: str, *, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fail with the end of Molecule's output unless the scenario passes."""
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        # molecule runs ansible-playbook, and the scenarios ansible-operator, from PATH.
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "NO_COLOR": "1",
        "ANSIBLE_NOCOLOR": "1",
    }
    env.pop("WATCH_NAMESPACE", None)
    started = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "molecule"), "test", "--scenario-name", scenario],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1700,
        check=False,
    )
    elapsed = time.monotonic() - started
    with capsys.disabled():
        print(
            f"\nmolecule test -s {scenario} ({project.name}): {elapsed:.0f} s wall time "
            f"(exit {proc.returncode})"
        )
    tail = "\n".join(proc.stdout.splitlines()[-TAIL_LINES:])
    assert proc.returncode == 0, f"molecule test -s {scenario} failed; its output ends:\n{tail}"
