"""Which informer events on a primary resource deserve a reconcile (pure).

The Go operator reconciles a primary when its generation changed (or it has none),
optionally when its annotations changed, and only when its labels match the watch's
selector. We add one case it misses: an object whose labels start to match is new to us.
`priority_of` says how urgent an event that passed is, as controller-runtime's handlers do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runner.engine.queue import Priority
from runner.structs import bodies
from runner.util.labelselector import LabelSelector, selector_matches


def selected(obj: Mapping[str, Any], selector: LabelSelector | None) -> bool:
    """True when the watch's selector (None: everything) selects `obj` by its labels."""
    return selector_matches(selector, bodies.labels(obj))


def should_reconcile(
    event: str,
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    *,
    selector: LabelSelector | None,
    watch_annotations: bool,
) -> bool:
    """True when the event should put the object's key on the work queue."""
    matches = selected(new, selector)
    if event == "DELETED":
        return matches
    if not matches:
        return False
    if event == "ADDED" or old is None:
        return True
    if not selected(old, selector):
        return True
    new_meta, old_meta = bodies.metadata(new), bodies.metadata(old)
    generation = new_meta.get("generation")
    if generation is None or generation != old_meta.get("generation"):
        return True
    return watch_annotations and new_meta.get("annotations") != old_meta.get("annotations")


def priority_of(
    event: str,
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    *,
    initial_list: bool = False,
) -> Priority:
    """The queue priority of an event on a primary resource, after controller-runtime's
    `WithLowPriorityWhenUnchanged`: LOW for what brings no change (an object of the
    initial list, `initial_list` being whether the informer has not synced yet; an update
    whose resourceVersion did not move, i.e. a resync), HIGH for the rest (an object
    created, changed or deleted, a relist after the watch expired included)."""
    if event == "DELETED":
        return Priority.HIGH
    if event == "ADDED" or old is None:
        return Priority.LOW if initial_list else Priority.HIGH
    version = bodies.resource_version(new)
    unchanged = version != "" and version == bodies.resource_version(old)
    return Priority.LOW if unchanged else Priority.HIGH
