"""The Go wrapper modules are package data: found through importlib.resources, every file
a build reads lies inside them, and a copy out of a zip archive keys the binary cache
exactly as the package's own directory does."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import runner
from runner.devtools.cluster import build
from runner.devtools.cluster import components as c
from runner.devtools.cluster.gomoduledirs import (
    cluster_dir,
    content_digest,
    materialize,
    module_root,
    tools_dir,
)

PACKAGE = Path(runner.__file__).resolve().parent


def every_component(root: Path | None = None) -> Iterator[c.Component]:
    cluster = root / "cluster" if root else None
    tools = root / "tools" if root else None
    yield from c.components(cluster).values()
    yield c.registry(cluster)
    yield c.kubelet(cluster)
    yield from c.tools(tools).values()
    yield c.go_ansible_operator(tools)
    yield from c.olm_operators(tools).values()
    yield from c.olm_utilities(tools).values()
    yield from c.olm_v1_operators(tools).values()


def looked_up(component: c.Component) -> list[Path]:
    """The files of ours a build of `component` reads."""
    module = component.module.directory
    sources = [edit.source for edit in component.edits if edit.source is not None]
    return [module / "go.mod", module / "go.sum", *sources, *component.inputs]


def test_the_modules_are_package_data() -> None:
    root = module_root()
    assert root == PACKAGE / "devtools" / "gomodules"
    assert cluster_dir() == root / "cluster" and tools_dir() == root / "tools"


def test_every_file_a_build_reads_is_inside_the_package() -> None:
    root = module_root()
    for component in every_component():
        for path in looked_up(component):
            assert path.is_file(), path
            assert path.resolve().is_relative_to(root), path
    stub = tools_dir() / "olm-v1" / "boxcutter-stub"
    assert set(c.olm_v1_operators()["catalogd"].inputs) == {
        p for p in stub.rglob("*") if p.is_file()
    }


@pytest.fixture
def zipped(tmp_path: Path) -> zipfile.Path:
    """The modules inside a zip archive, as a package imported from one would see them."""
    archive = tmp_path / "runner.zip"
    root = module_root()
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                out.write(path, "runner/devtools/gomodules/" + path.relative_to(root).as_posix())
    return zipfile.Path(archive, "runner/devtools/gomodules/")


def test_a_copy_out_of_a_zip_keys_the_cache_the_same(zipped: zipfile.Path, tmp_path: Path) -> None:
    copy = materialize(zipped, tmp_path / "cache")
    assert copy == tmp_path / "cache" / "gomodules" / content_digest(zipped)
    assert content_digest(copy) == content_digest(module_root())
    cache = Path("/cache")
    here = [build.binary_path(x, cache) for x in every_component()]
    there = [build.binary_path(x, cache) for x in every_component(copy)]
    assert there == here
    for component in every_component(copy):
        for path in looked_up(component):
            assert path.is_file(), path
    # Once copied, the copy is reused as it is.
    marker = copy / "cluster" / "etcd" / "go.mod"
    marker.write_text(marker.read_text() + "// touched\n")
    assert materialize(zipped, tmp_path / "cache") == copy
    assert marker.read_text().endswith("// touched\n")


def test_the_digest_covers_names_and_contents(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "go.mod").write_text("module a\n")
    first = content_digest(tmp_path)
    (tmp_path / "a" / "go.mod").write_text("module b\n")
    second = content_digest(tmp_path)
    (tmp_path / "a" / "go.mod").rename(tmp_path / "a" / "go.sum")
    assert len({first, second, content_digest(tmp_path)}) == 3
