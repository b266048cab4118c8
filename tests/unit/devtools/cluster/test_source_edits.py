"""Build-time source edits (on a copy of the module, via -modfile) and OLM's build
definitions."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runner.devtools.cluster import build
from runner.devtools.cluster.components import (
    Component,
    GoModule,
    SourceEdit,
    olm_operators,
    olm_v1_operators,
    tools,
)
from runner.devtools.cluster.gomoduledirs import tools_dir
from runner.errors import ClusterError


def test_an_edit_must_match_exactly_once() -> None:
    edit = SourceEdit("m", "f.go", old="a := 1", new="a := 2")
    assert build.edited_text("x\na := 1\n", edit, where="f.go") == "x\na := 2\n"
    for text in ("nothing here", "a := 1\na := 1"):
        with pytest.raises(ClusterError, match="expected exactly one 'a := 1'"):
            build.edited_text(text, edit, where="f.go")


def test_edited_components_get_their_own_cache_directory(tmp_path: Path) -> None:
    added = tmp_path / "added.go"
    added.write_text("package x\n")
    module = GoModule(tmp_path, "example.com/x")
    plain = Component("x", module, "example.com/x")
    edited = Component("x", module, "example.com/x", edits=(SourceEdit("m", "a.go", source=added),))
    (tmp_path / "go.mod").write_text("module w\n\nrequire example.com/x v1.2.3\n")
    first = build.binary_path(edited, tmp_path)
    assert build.binary_path(plain, tmp_path).parent.name == "x-v1.2.3"
    assert first.parent.name.startswith("x-v1.2.3+")
    added.write_text("package x\n\n// changed\n")
    assert build.binary_path(edited, tmp_path) != first


def test_olm_operators_are_pinned_and_edited() -> None:
    found = olm_operators()
    assert list(found) == ["olm", "catalog"]
    for component in found.values():
        assert component.version == "v0.46.0"
        assert component.package.endswith(f"/cmd/{component.name}")
        assert "pkg/version.OLMVersion=v0.46.0" in " ".join(component.ldflags)
        sources = [e.source for e in component.edits if e.source is not None]
        assert sources and all(s.is_file() for s in sources)
        assert any("listenAddress(" in e.new for e in component.edits)
    assert not set(found) & set(tools())


def test_opm_serve_listens_where_told() -> None:
    edits = tools()["opm"].edits
    assert any("serveHost()" in e.new for e in edits)
    assert all(e.source is None or e.source.is_file() for e in edits)


def test_existing_replaces_of_edited_modules_are_dropped() -> None:
    go_mod = (
        "module w\n\nrequire a.io/x v1.0.0\n\nreplace a.io/x => ../x\n\n"
        "replace (\n\ta.io/x v1.0.0 => a.io/x v1.0.1\n\tb.io/y => b.io/y v2.0.0\n)\n"
    )
    result = build.without_replaces(go_mod, {"a.io/x"})
    assert "a.io/x =>" not in result and "a.io/x v1.0.0 =>" not in result
    assert "require a.io/x v1.0.0" in result and "b.io/y => b.io/y v2.0.0" in result


@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go")
def test_a_build_with_edits_changes_a_copy_only(tmp_path: Path) -> None:
    dep = tmp_path / "dep"
    dep.mkdir()
    (dep / "go.mod").write_text("module example.com/dep\n\ngo 1.22\n")
    (dep / "dep.go").write_text('package dep\n\nfunc Word() string { return "before" }\n')
    wrapper = tmp_path / "wrapper"
    wrapper.mkdir()
    (wrapper / "go.mod").write_text(
        "module example.com/wrapper\n\ngo 1.22\n\nrequire example.com/dep v0.0.0\n\n"
        "replace example.com/dep => ../dep\n"
    )
    (wrapper / "main.go").write_text(
        'package main\n\nimport (\n\t"fmt"\n\n\t"example.com/dep"\n)\n\n'
        "func main() { fmt.Println(dep.Word(), dep.Extra()) }\n"
    )
    added = tmp_path / "extra.go"
    added.write_text('package dep\n\nfunc Extra() string { return "added" }\n')
    edits = (
        SourceEdit("example.com/dep", "dep.go", old='"before"', new='"after"'),
        SourceEdit("example.com/dep", "zz_extra.go", source=added),
    )
    component = Component(
        "wrapper", GoModule(wrapper, "example.com/dep"), "example.com/wrapper", edits=edits
    )
    built = build.ensure_built([component], root=tmp_path / "cache", progress=lambda _m: None)
    assert built["wrapper"].parent.name.startswith("wrapper-v0.0.0+")
    output = subprocess.run([str(built["wrapper"])], capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "after added"
    assert "before" in (dep / "dep.go").read_text()  # the source itself is untouched
    assert not (dep / "zz_extra.go").exists()


def test_olm_v1_is_pinned_edited_and_keyed_by_the_boxcutter_stand_in() -> None:
    found = olm_v1_operators()
    assert list(found) == ["operator-controller", "catalogd"]
    for component in found.values():
        assert component.version == "v1.11.0"
        assert component.package.endswith(f"/cmd/{component.name}")
        assert "containers_image_openpgp" in component.tags
        assert all(e.source is None or e.source.is_file() for e in component.edits)
        assert any("serviceAccountTokenFile()" in e.new for e in component.edits)
        assert any("webhookHost()" in e.new for e in component.edits)
        assert {p.name for p in component.inputs} >= {"go.mod", "managedcache.go"}
    go_mod = (tools_dir() / "olm-v1" / "go.mod").read_text()
    assert "replace pkg.package-operator.run/boxcutter => ./boxcutter-stub" in go_mod


def test_a_changed_build_input_moves_the_cache_directory(tmp_path: Path) -> None:
    stub = tmp_path / "stub.go"
    stub.write_text("package stub\n")
    (tmp_path / "go.mod").write_text("module w\n\nrequire example.com/x v1.2.3\n")
    module = GoModule(tmp_path, "example.com/x")
    component = Component("x", module, "example.com/x", inputs=(stub,))
    first = build.binary_path(component, tmp_path)
    assert first.parent.name.startswith("x-v1.2.3+")
    stub.write_text("package stub\n\n// changed\n")
    assert build.binary_path(component, tmp_path) != first
