"""The differential suite's own logic, without a cluster: how two records are compared,
how the allow-list explains a difference, what normalising takes out, and that every
fixture and the allow-list load."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.differential import fixtures as fx
from support.differential.compare import (
    ABSENT,
    Difference,
    differences,
    load_allowlist,
    unexplained,
)
from support.differential.recorder import normalise

SUITE = Path(__file__).resolve().parents[1] / "differential"


def test_differences_name_the_path_and_both_values() -> None:
    go = {"a": {"b": [1, 2], "c": "x"}, "gone": 1}
    ours = {"a": {"b": [1, 3], "c": "x"}, "new": 2}
    assert list(differences(go, ours)) == [
        Difference("a/b/1", 2, 3),
        Difference("gone", 1, ABSENT),
        Difference("new", ABSENT, 2),
    ]


def test_lists_of_other_lengths_differ_as_a_whole() -> None:
    assert list(differences({"l": [1]}, {"l": [1, 2]})) == [Difference("l", [1], [1, 2])]


def test_an_entry_explains_what_it_names_where_it_applies(tmp_path: Path) -> None:
    listed = tmp_path / "allowlist.yaml"
    listed.write_text(
        """
- id: one
  what: w
  why: y
  paths: ["steps/*/events"]
  go: []
  backends: [fast]
"""
    )
    entries = load_allowlist(listed)
    events = Difference("steps/0/events", [], ["Normal X"])
    other = Difference("steps/0/status", [], ["x"])
    used: set[str] = set()
    left = unexplained(
        [events, other], entries, fixture="f", backend="fast", core="2.19", used=used
    )
    assert left == [other] and used == {"one"}
    assert unexplained([events], entries, fixture="f", backend="runner", core="2.19", used=used)


def test_an_entry_without_its_reason_is_refused(tmp_path: Path) -> None:
    listed = tmp_path / "allowlist.yaml"
    listed.write_text("- id: one\n  what: w\n  paths: [x]\n")
    with pytest.raises(ValueError, match="entry 1: missing why"):
        load_allowlist(listed)


def test_normalising_takes_out_what_differs_between_runs() -> None:
    obj = {
        "metadata": {
            "name": "x",
            "namespace": "d-go-a-12345",
            "uid": "0f8fad5b-d9cb-469f-a165-70867728950e",
            "resourceVersion": "42",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "m", "operation": "Update", "time": "t"}],
        },
        "data": {"secret": "made-up", "msg": "at 2026-01-01T00:00:00Z in d-go-a-12345"},
    }
    assert normalise(obj, names={"d-go-a-12345": "<ns>"}, random=("data/secret",)) == {
        "metadata": {
            "name": "x",
            "namespace": "<ns>",
            "uid": "<uid>",
            "resourceVersion": "<rv>",
            "creationTimestamp": "<time>",
            "managedFields": ["m|Update|"],
        },
        "data": {"secret": "<random>", "msg": "at <time> in <ns>"},
    }


def test_every_fixture_and_the_allowlist_load() -> None:
    loaded = fx.load_all()
    assert len(loaded) >= 18
    for fixture in loaded:
        assert fixture.steps, fixture.name
        assert fixture.watched(), fixture.name
        for ref in [*fixture.periodic, *(r for s in fixture.steps for r in s.wait.runs)]:
            assert ref in fixture.watched(), f"{fixture.name}: {ref}"
    assert load_allowlist(SUITE / "allowlist.yaml")


def test_an_entrys_values_with_a_star_are_patterns(tmp_path: Path) -> None:
    listed = tmp_path / "allowlist.yaml"
    listed.write_text(
        """
- id: manager
  what: w
  why: y
  paths: ["steps/*/managedFields/*"]
  go: "go-op|Update|*"
  ours: "py-op|Update|*"
"""
    )
    entries = load_allowlist(listed)
    finalizer = Difference("steps/0/managedFields/1", "go-op|Update|", "py-op|Update|")
    status = Difference("steps/0/managedFields/1", "go-op|Update|status", "py-op|Update|status")
    other = Difference("steps/0/managedFields/1", "go-op|Update|", "someone|Apply|")
    used: set[str] = set()
    left = unexplained(
        [finalizer, status, other], entries, fixture="f", backend="fast", core="2.19", used=used
    )
    assert left == [other]


def test_unsettled_objects_leave_their_status_out_where_named() -> None:
    periodic = fx.load("periodic")
    assert not periodic.settled("Periodic/tick", 0)
    assert periodic.settled("Periodic/bad", 0)
    failing = fx.load("failing")
    assert not failing.settled("Flaky/flaky", 0)
    assert failing.settled("Flaky/flaky", 1), "its recovery is compared"


def test_messages_lose_the_operators_own_directories() -> None:
    text = "not found in /w/runner/operator-y8nez_lj/x/roles:/w/project/roles"
    assert normalise(text, names={"/w/runner": "<work>", "/w": "<work>"}) == (
        "not found in <work>/operator-<id>/x/roles:<work>/project/roles"
    )
