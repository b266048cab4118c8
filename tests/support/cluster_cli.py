"""`ansible-operator cluster` run as a user runs it, on a cluster of the test's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def cluster_cli(
    state_dir: Path, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`ansible-operator cluster --state-dir STATE_DIR ARGS...` in a child process; the
    caller checks returncode, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", "cluster", "--state-dir", str(state_dir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
