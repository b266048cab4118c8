"""The OLM validators' build definitions: versions from gomodules/tools, tags, version stamps."""

from __future__ import annotations

from pathlib import Path

from runner.devtools.cluster.build import binary_path, go_binary_name
from runner.devtools.cluster.components import components, go_ansible_operator, tools


def test_tools_are_pinned_by_their_wrapper_modules() -> None:
    found = tools()
    assert list(found) == ["operator-sdk", "opm"]
    sdk, opm = found["operator-sdk"], found["opm"]
    assert sdk.version == "v1.42.3"
    assert opm.version == "v1.73.0"
    assert sdk.tags == ("containers_image_openpgp",)
    assert opm.tags == ("containers_image_openpgp", "json1")
    assert f"internal/version.Version={sdk.version}" in " ".join(sdk.ldflags)
    assert f"cmd/opm/version.opmVersion={opm.version}" in " ".join(opm.ldflags)
    assert [go_binary_name(c.package) for c in found.values()] == ["operator-sdk", "opm"]


def test_tools_are_not_part_of_the_control_plane() -> None:
    assert not set(tools()) & set(components())


def test_go_ansible_operator_is_pinned_and_built_on_demand_only() -> None:
    go = go_ansible_operator()
    assert go.version == "v1.42.0"
    assert go.package.endswith("/cmd/ansible-operator")
    assert go_binary_name(go.package) == "ansible-operator"
    assert f"internal/version.Version={go.version}" in " ".join(go.ldflags)
    # only bench/compare builds it: not `cluster up --build-only`, not `cluster tools`
    assert go.name not in set(tools()) | set(components())
    assert binary_path(go, Path("/c")) == Path(
        "/c/bin/ansible-operator-go-v1.42.0/ansible-operator-go"
    )
