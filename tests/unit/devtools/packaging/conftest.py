"""The guestbook fixture project and the bundle generated from it, in a temp dir so tests
may break them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.bundles import GUESTBOOK, options

from runner.devtools.packaging.bundle import render_bundle
from runner.devtools.packaging.projectconfig import ProjectInputs, load_project
from runner.devtools.packaging.write import write_files


@pytest.fixture
def guestbook(tmp_path: Path) -> Path:
    project = tmp_path / "guestbook-operator"
    shutil.copytree(GUESTBOOK, project)
    return project


@pytest.fixture
def inputs(guestbook: Path) -> ProjectInputs:
    return load_project(guestbook)


@pytest.fixture
def bundle_dir(guestbook: Path, inputs: ProjectInputs) -> Path:
    """The generated bundle, written into the project as `make bundle` would."""
    write_files(guestbook, render_bundle(inputs, options()), owned=["bundle"])
    return guestbook / "bundle"
