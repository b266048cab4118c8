"""The committed bundle/ and bundle.Dockerfile are exactly what `make bundle` writes now.

`make bundle` passes VERSION, CHANNELS=alpha and IMG=$(IMAGE_TAG_BASE):v$(VERSION), all
set in the Makefile; this test regenerates with the same values into a temp dir and
compares bytes, file by file, both ways.
"""

from __future__ import annotations

import re
from pathlib import Path

from support.bundles import REPO

from runner.devtools.packaging.bundle import render_bundle
from runner.devtools.packaging.csv import BundleOptions
from runner.devtools.packaging.projectconfig import load_project
from runner.devtools.packaging.write import write_files


def _make_variable(makefile: str, name: str) -> str:
    match = re.search(rf"^{name} \?= (\S+)$", makefile, re.MULTILINE)
    assert match, f"the Makefile no longer sets {name}"
    return match[1]


def _make_values() -> tuple[str, str]:
    makefile = (REPO / "Makefile").read_text()
    version = _make_variable(makefile, "VERSION")
    return version, f"{_make_variable(makefile, 'IMAGE_TAG_BASE')}:v{version}"


def _files(root: Path) -> dict[str, bytes]:
    found = {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in (root / "bundle").rglob("*")
        if p.is_file()
    }
    found["bundle.Dockerfile"] = (root / "bundle.Dockerfile").read_bytes()
    return found


def test_committed_bundle_is_fresh(tmp_path: Path) -> None:
    version, image = _make_values()
    inputs = load_project(REPO)
    options = BundleOptions(version=version, package=inputs.name, channels=("alpha",), image=image)
    write_files(tmp_path, render_bundle(inputs, options))
    expected, committed = _files(tmp_path), _files(REPO)
    stale = sorted(
        name
        for name in expected.keys() | committed.keys()
        if expected.get(name) != committed.get(name)
    )
    assert not stale, f"bundle/ is stale; run `make bundle` (differs: {', '.join(stale)})"
