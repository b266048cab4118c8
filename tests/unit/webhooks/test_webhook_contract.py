"""The role contract as pure functions: vars in, facts out, patches and answers."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from runner.structs import GVK
from runner.webhooks import contract
from runner.webhooks.declarations import Webhook

GVK_ = GVK("cache.example.com", "v1alpha1", "Memcached")
WEBHOOK = Webhook(type="validating", gvk=GVK_, role=Path("/roles/check"), vars={"limit": 3})


def _obj(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": spec,
    }


def _ok(facts: dict[str, Any]) -> dict[str, Any]:
    return {"event": "runner_on_ok", "event_data": {"res": {"ansible_facts": facts}}}


def test_admission_vars_have_the_reconcile_shape_and_the_request() -> None:
    request = {
        "uid": "u",
        "operation": "UPDATE",
        "object": _obj(sizeInBytes=2),
        "oldObject": _obj(sizeInBytes=1),
        "userInfo": {"username": "alice", "groups": ["dev"]},
        "dryRun": True,
    }
    extra = contract.admission_vars(WEBHOOK, request)
    assert extra["size_in_bytes"] == 2
    assert extra["_cache_example_com_memcached"]["spec"] == {"sizeInBytes": 2}
    assert extra["ansible_operator_meta"] == {"name": "m", "namespace": "ns"}
    assert extra["old_object"]["spec"] == {"sizeInBytes": 1}
    assert extra["operation"] == "UPDATE" and extra["dry_run"] is True
    assert extra["user_info"] == {"username": "alice", "uid": "", "groups": ["dev"], "extra": {}}
    assert extra["limit"] == 3 and extra["webhook_type"] == "validating"


def test_delete_gives_the_deleted_object_and_a_generated_name_the_request_namespace() -> None:
    deleting = contract.admission_vars(
        WEBHOOK, {"uid": "u", "operation": "DELETE", "object": None, "oldObject": _obj(size=1)}
    )
    assert deleting["size"] == 1 and deleting["old_object"]["spec"] == {"size": 1}
    unnamed = _obj()
    unnamed["metadata"] = {"generateName": "m-"}
    creating = contract.admission_vars(
        WEBHOOK, {"uid": "u", "operation": "CREATE", "object": unnamed, "namespace": "ns"}
    )
    assert creating["ansible_operator_meta"] == {"name": "", "namespace": "ns"}
    assert creating["old_object"] is None


def test_facts_are_read_from_ok_events_the_last_setting_winning() -> None:
    output = contract.RoleOutput()
    output.add(_ok({"webhook_warnings": "first"}))
    output.add({"event": "runner_on_skipped", "event_data": {"res": {"ansible_facts": {}}}})
    output.add(_ok({"webhook_warnings": ["a", "b"], "unrelated": 1}))
    assert output.warnings() == ["a", "b"]
    assert output.facts == {"webhook_warnings": ["a", "b"]}


@pytest.mark.parametrize(
    ("old", "new", "patch"),
    [
        pytest.param({"a": 1}, {"a": 1}, [], id="same"),
        pytest.param(
            {"a": 1}, {"a": 2}, [{"op": "replace", "path": "/a", "value": 2}], id="replace"
        ),
        pytest.param(
            {}, {"a/b": {"c": 1}}, [{"op": "add", "path": "/a~1b", "value": {"c": 1}}], id="escaped"
        ),
        pytest.param({"a": 1, "b": 2}, {"b": 2}, [{"op": "remove", "path": "/a"}], id="remove"),
        pytest.param(
            {"l": [1, 2]}, {"l": [1]}, [{"op": "replace", "path": "/l", "value": [1]}], id="list"
        ),
        pytest.param(
            {"x": 1}, {"x": 1.0}, [{"op": "replace", "path": "/x", "value": 1.0}], id="type"
        ),
    ],
)
def test_json_patch(old: dict[str, Any], new: dict[str, Any], patch: list[Any]) -> None:
    assert contract.json_patch(old, new) == patch


def test_mutation_patch_from_the_returned_object_or_the_given_patch() -> None:
    original = _obj(size=1)
    wanted = contract.RoleOutput()
    wanted.add(_ok({"webhook_object": {**original, "spec": {"size": 1, "port": 11211}}}))
    assert contract.mutation_patch(original, wanted) == [
        {"op": "add", "path": "/spec/port", "value": 11211}
    ]
    given = contract.RoleOutput()
    given.add(_ok({"webhook_patch": [{"op": "add", "path": "/spec/x", "value": 1}]}))
    assert contract.mutation_patch(original, given) == [
        {"op": "add", "path": "/spec/x", "value": 1}
    ]
    assert contract.mutation_patch(original, contract.RoleOutput()) == []


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        pytest.param({"webhook_object": "text"}, "webhook_object must be a mapping", id="object"),
        pytest.param({"webhook_patch": {"op": "add"}}, "must be a list", id="patch-type"),
        pytest.param(
            {"webhook_patch": [{"op": "nope", "path": "/a"}]}, "webhook_patch[0]", id="op"
        ),
        pytest.param(
            {"webhook_object": {"apiVersion": "v1", "kind": "Memcached"}},
            "a mutating webhook cannot change it",
            id="api-version",
        ),
    ],
)
def test_broken_outputs_are_contract_errors(facts: dict[str, Any], message: str) -> None:
    output = contract.RoleOutput()
    output.add(_ok(facts))
    with pytest.raises(contract.ContractError) as err:
        contract.mutation_patch(_obj(), output)
    assert message in str(err.value)


def test_admission_response_shapes() -> None:
    denied = contract.admission_response("u", allowed=False, message="no", code=403)
    assert denied["response"] == {
        "uid": "u",
        "allowed": False,
        "status": {"message": "no", "code": 403, "reason": "Forbidden"},
    }
    patch = [{"op": "add", "path": "/a", "value": 1}]
    allowed = contract.admission_response("u", allowed=True, warnings=["w"], patch=patch)
    assert allowed["response"]["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(allowed["response"]["patch"])) == patch
    assert allowed["response"]["warnings"] == ["w"]


def test_conversion_result_keeps_identity_and_takes_labels() -> None:
    original = _obj(size=2)
    original["metadata"]["uid"] = "1"
    output = contract.RoleOutput()
    output.add(
        _ok(
            {
                "webhook_object": {
                    "spec": {"replicas": 2},
                    "metadata": {"name": "other", "labels": {"a": "b"}},
                }
            }
        )
    )
    converted = contract.conversion_result(original, output, "cache.example.com/v1beta1")
    assert converted["apiVersion"] == "cache.example.com/v1beta1"
    assert converted["kind"] == "Memcached"
    assert converted["metadata"] == {
        "name": "m",
        "namespace": "ns",
        "uid": "1",
        "labels": {"a": "b"},
    }
    wrong = contract.RoleOutput()
    wrong.add(_ok({"webhook_object": {"apiVersion": "cache.example.com/v2"}}))
    with pytest.raises(contract.ContractError, match=r"expected 'cache\.example\.com/v1beta1'"):
        contract.conversion_result(original, wrong, "cache.example.com/v1beta1")
