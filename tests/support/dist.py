"""Building this project's wheel and sdist in tests: `python -m build` with the backend
the dev extra installs (no isolated environment: no download, about a second)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# What a build reads: the package, its metadata, and what hatchling leaves out.
BUILD_INPUTS = ("runner", "pyproject.toml", "README.md", ".gitignore")


def tracked(*paths: str) -> list[str]:
    """Files under `paths` that git tracks, or would (new and not ignored), sorted."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "--", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    return sorted(name for name in listed if name and (REPO / name).is_file())


def copy_tree(target: Path, mtime: int) -> Path:
    """The build's inputs copied to `target`, every file stamped `mtime`."""
    for name in tracked(*BUILD_INPUTS):
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes((REPO / name).read_bytes())
        os.utime(path, (mtime, mtime))
    return target


def python_build(
    source: Path, out: Path, *what: str, environ: Mapping[str, str] | None = None
) -> list[Path]:
    """`python -m build [what] --outdir out source`; the files it wrote, sorted."""
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", *what, "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        env={**os.environ, **(environ or {})},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return sorted(out.iterdir())
