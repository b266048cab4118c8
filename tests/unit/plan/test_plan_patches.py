"""runner.plan.patches: the patches a plan applies itself, and `--set`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.plan import patches

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "finalizers": ["a"], "labels": {"app": "web", "tier": "x"}},
    "spec": {
        "replicas": 1,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "web:1",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "ports": [{"containerPort": 80, "name": "http"}],
                    },
                    {"name": "side", "image": "side:1"},
                ],
                "tolerations": [{"key": "a"}],
            }
        },
    },
}


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        pytest.param({"a": 1, "b": 2}, {"b": None}, {"a": 1}, id="null-removes"),
        pytest.param({"a": {"b": 1}}, {"a": {"c": 2}}, {"a": {"b": 1, "c": 2}}, id="nested"),
        pytest.param({"a": [1, 2]}, {"a": [3]}, {"a": [3]}, id="lists-replaced"),
        pytest.param({"a": 1}, {"a": {"b": None}}, {"a": {}}, id="scalar-to-map"),
    ],
)
def test_merge_patch(target: Any, patch: Any, expected: Any) -> None:
    assert patches.merge_patch(target, patch) == expected


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        pytest.param(
            [{"op": "add", "path": "/a/-", "value": 3}], {"a": [1, 2, 3], "b": {}}, id="append"
        ),
        pytest.param(
            [{"op": "add", "path": "/a/0", "value": 0}], {"a": [0, 1, 2], "b": {}}, id="insert"
        ),
        pytest.param([{"op": "remove", "path": "/a/1"}], {"a": [1], "b": {}}, id="remove"),
        pytest.param(
            [{"op": "replace", "path": "/b", "value": {"x/y": 1}}],
            {"a": [1, 2], "b": {"x/y": 1}},
            id="replace",
        ),
        pytest.param(
            [{"op": "move", "from": "/a", "path": "/b/a"}], {"b": {"a": [1, 2]}}, id="move"
        ),
        pytest.param(
            [{"op": "copy", "from": "/a/0", "path": "/b/c~1d"}],
            {"a": [1, 2], "b": {"c/d": 1}},
            id="copy-escaped",
        ),
        pytest.param(
            [{"op": "test", "path": "/a/1", "value": 2}], {"a": [1, 2], "b": {}}, id="test"
        ),
    ],
)
def test_json_patch(operations: list[Any], expected: Any) -> None:
    target = {"a": [1, 2], "b": {}}
    assert patches.json_patch(target, operations) == expected
    assert target == {"a": [1, 2], "b": {}}


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        pytest.param([{"op": "test", "path": "/a/0", "value": 9}], "test", id="failed-test"),
        pytest.param([{"op": "remove", "path": "/zz"}], "does not exist", id="missing"),
        pytest.param([{"op": "add", "path": "a"}], "JSON pointer", id="bad-pointer"),
        pytest.param([{"op": "jump", "path": "/a"}], "unknown op", id="unknown"),
    ],
)
def test_json_patch_errors(operations: list[Any], message: str) -> None:
    with pytest.raises(patches.PatchError, match=message):
        patches.json_patch({"a": [1]}, operations)


def test_strategic_merge_merges_lists_by_their_keys() -> None:
    patch = {
        "metadata": {"finalizers": ["b", "a"], "labels": {"tier": None}},
        "spec": {
            "replicas": 3,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "web:2",
                            "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
                        },
                        {"name": "side", "$patch": "delete"},
                    ],
                    "tolerations": [{"key": "b"}],
                }
            },
        },
    }
    result = patches.strategic_merge_patch(DEPLOYMENT, patch)
    assert result["metadata"]["finalizers"] == ["a", "b"]
    assert result["metadata"]["labels"] == {"app": "web"}
    assert result["spec"]["replicas"] == 3
    [main] = result["spec"]["template"]["spec"]["containers"]
    assert main["image"] == "web:2"
    assert main["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "3"},
        {"name": "C", "value": "4"},
    ]
    assert main["ports"] == [{"containerPort": 80, "name": "http"}]
    assert result["spec"]["template"]["spec"]["tolerations"] == [{"key": "b"}]
    assert DEPLOYMENT["spec"]["replicas"] == 1  # not changed in place


def test_strategic_merge_directives() -> None:
    target = {"spec": {"a": {"x": 1, "y": 2}, "list": [1, 2, 3], "keep": {"p": 1, "q": 2}}}
    patch = {
        "spec": {
            "a": {"$patch": "replace", "z": 3},
            "$deleteFromPrimitiveList/list": [2],
            "$setElementOrder/list": [1, 3],
            "keep": {"$retainKeys": ["p"], "r": 3},
        }
    }
    assert patches.strategic_merge_patch(target, patch) == {
        "spec": {"a": {"z": 3}, "list": [1, 3], "keep": {"p": 1, "r": 3}}
    }


@pytest.mark.parametrize(
    ("content_type", "builtin", "code"),
    [
        pytest.param(patches.STRATEGIC_MERGE_PATCH, False, 415, id="smp-of-a-custom-resource"),
        pytest.param("application/x-unknown", True, 415, id="unknown-type"),
    ],
)
def test_apply_patch_refuses_like_the_server(content_type: str, builtin: bool, code: int) -> None:
    with pytest.raises(patches.PatchError) as err:
        patches.apply_patch({"a": 1}, content_type, b"{}", builtin=builtin)
    assert err.value.code == code


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        pytest.param(
            patches.MERGE_PATCH, {"spec": {"b": 2}}, {"spec": {"a": 1, "b": 2}}, id="merge"
        ),
        pytest.param(
            f"{patches.JSON_PATCH}; charset=utf-8",
            [{"op": "add", "path": "/spec/b", "value": 2}],
            {"spec": {"a": 1, "b": 2}},
            id="json-with-parameters",
        ),
        pytest.param(patches.APPLY, {"spec": {"b": 2}}, {"spec": {"a": 1, "b": 2}}, id="apply"),
    ],
)
def test_apply_patch(content_type: str, body: Any, expected: Any) -> None:
    assert (
        patches.apply_patch(
            {"spec": {"a": 1}}, content_type, json.dumps(body).encode(), builtin=False
        )
        == expected
    )


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        pytest.param("spec.size=3", ["spec", "size"], 3, id="int"),
        pytest.param("spec.size='3'", ["spec", "size"], "3", id="quoted"),
        pytest.param("spec.on=true", ["spec", "on"], True, id="bool"),
        pytest.param("spec.list=[a, b]", ["spec", "list"], ["a", "b"], id="list"),
        pytest.param("spec.empty=", ["spec", "empty"], "", id="empty"),
        pytest.param("spec.url=http://x/?a=b", ["spec", "url"], "http://x/?a=b", id="equals"),
    ],
)
def test_parse_assignment(text: str, path: list[str], value: Any) -> None:
    assert patches.parse_assignment(text) == (path, value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("spec.size", "expected PATH=VALUE", id="no-equals"),
        pytest.param("spec..size=1", "not a dotted field path", id="empty-part"),
        pytest.param("metadata.name=x", "names the object", id="name"),
        pytest.param("kind=X", "names the object", id="kind"),
        pytest.param("spec.a=[1", "not valid YAML", id="bad-yaml"),
    ],
)
def test_parse_assignment_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        patches.parse_assignment(text)


def test_assign_makes_maps_and_refuses_scalars() -> None:
    obj = {"spec": {"size": 1}}
    assert patches.assign(obj, ["spec", "deep", "x"], 2) == {"spec": {"size": 1, "deep": {"x": 2}}}
    assert obj == {"spec": {"size": 1}}
    with pytest.raises(ValueError, match=r"spec\.size is not a mapping"):
        patches.assign(obj, ["spec", "size", "x"], 2)
