"""Which primary-resource events enqueue a reconcile."""

from __future__ import annotations

from typing import Any

import pytest

from runner.engine.predicates import priority_of, should_reconcile
from runner.engine.queue import Priority
from runner.util.labelselector import parse_label_selector


def obj(
    generation: int | None = 1,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **status: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "x",
        "namespace": "ns",
        "labels": labels or {},
        "annotations": annotations or {},
    }
    if generation is not None:
        meta["generation"] = generation
    return {"metadata": meta, "status": status}


TEAM_A = parse_label_selector({"matchLabels": {"team": "a"}})


@pytest.mark.parametrize(
    ("event", "new", "old", "selector", "annotations", "expected"),
    [
        pytest.param("ADDED", obj(), None, None, False, True, id="added"),
        pytest.param("DELETED", obj(), None, None, False, True, id="deleted"),
        pytest.param("MODIFIED", obj(2), obj(1), None, False, True, id="generation-changed"),
        pytest.param("MODIFIED", obj(1, phase="x"), obj(1), None, False, False, id="status-only"),
        pytest.param("MODIFIED", obj(None), obj(None), None, False, True, id="no-generation"),
        pytest.param(
            "MODIFIED",
            obj(1, annotations={"a": "1"}),
            obj(1),
            None,
            False,
            False,
            id="annotations-ignored-by-default",
        ),
        pytest.param(
            "MODIFIED",
            obj(1, annotations={"a": "1"}),
            obj(1),
            None,
            True,
            True,
            id="annotations-watched",
        ),
        pytest.param(
            "ADDED", obj(labels={"team": "b"}), None, TEAM_A, False, False, id="selector-mismatch"
        ),
        pytest.param(
            "ADDED", obj(labels={"team": "a"}), None, TEAM_A, False, True, id="selector-match"
        ),
        pytest.param(
            "MODIFIED",
            obj(1, labels={"team": "a"}),
            obj(1),
            TEAM_A,
            False,
            True,
            id="labels-start-to-match",
        ),
        pytest.param(
            "MODIFIED",
            obj(2, labels={"team": "b"}),
            obj(1, labels={"team": "b"}),
            TEAM_A,
            False,
            False,
            id="generation-changed-but-not-selected",
        ),
        pytest.param(
            "DELETED",
            obj(labels={"team": "b"}),
            None,
            TEAM_A,
            False,
            False,
            id="deleted-not-selected",
        ),
    ],
)
def test_should_reconcile(
    event: str,
    new: dict[str, Any],
    old: dict[str, Any] | None,
    selector: Any,
    annotations: bool,
    expected: bool,
) -> None:
    assert (
        should_reconcile(event, new, old, selector=selector, watch_annotations=annotations)
        is expected
    )


def versioned(resource_version: str, generation: int = 1) -> dict[str, Any]:
    body = obj(generation)
    body["metadata"]["resourceVersion"] = resource_version
    return body


HIGH, LOW = Priority.HIGH, Priority.LOW


@pytest.mark.parametrize(
    ("event", "new", "old", "initial_list", "expected"),
    [
        pytest.param("ADDED", versioned("5"), None, True, LOW, id="initial-list"),
        pytest.param("ADDED", versioned("5"), None, False, HIGH, id="created"),
        pytest.param("MODIFIED", versioned("6", 2), versioned("5"), False, HIGH, id="spec-changed"),
        # A relist after the watch expired emits only what changed: news, not a resync.
        pytest.param("MODIFIED", versioned("6"), versioned("5"), True, HIGH, id="relist-change"),
        pytest.param("MODIFIED", versioned("5"), versioned("5"), False, LOW, id="resync"),
        pytest.param("MODIFIED", obj(), obj(), False, HIGH, id="no-resource-version"),
        pytest.param("MODIFIED", versioned("5"), None, True, LOW, id="no-old-while-listing"),
        pytest.param("DELETED", versioned("5"), versioned("5"), False, HIGH, id="deleted"),
        pytest.param("DELETED", versioned("5"), None, True, HIGH, id="deleted-while-listing"),
    ],
)
def test_priority_of(
    event: str,
    new: dict[str, Any],
    old: dict[str, Any] | None,
    initial_list: bool,
    expected: Priority,
) -> None:
    assert priority_of(event, new, old, initial_list=initial_list) is expected
