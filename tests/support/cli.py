"""`ansible-operator` run as the tests' own interpreter's `python -m runner.cli`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_cli(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Run `ansible-operator args` in `cwd`; its stdout (fails the test on an error)."""
    done = subprocess.run(
        [sys.executable, "-m", "runner.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{list(args)}: {done.stdout}\n{done.stderr}"
    return done.stdout
