"""Our kustomize subset renders config/ as `kustomize build` does: patches, namespace,
name prefix with references, images, labels; and refuses what it does not support."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.devtools.packaging import kustomize, patches
from runner.devtools.packaging.projectconfig import render
from runner.errors import ConfigError


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        pytest.param({"a": {"b": 1, "c": 2}}, {"a": {"b": 3}}, {"a": {"b": 3, "c": 2}}, id="deep"),
        pytest.param({"a": 1, "b": 2}, {"b": None}, {"a": 1}, id="null-deletes"),
        pytest.param({"l": [1, 2]}, {"l": [3]}, {"l": [3]}, id="plain-list-replaced"),
        pytest.param(
            {"c": [{"name": "a", "x": 1}, {"name": "b"}]},
            {"c": [{"name": "a", "y": 2}, {"name": "z"}]},
            {"c": [{"name": "a", "x": 1, "y": 2}, {"name": "z"}, {"name": "b"}]},
            id="named-items-merge-patch-order-first",
        ),
        pytest.param(
            {"c": [{"name": "a"}, {"name": "b"}]},
            {"c": [{"name": "a", "$patch": "delete"}]},
            {"c": [{"name": "b"}]},
            id="patch-delete",
        ),
    ],
)
def test_strategic_merge(target: Any, patch: Any, expected: Any) -> None:
    assert patches.strategic_merge(target, patch) == expected


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        pytest.param(
            [{"op": "add", "path": "/l/-", "value": 9}], {"l": [1, 2, 9], "m": {}}, id="append"
        ),
        pytest.param(
            [{"op": "add", "path": "/l/0", "value": 0}], {"l": [0, 1, 2], "m": {}}, id="insert"
        ),
        pytest.param([{"op": "remove", "path": "/l/1"}], {"l": [1], "m": {}}, id="remove"),
        pytest.param(
            [{"op": "replace", "path": "/m", "value": {"k": "v"}}],
            {"l": [1, 2], "m": {"k": "v"}},
            id="replace",
        ),
        pytest.param(
            [{"op": "add", "path": "/m/a~1b", "value": 1}],
            {"l": [1, 2], "m": {"a/b": 1}},
            id="escaped-key",
        ),
        pytest.param(
            [
                {"op": "copy", "from": "/l", "path": "/m/l"},
                {"op": "move", "from": "/l", "path": "/k"},
            ],
            {"k": [1, 2], "m": {"l": [1, 2]}},
            id="copy-move",
        ),
    ],
)
def test_json6902(operations: list[Any], expected: Any) -> None:
    original = {"l": [1, 2], "m": {}}
    assert patches.json6902(original, operations) == expected
    assert original == {"l": [1, 2], "m": {}}


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        pytest.param([{"op": "remove", "path": "/nope"}], "does not exist", id="missing-path"),
        pytest.param([{"op": "add", "path": "/l/7", "value": 1}], "out of range", id="index"),
        pytest.param([{"op": "test", "path": "/l/0", "value": 5}], "test failed", id="test"),
        pytest.param([{"op": "frob", "path": "/l"}], "unknown op", id="unknown-op"),
    ],
)
def test_json6902_errors(operations: list[Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        patches.json6902({"l": [1]}, operations)


def _by(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_render_applies_prefix_namespace_patches_and_images(guestbook: Path) -> None:
    objects = render(guestbook)
    (deployment,) = _by(objects, "Deployment")
    assert deployment["metadata"]["name"] == "guestbook-operator-controller-manager"
    assert deployment["metadata"]["namespace"] == "guestbook-operator-system"
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == ["--leader-elect", "--metrics-bind-address=:8443"]
    assert container["resources"] == {"limits": {"memory": "512Mi"}}
    assert container["image"] == "example.com/guestbook-operator:0.0.1"
    # References follow the renamed objects.
    assert pod["serviceAccountName"] == "guestbook-operator-controller-manager"
    assert container["envFrom"][0]["configMapRef"]["name"] == "guestbook-operator-manager-config"
    binding = next(o for o in objects if o["metadata"]["name"].endswith("manager-rolebinding"))
    assert binding["roleRef"]["name"] == "guestbook-operator-manager-role"
    assert binding["subjects"][0] == {
        "kind": "ServiceAccount",
        "name": "guestbook-operator-controller-manager",
        "namespace": "guestbook-operator-system",
    }
    # CRDs keep their names; the Namespace takes the namespace's name.
    assert _by(objects, "CustomResourceDefinition")[0]["metadata"]["name"] == (
        "guestbooks.web.example.com"
    )
    assert _by(objects, "Namespace")[0]["metadata"]["name"] == "guestbook-operator-system"
    # Outside config/default, nothing is prefixed; scorecard patches are applied.
    assert _by(objects, "Guestbook")[0]["metadata"]["name"] == "guestbook-sample"
    (scorecard,) = _by(objects, "Configuration")
    assert scorecard["stages"][0]["tests"][0]["labels"]["suite"] == "basic"


def test_labels_reach_selectors(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [d.yaml]\nlabels:\n- pairs: {team: a}\n  includeSelectors: true\n"
    )
    (tmp_path / "d.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"
        "spec: {selector: {matchLabels: {x: y}}, template: {metadata: {labels: {x: y}}}}\n"
    )
    (deployment,) = kustomize.build(tmp_path)
    assert deployment["metadata"]["labels"] == {"team": "a"}
    assert deployment["spec"]["selector"]["matchLabels"] == {"x": "y", "team": "a"}
    assert deployment["spec"]["template"]["metadata"]["labels"] == {"x": "y", "team": "a"}


@pytest.mark.parametrize(
    ("kustomization", "message"),
    [
        pytest.param(
            "configMapGenerator: []\n", "unsupported kustomization field", id="unsupported"
        ),
        pytest.param("resources: [missing.yaml]\n", "does not exist", id="missing-resource"),
        pytest.param("resources: [.]\n", "includes itself", id="cycle"),
    ],
)
def test_build_errors_name_the_file(tmp_path: Path, kustomization: str, message: str) -> None:
    (tmp_path / "kustomization.yaml").write_text(kustomization)
    with pytest.raises(ConfigError, match=message):
        kustomize.build(tmp_path)


def test_project_without_config_manifests_is_read_part_by_part(guestbook: Path) -> None:
    (guestbook / "config" / "manifests" / "kustomization.yaml").unlink()
    kinds = {o["kind"] for o in render(guestbook)}
    assert {"ClusterServiceVersion", "Deployment", "Guestbook", "Configuration"} <= kinds


@pytest.mark.parametrize(
    ("selector", "patched"),
    [
        pytest.param("tier=web", ["web"], id="equals"),
        pytest.param("tier!=web", ["db", "none"], id="not-equals-includes-unlabelled"),
        pytest.param("tier in (web,db)", ["db", "web"], id="in"),
        pytest.param("!tier", ["none"], id="does-not-exist"),
        pytest.param("tier", ["db", "web"], id="exists"),
        pytest.param("", ["db", "none", "web"], id="empty-selects-all"),
    ],
)
def test_patch_target_label_selector_has_the_api_servers_syntax(
    tmp_path: Path, selector: str, patched: list[str]
) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [cm.yaml]\n"
        "patches:\n"
        "- target: {kind: ConfigMap, labelSelector: '" + selector + "'}\n"
        "  patch: |\n"
        "    - {op: add, path: /data/patched, value: 'yes'}\n"
    )
    (tmp_path / "cm.yaml").write_text(
        "".join(
            f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
            + (f"  labels: {{tier: {name}}}\n" if name != "none" else "")
            + "data: {}\n"
            for name in ("web", "db", "none")
        )
    )
    objects = kustomize.build(tmp_path)
    assert sorted(o["metadata"]["name"] for o in objects if "patched" in o["data"]) == patched


def test_patch_target_with_a_bad_label_selector_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text(
        "resources: [cm.yaml]\npatches:\n- target: {labelSelector: 'tier in (web'}\n"
        "  patch: '[{op: add, path: /data/x, value: y}]'\n"
    )
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    with pytest.raises(ConfigError, match=r"kustomization.yaml: patch target: invalid label"):
        kustomize.build(tmp_path)
