"""File-based catalogs: the documents of one bundle, and upgrade edges when adding more."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.bundles import options

from runner.devtools.packaging import catalog
from runner.devtools.packaging.bundle import render_bundle
from runner.devtools.packaging.loader import LoadedBundle, load_bundle
from runner.devtools.packaging.projectconfig import ProjectInputs
from runner.devtools.packaging.write import write_files
from runner.errors import ConfigError
from runner.util import yamlwriter

PACKAGE = "guestbook-operator"


def _bundle(tmp_path: Path, inputs: ProjectInputs, version: str, **overrides: Any) -> LoadedBundle:
    root = tmp_path / f"v{version}"
    write_files(root, render_bundle(inputs, options(version=version, **overrides)))
    return load_bundle(root / "bundle")


def _schema(documents: list[dict[str, Any]], schema: str) -> list[dict[str, Any]]:
    return [d for d in documents if d["schema"] == schema]


def test_one_bundle(tmp_path: Path, inputs: ProjectInputs) -> None:
    documents = catalog.add_bundle(
        [], _bundle(tmp_path, inputs, "1.0.0"), catalog.CatalogOptions(PACKAGE)
    )
    assert [d["schema"] for d in documents] == ["olm.package", "olm.channel", "olm.bundle"]
    assert documents[0] == {"schema": "olm.package", "name": PACKAGE, "defaultChannel": "alpha"}
    assert documents[1] == {
        "schema": "olm.channel",
        "name": "alpha",
        "package": PACKAGE,
        "entries": [{"name": "guestbook-operator.v1.0.0"}],
    }
    bundle = documents[2]
    assert bundle["name"] == "guestbook-operator.v1.0.0"
    assert bundle["image"] == "example.com/guestbook-operator-bundle:v1.0.0"
    types = [p["type"] for p in bundle["properties"]]
    assert types[:3] == ["olm.gvk", "olm.gvk", "olm.package"]  # v1 and v1beta1 (all versions)
    assert {p["value"]["version"] for p in bundle["properties"][:2]} == {"v1", "v1beta1"}
    assert bundle["properties"][2]["value"] == {"packageName": PACKAGE, "version": "1.0.0"}
    assert set(types[3:]) == {"olm.bundle.object"}
    assert {"image": "example.com/guestbook-operator-bundle:v1.0.0", "name": ""} in bundle[
        "relatedImages"
    ]


def test_bundle_objects_carry_every_manifest(tmp_path: Path, inputs: ProjectInputs) -> None:
    loaded = _bundle(tmp_path, inputs, "1.0.0")
    document = catalog.bundle_document(loaded, package=PACKAGE, image="x.io/b:v1")
    objects = [
        json.loads(base64.b64decode(p["value"]["data"]))
        for p in document["properties"]
        if p["type"] == "olm.bundle.object"
    ]
    assert objects == [obj for _, obj in loaded.objects()]
    assert sum(o["kind"] == "ClusterServiceVersion" for o in objects) == 1


def test_upgrade_edges(tmp_path: Path, inputs: ProjectInputs) -> None:
    documents: list[dict[str, Any]] = []
    for version, extra in [
        ("1.0.0", {}),
        ("1.1.0", {}),  # no spec.replaces: replaces the channel head
        ("2.0.0", {"replaces": "guestbook-operator.v1.0.0", "skip_range": ">=1.0.0 <2.0.0"}),
    ]:
        bundle = _bundle(tmp_path, inputs, version, **extra)
        documents = catalog.add_bundle(documents, bundle, catalog.CatalogOptions(PACKAGE))
    (channel,) = _schema(documents, "olm.channel")
    assert channel["entries"] == [
        {"name": "guestbook-operator.v1.0.0"},
        {"name": "guestbook-operator.v1.1.0", "replaces": "guestbook-operator.v1.0.0"},
        {  # replaces what its CSV says, and skips the old head so there is one head
            "name": "guestbook-operator.v2.0.0",
            "replaces": "guestbook-operator.v1.0.0",
            "skips": ["guestbook-operator.v1.1.0"],
            "skipRange": ">=1.0.0 <2.0.0",
        },
    ]
    assert catalog.channel_head(channel) == "guestbook-operator.v2.0.0"
    assert [b["name"] for b in _schema(documents, "olm.bundle")] == [
        "guestbook-operator.v1.0.0",
        "guestbook-operator.v1.1.0",
        "guestbook-operator.v2.0.0",
    ]


def test_adding_the_same_version_again_replaces_it(tmp_path: Path, inputs: ProjectInputs) -> None:
    bundle = _bundle(tmp_path, inputs, "1.0.0")
    once = catalog.add_bundle([], bundle, catalog.CatalogOptions(PACKAGE))
    twice = catalog.add_bundle(once, bundle, catalog.CatalogOptions(PACKAGE))
    assert twice == once


@pytest.mark.parametrize(
    ("overrides", "channel", "expected_channels", "default"),
    [
        pytest.param(
            {"channels": ("stable", "fast")},
            None,
            ["fast", "stable"],
            "stable",
            id="bundle-channels",
        ),
        pytest.param(
            {"channels": ("stable", "fast"), "default_channel": "fast"},
            None,
            ["fast", "stable"],
            "fast",
            id="default",
        ),
        pytest.param({}, "candidate", ["candidate"], "candidate", id="flag"),
    ],
)
def test_channels(
    tmp_path: Path,
    inputs: ProjectInputs,
    overrides: dict[str, Any],
    channel: str | None,
    expected_channels: list[str],
    default: str,
) -> None:
    bundle = _bundle(tmp_path, inputs, "1.0.0", **overrides)
    documents = catalog.add_bundle([], bundle, catalog.CatalogOptions(PACKAGE, channel=channel))
    assert [c["name"] for c in _schema(documents, "olm.channel")] == expected_channels
    assert _schema(documents, "olm.package")[0]["defaultChannel"] == default


def test_render_and_load_round_trip(tmp_path: Path, inputs: ProjectInputs) -> None:
    documents = catalog.add_bundle(
        [], _bundle(tmp_path, inputs, "1.0.0"), catalog.CatalogOptions(PACKAGE)
    )
    for fmt in ("yaml", "json"):
        directory = tmp_path / f"catalog-{fmt}" / PACKAGE
        directory.mkdir(parents=True)
        (directory / f"index.{fmt}").write_text(catalog.render(documents, fmt=fmt))
        assert catalog.load_documents(directory.parent, package=PACKAGE) == documents
    text = catalog.render(documents)
    assert text.startswith("---\ndefaultChannel: alpha\nname: guestbook-operator\n")
    assert list(yaml.safe_load_all(text)) == documents


def test_other_packages_are_ignored_when_loading(tmp_path: Path) -> None:
    (tmp_path / "other.yaml").write_text(
        yamlwriter.dump_all(
            [{"schema": "olm.package", "name": "other", "defaultChannel": "a"}],
            style=yamlwriter.CANONICAL,
        )
    )
    assert catalog.load_documents(tmp_path, package=PACKAGE) == []


def test_bundle_image_needs_an_operator_image(tmp_path: Path, inputs: ProjectInputs) -> None:
    bundle = _bundle(tmp_path, inputs, "1.0.0")
    assert bundle.csv is not None
    bundle.csv["metadata"]["annotations"].pop("containerImage")
    bundle.csv["spec"]["install"]["spec"]["deployments"] = []
    with pytest.raises(ConfigError, match="--bundle-image"):
        catalog.add_bundle([], bundle, catalog.CatalogOptions(PACKAGE))
    documents = catalog.add_bundle(
        [], bundle, catalog.CatalogOptions(PACKAGE, bundle_image="quay.io/x/b:v1")
    )
    assert _schema(documents, "olm.bundle")[0]["image"] == "quay.io/x/b:v1"


def test_catalog_dockerfile_serves_the_directory() -> None:
    text = catalog.catalog_dockerfile("catalog")
    assert f"ARG OPM_IMAGE={catalog.OPM_IMAGE}\nFROM ${{OPM_IMAGE}} AS builder" in text
    assert text.count("FROM ${OPM_IMAGE}") == 2
    assert "ADD catalog /configs" in text
    assert f"LABEL {catalog.CONFIGS_LABEL}=/configs" in text


def test_an_empty_bundle_image_is_kept(tmp_path: Path, inputs: ProjectInputs) -> None:
    """`--bundle-image ''`: OLM installs from the embedded objects, no image to unpack."""
    bundle = _bundle(tmp_path, inputs, "1.0.0")
    documents = catalog.add_bundle([], bundle, catalog.CatalogOptions(PACKAGE, bundle_image=""))
    (document,) = _schema(documents, "olm.bundle")
    assert document["image"] == ""
    assert "" not in [r["image"] for r in document["relatedImages"]]
    kinds = [p["type"] for p in document["properties"]]
    assert kinds.count("olm.bundle.object") == len(bundle.objects())
