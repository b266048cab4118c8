"""runner.plan.diff: noise-free, masked diffs of what a plan would change."""

from __future__ import annotations

from typing import Any

import pytest

from runner.plan.diff import CHANGED_SECRET, Action, change_of, masked, unified, without_noise
from runner.plan.overlay import Entry, ObjectKey
from runner.util.redact import REDACTED

KEY = ObjectKey("", "configmaps", "ns", "a")


def obj(**extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "5",
            "generation": 2,
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "managedFields": [{"manager": "x"}],
        },
        **extra,
    }


def test_noise_is_left_out() -> None:
    status = {
        "conditions": [
            {
                "type": "Running",
                "lastTransitionTime": "t",
                "ansibleResult": {"ok": 1, "completion": "t"},
            }
        ],
        "observedGeneration": 2,
    }
    assert without_noise(obj(status=status, data={"completion": "kept"})) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "ns"},
        "status": {
            "conditions": [{"type": "Running", "ansibleResult": {"ok": 1}}],
            "observedGeneration": 2,
        },
        "data": {"completion": "kept"},
    }
    assert "status" not in without_noise(obj(status={}))


@pytest.mark.parametrize(
    ("live", "current", "action"),
    [
        pytest.param(None, obj(), Action.CREATE, id="create"),
        pytest.param(obj(), None, Action.DELETE, id="delete"),
        pytest.param(obj(data={"a": "1"}), obj(data={"a": "2"}), Action.UPDATE, id="update"),
        pytest.param(
            obj(),
            {**obj(), "metadata": {**obj()["metadata"], "resourceVersion": "9"}},
            Action.NONE,
            id="only-noise",
        ),
        pytest.param(None, None, Action.NONE, id="created-and-deleted"),
    ],
)
def test_actions(live: Any, current: Any, action: Action) -> None:
    change = change_of(Entry(key=KEY, live=live, current=current, order=0))
    assert change.action is action
    assert (change.diff == "") == (action is Action.NONE)
    assert change.label == ("ConfigMap ns/a" if live or current else "configmaps ns/a")


def test_the_diff_shows_only_what_changes() -> None:
    change = change_of(
        Entry(
            key=KEY,
            live=obj(data={"a": "1", "b": "x"}),
            current=obj(data={"a": "2", "b": "x"}),
            order=0,
        )
    )
    lines = [line for line in change.diff.splitlines() if line[:1] in "+-"]
    assert lines == ["--- live", "+++ planned", "-  a: '1'", "+  a: '2'"]


def test_the_status_can_be_left_out() -> None:
    entry = Entry(key=KEY, live=obj(status={"a": 1}), current=obj(status={"a": 2}), order=0)
    assert change_of(entry).action is Action.UPDATE
    assert change_of(entry, without_status=True).action is Action.NONE


def secret(**data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": data}


def test_secret_values_are_masked_and_changes_still_show() -> None:
    before, after = masked(secret(same="a", changed="b"), secret(same="a", changed="c", new="d"))
    assert before is not None and after is not None
    assert before["data"] == {"same": REDACTED, "changed": REDACTED}
    assert after["data"] == {"same": REDACTED, "changed": CHANGED_SECRET, "new": REDACTED}
    change = change_of(Entry(key=KEY, live=secret(x="a"), current=secret(x="b"), order=0))
    assert "'a'" not in change.diff and "'b'" not in change.diff
    assert CHANGED_SECRET in change.diff
    shown = change_of(
        Entry(key=KEY, live=secret(x="a"), current=secret(x="b"), order=0), show_secrets=True
    )
    assert "+  x: b" in shown.diff


def test_credential_keys_are_masked_anywhere() -> None:
    cr = {"apiVersion": "x/v1", "kind": "Db", "metadata": {"name": "d"}, "spec": {"password": "pw"}}
    change = change_of(Entry(key=KEY, live=None, current=cr, order=0))
    assert "pw" not in change.diff and REDACTED in change.diff


def test_multi_line_strings_diff_line_by_line() -> None:
    text = unified({"data": {"f": "one\ntwo\n"}}, {"data": {"f": "one\nthree\n"}})
    assert "-    two\n" in text and "+    three\n" in text
