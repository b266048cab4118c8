"""The catalogs `olm run-bundle` and `olm bundle-upgrade` serve: image left empty, the
manifests embedded, upgrade edges; and the bundle check in front of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.bundles import GUESTBOOK, options

from runner.devtools.olm import serve
from runner.devtools.packaging.bundle import render_bundle
from runner.devtools.packaging.loader import load_bundle
from runner.devtools.packaging.projectconfig import load_project
from runner.devtools.packaging.write import write_files
from runner.errors import ConfigError

PACKAGE = "guestbook-operator"


def _bundle(root: Path, version: str, **overrides: str) -> Path:
    inputs = load_project(GUESTBOOK)
    write_files(root / version, render_bundle(inputs, options(version=version, **overrides)))
    return root / version / "bundle"


def test_two_versions_become_one_channel_with_an_upgrade_edge(tmp_path: Path) -> None:
    catalog_dir = tmp_path / "catalog"
    first = load_bundle(_bundle(tmp_path, "1.0.0"))
    documents = serve.write_catalog(catalog_dir, first, PACKAGE, channel="alpha")
    assert serve.bundle_names(documents) == [f"{PACKAGE}.v1.0.0"]
    second = load_bundle(_bundle(tmp_path, "1.1.0", replaces=f"{PACKAGE}.v1.0.0"))
    documents = serve.write_catalog(catalog_dir, second, PACKAGE, channel="alpha")
    assert serve.bundle_names(documents) == [f"{PACKAGE}.v1.0.0", f"{PACKAGE}.v1.1.0"]
    (channel,) = [d for d in documents if d["schema"] == "olm.channel"]
    assert channel["entries"][-1] == {"name": f"{PACKAGE}.v1.1.0", "replaces": f"{PACKAGE}.v1.0.0"}
    for bundle in (d for d in documents if d["schema"] == "olm.bundle"):
        assert bundle["image"] == ""  # OLM installs from the embedded objects
        assert any(p["type"] == "olm.bundle.object" for p in bundle["properties"])
    assert (catalog_dir / PACKAGE / "index.yaml").is_file()


def test_the_channel_given_is_the_catalog_channel(tmp_path: Path) -> None:
    bundle = load_bundle(_bundle(tmp_path, "1.0.0"))
    assert serve.default_channel(bundle) == "alpha"
    documents = serve.write_catalog(tmp_path / "catalog", bundle, PACKAGE, channel="fast")
    assert [d["name"] for d in documents if d["schema"] == "olm.channel"] == ["fast"]


def test_an_invalid_bundle_stops_unless_skipped(tmp_path: Path) -> None:
    directory = _bundle(tmp_path, "1.0.0")
    (directory / "manifests" / "web.example.com_guestbooks.yaml").unlink()
    with pytest.raises(ConfigError, match="--skip-validation"):
        serve.load_checked(directory, skip_validation=False)
    warnings: list[str] = []
    bundle, csv = serve.load_checked(directory, skip_validation=True, warn=warnings.append)
    assert csv["metadata"]["name"] == f"{PACKAGE}.v1.0.0"
    assert serve.package_of(bundle) == PACKAGE
    assert warnings and "handing it to OLM anyway" in warnings[0]


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a bundle directory"):
        serve.load_checked(tmp_path / "missing", skip_validation=False)
