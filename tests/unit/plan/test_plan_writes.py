"""runner.plan.writes: what a write makes of an object the plan holds."""

from __future__ import annotations

from typing import Any

import pytest

from runner.plan.writes import combined, decode, validated, with_metadata

BASE: dict[str, Any] = {
    "apiVersion": "x/v1",
    "kind": "App",
    "metadata": {
        "name": "a",
        "uid": "u-1",
        "resourceVersion": "7",
        "generation": 2,
        "creationTimestamp": "t0",
        "deletionTimestamp": "t1",
        "finalizers": ["f"],
    },
    "spec": {"size": 1},
    "status": {"phase": "Old"},
}


def test_a_status_write_changes_the_status_only() -> None:
    sent = {**BASE, "spec": {"size": 9}, "status": {"phase": "New"}}
    new = combined(BASE, sent, subresource="status", has_status=True)
    assert new["spec"] == {"size": 1} and new["status"] == {"phase": "New"}
    assert "status" not in combined(BASE, {"metadata": {}}, subresource="status", has_status=True)


@pytest.mark.parametrize(("has_status", "phase"), [(True, "Old"), (False, "Sent")])
def test_a_main_write_keeps_what_the_server_sets(has_status: bool, phase: str) -> None:
    sent = {
        "apiVersion": "x/v1",
        "kind": "App",
        "metadata": {"name": "a", "uid": "other", "resourceVersion": "1", "labels": {"l": "v"}},
        "spec": {"size": 2},
        "status": {"phase": "Sent"},
    }
    new = combined(BASE, sent, subresource="", has_status=has_status)
    assert new["spec"] == {"size": 2}
    assert new["status"] == {"phase": phase}
    assert new["metadata"] == {
        "name": "a",
        "labels": {"l": "v"},
        "uid": "u-1",
        "resourceVersion": "7",
        "generation": 2,
        "creationTimestamp": "t0",
        "deletionTimestamp": "t1",
    }


def test_the_validated_object_keeps_the_plans_identity_and_deletion() -> None:
    result = {
        **BASE,
        "metadata": {"name": "a", "uid": "new-uid", "creationTimestamp": "t9", "generation": 1},
        "spec": {"size": 1, "defaulted": True},
        "status": {},
    }
    kept = validated(BASE, result, subresource="", has_status=True)
    assert kept["spec"] == {"size": 1, "defaulted": True}
    assert kept["status"] == {"phase": "Old"}
    meta = kept["metadata"]
    assert (meta["uid"], meta["creationTimestamp"], meta["deletionTimestamp"]) == (
        "u-1",
        "t0",
        "t1",
    )
    status = validated(
        BASE, {**result, "status": {"phase": "Checked"}}, subresource="status", has_status=True
    )
    assert status["spec"] == {"size": 1} and status["status"] == {"phase": "Checked"}


def test_helpers() -> None:
    assert with_metadata({"metadata": {"a": 1}}, b=2, c="")["metadata"] == {"a": 1, "b": 2}
    assert decode(b'{"a": 1}') == {"a": 1}
    assert decode(b"[1]") is None and decode(b"not json") is None and decode(None) is None
