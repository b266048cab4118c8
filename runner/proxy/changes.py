"""Whether an update of a dependent object is worth reconciling its owner again.

Dependents change all the time without anyone touching what the role manages: the
Deployment controller writes `status` after every rollout step, each write bumps
`metadata.resourceVersion`, and every writer leaves a timestamped `managedFields` entry.
Reconciling the owner for those would re-run the role for nothing. The Go operator's
dependent predicate drops updates that differ only in `status`, `resourceVersion` or the
`time` of managedFields entries; here `managedFields` is left out altogether, because it
only records who wrote which field: a status write by a new manager adds an entry there
without changing anything the role cares about, and every real change it records also
shows in the fields themselves. Nothing else is ignored — a spec edit is a change, and
`metadata.generation` moves with it.

The comparison is a strict deep equality of JSON values: `true` and `1`, or `1` and
`1.0`, are different values here even though Python's `==` calls them equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["dependent_update_matters", "without_noise"]

_IGNORED_TOP: Final = ("status",)
_IGNORED_METADATA: Final = ("resourceVersion", "managedFields")


def without_noise(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` without the parts whose changes do not matter (a shallow copy; `obj` kept)."""
    result = {key: value for key, value in obj.items() if key not in _IGNORED_TOP}
    metadata = result.get("metadata")
    if isinstance(metadata, Mapping):
        result["metadata"] = {
            key: value for key, value in metadata.items() if key not in _IGNORED_METADATA
        }
    return result


def _same(left: Any, right: Any) -> bool:
    """Deep equality of JSON values that tells booleans, integers and floats apart."""
    if type(left) is not type(right):
        both_mappings = isinstance(left, Mapping) and isinstance(right, Mapping)
        both_lists = isinstance(left, list | tuple) and isinstance(right, list | tuple)
        if not (both_mappings or both_lists):
            return False
    if isinstance(left, Mapping):
        return left.keys() == right.keys() and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(_same, left, right))
    return bool(left == right)


def dependent_update_matters(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """False when `old` and `new` differ only in status, resourceVersion or managedFields."""
    return not _same(without_noise(old), without_noise(new))
