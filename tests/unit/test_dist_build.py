"""The wheel `python -m build` (hatchling) makes holds every file of the package, the Go
wrapper modules the cluster is built from among them, byte for byte; its version is
pyproject.toml's. (That builds are reproducible, and that the installed wheel works
without a checkout: tests/e2e/test_wheel_install.py.)"""

from __future__ import annotations

import importlib.util
import tomllib
import zipfile
from pathlib import Path

import pytest
from support.dist import python_build, tracked

import runner
from runner.devtools.cluster.gomoduledirs import module_root

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("build") is None or importlib.util.find_spec("hatchling") is None,
    reason="needs the dev extra (build, hatchling)",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    (found,) = python_build(REPO, out, "--wheel")
    return found


def test_the_wheel_holds_every_file_of_the_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n for n in names if n.startswith("runner/")) == tracked("runner")
    assert all(n.startswith(("runner/", "ansible_operator-")) for n in names)


def test_the_wheel_holds_the_go_modules_byte_for_byte(wheel: Path) -> None:
    root = module_root()
    prefix = "runner/" + root.relative_to(Path(runner.__file__).parent).as_posix() + "/"
    archive = zipfile.ZipFile(wheel)
    packed = {n[len(prefix) :]: archive.read(n) for n in archive.namelist() if n.startswith(prefix)}
    on_disk = {
        p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()
    }
    assert packed == on_disk
    assert {"cluster/kubernetes/go.mod", "tools/olm/added/grpc_health_probe.go"} <= set(packed)


def test_the_version_is_written_once(wheel: Path) -> None:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert runner.__version__ == declared  # the installed (editable) metadata agrees
    assert wheel.name == f"ansible_operator-{declared}-py3-none-any.whl"
