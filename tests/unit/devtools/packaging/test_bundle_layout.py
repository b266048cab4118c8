"""The bundle's files: layout, names, annotations.yaml and bundle.Dockerfile agreeing,
stable bytes, and the writer removing what a regeneration no longer produces."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from dockerfile_parse import DockerfileParser
from support.bundles import options

from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging.bundle import (
    bundle_annotations,
    dockerfile,
    manifest_file_name,
    render_bundle,
)
from runner.devtools.packaging.loader import parse_dockerfile_labels
from runner.devtools.packaging.projectconfig import ProjectInputs
from runner.devtools.packaging.write import write_files
from runner.errors import ConfigError


def test_layout(inputs: ProjectInputs) -> None:
    assert sorted(render_bundle(inputs, options())) == [
        "bundle.Dockerfile",
        "bundle/manifests/guestbook-operator-controller-manager-metrics-service_v1_service.yaml",
        "bundle/manifests/guestbook-operator-editors_rbac.authorization.k8s.io_v1_rolebinding.yaml",
        "bundle/manifests/guestbook-operator-guestbook-editor-role_rbac.authorization.k8s.io_v1_clusterrole.yaml",
        "bundle/manifests/guestbook-operator-manager-config_v1_configmap.yaml",
        "bundle/manifests/guestbook-operator-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml",
        "bundle/manifests/guestbook-operator.clusterserviceversion.yaml",
        "bundle/manifests/web.example.com_guestbooks.yaml",
        "bundle/metadata/annotations.yaml",
        "bundle/tests/scorecard/config.yaml",
    ]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "m"}},
            "m_v1_service.yaml",
            id="core",
        ),
        pytest.param(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "r"},
            },
            "r_rbac.authorization.k8s.io_v1_clusterrole.yaml",
            id="grouped",
        ),
    ],
)
def test_manifest_file_name(obj: dict[str, Any], expected: str) -> None:
    assert manifest_file_name(obj) == expected


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param({}, {olm.CHANNELS: "alpha", olm.DEFAULT_CHANNEL: "alpha"}, id="defaults"),
        pytest.param(
            {"channels": ("stable", "fast"), "default_channel": "fast"},
            {olm.CHANNELS: "stable,fast", olm.DEFAULT_CHANNEL: "fast"},
            id="channels",
        ),
    ],
)
def test_annotations_and_dockerfile_labels_agree(
    inputs: ProjectInputs, overrides: dict[str, Any], expected: dict[str, str]
) -> None:
    files = render_bundle(inputs, options(**overrides))
    annotations = yaml.safe_load(files["bundle/metadata/annotations.yaml"])["annotations"]
    labels = parse_dockerfile_labels(files["bundle.Dockerfile"])
    assert list(labels.items()) == list(annotations.items())
    assert annotations[olm.MEDIATYPE] == "registry+v1"
    assert annotations[olm.MANIFESTS] == "manifests/"
    assert annotations[olm.METADATA] == "metadata/"
    assert annotations[olm.PACKAGE] == "guestbook-operator"
    assert annotations[olm.TEST_CONFIG] == "tests/scorecard/"
    assert {k: annotations[k] for k in expected} == expected


def test_dockerfile_copies_from_the_bundle_directory() -> None:
    text = dockerfile(bundle_annotations(options(), layout="x"), bundle_dir="out")
    assert text.startswith("FROM scratch\n")
    assert "COPY out/manifests /manifests/\n" in text
    assert "COPY out/metadata /metadata/\n" in text
    assert "COPY out/tests/scorecard /tests/scorecard/\n" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("LABEL a=b c=d\n", {"a": "b", "c": "d"}, id="several"),
        pytest.param('LABEL a="x y"\n', {"a": "x y"}, id="quoted"),
        pytest.param("LABEL a=b \\\n  c=d\n", {"a": "b", "c": "d"}, id="continued"),
        pytest.param("LABEL legacy value\n", {"legacy": "value"}, id="legacy-form"),
    ],
)
def test_parse_dockerfile_labels(text: str, expected: dict[str, str]) -> None:
    assert parse_dockerfile_labels("FROM scratch\n" + text) == expected
    # the same as a full Dockerfile parser reads them
    parser = DockerfileParser(fileobj=io.BytesIO())
    parser.content = "FROM scratch\n" + text
    assert parser.labels == expected


def test_extra_objects_lose_their_namespace(inputs: ProjectInputs) -> None:
    files = render_bundle(inputs, options())
    service = yaml.safe_load(
        files[
            "bundle/manifests/guestbook-operator-controller-manager-metrics-service_v1_service.yaml"
        ]
    )
    assert "namespace" not in service["metadata"]


def test_scorecard_config_comes_from_config_scorecard(inputs: ProjectInputs) -> None:
    files = render_bundle(inputs, options())
    config = yaml.safe_load(files["bundle/tests/scorecard/config.yaml"])
    assert [t["labels"]["test"] for t in config["stages"][0]["tests"]] == ["basic-check-spec-test"]
    default = render_bundle(dataclasses.replace(inputs, scorecard=None), options())
    tests = yaml.safe_load(default["bundle/tests/scorecard/config.yaml"])["stages"][0]["tests"]
    assert len(tests) == 6 and tests[0]["image"] == olm.SCORECARD_IMAGE


def test_unsupported_kind_is_refused(inputs: ProjectInputs) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}}
    with pytest.raises(ConfigError, match="cannot carry this kind"):
        render_bundle(dataclasses.replace(inputs, others=(*inputs.others, job)), options())


def test_regeneration_is_byte_identical_and_removes_stale_files(
    guestbook: Path, inputs: ProjectInputs
) -> None:
    files = render_bundle(inputs, options())
    assert write_files(guestbook, files, owned=["bundle"])  # first write
    stale = guestbook / "bundle" / "manifests" / "old_v1_configmap.yaml"
    stale.write_text("stale")
    changed = write_files(guestbook, render_bundle(inputs, options()), owned=["bundle"])
    assert changed == [stale]
    assert not stale.exists()
    for relative, content in files.items():
        assert (guestbook / relative).read_text() == content
