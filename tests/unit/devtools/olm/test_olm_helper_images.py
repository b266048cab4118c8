"""The images OLM's catalog operator is started with: names, flags, Dockerfiles."""

from __future__ import annotations

from pathlib import Path

from runner.devtools import images
from runner.devtools.cluster import build
from runner.devtools.cluster.components import olm_operators, olm_utilities
from runner.devtools.olm.catalogimages import OLMImages, registry_name, util_dockerfile


def test_catalog_operator_flags_name_both_images() -> None:
    found = OLMImages(opm="127.0.0.1:5000/a/opm:v1", util="127.0.0.1:5000/a/util:v2")
    assert found.catalog_flags() == [
        "--opmImage=127.0.0.1:5000/a/opm:v1",
        "--util-image=127.0.0.1:5000/a/util:v2",
    ]


def test_registry_name_keeps_the_digest_tag() -> None:
    local = "localhost/ansible-operator-olm-util:v0.46.0-0123456789ab"
    assert (
        registry_name("127.0.0.1:5000", "x/olm-util", local)
        == "127.0.0.1:5000/x/olm-util:v0.46.0-0123456789ab"
    )


def test_util_image_has_cp_from_its_base_and_both_programs() -> None:
    text = util_dockerfile("localhost/base:1")
    assert "FROM localhost/base:1" in text
    assert "COPY cpb copy-content /bin/" in text


def test_opm_image_carries_the_health_probe_olm_runs() -> None:
    assert "grpc_health_probe" in images.OPM_DOCKERFILE
    assert "ENV PATH=/bin" in images.OPM_DOCKERFILE  # unpack Jobs run `opm`, not /bin/opm


def test_utilities_come_from_the_operators_module_and_rebuild_when_the_probe_changes(
    tmp_path: Path,
) -> None:
    utilities = olm_utilities()
    operator = olm_operators()["olm"]
    assert {c.module for c in utilities.values()} == {operator.module}
    assert utilities["cpb"].package.endswith("/util/cpb")
    assert build.go_binary_name(utilities["grpc_health_probe"].package) == "grpc_health_probe"
    path = build.binary_path(utilities["grpc_health_probe"], tmp_path)
    assert "+" in path.parent.name  # the probe's source digest is part of the cache key


def test_inputs_digest_changes_with_a_file(tmp_path: Path) -> None:
    program = tmp_path / "p"
    program.write_bytes(b"one")
    first = images.inputs_digest("FROM x", {"p": program})
    program.write_bytes(b"two")
    assert images.inputs_digest("FROM x", {"p": program}) != first
