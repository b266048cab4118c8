"""The pure part of k8s_status: condition validation, condition merging, status diffing.

Kept free of IO so the rules can be read (and tested) on their own:

- A condition given to the module is checked against the Kubernetes API conventions:
  known fields only, `type` and `status` set, `status` one of True/False/Unknown,
  `reason` a single CamelCase word, times in RFC 3339.
- Conditions are merged into the stored ones by `type`. A stored condition is replaced
  only when some field other than `lastTransitionTime` differs; then, unless the task
  gives its own `lastTransitionTime`, the time is carried over while `status` stays the
  same and set to now when `status` changes (or the condition is new).
- A status "needs writing" unless every requested value is already stored. Lists count as
  already stored when each requested item is present (`replace_lists=False`, the
  upstream rule) or only when equal (`replace_lists=True`); the `conditions` list always
  uses the first rule since it has been merged already. A write is a JSON merge patch, so
  maps merge deeply and lists are written as given.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

CONDITION_FIELDS = (
    "type",
    "status",
    "reason",
    "message",
    "lastHeartbeatTime",
    "lastTransitionTime",
)
CONDITION_STATUSES = ("True", "False", "Unknown")
TIME_FIELDS = ("lastHeartbeatTime", "lastTransitionTime")

# Letters and digits, starting with a letter: "MigrationStarted", "Pod2Ready".
_REASON = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
# RFC 3339 date-time; seconds optional and a space separator tolerated like upstream.
_RFC3339 = re.compile(
    r"^(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d(?::\d\d)?(?:\.\d+)?)([Zz]|[+-]\d\d:\d\d)$"
)


class ConditionError(ValueError):
    """A condition given to the module breaks the API conventions."""


def validate_condition(raw: Any) -> dict[str, Any]:
    """A cleaned copy of one condition parameter; raises `ConditionError` when invalid.

    Fields left unset (None, as Ansible fills unset sub-options) are dropped; a boolean
    `status` becomes "True"/"False"; a time written with a space separator is rewritten
    with `T`.
    """
    if not isinstance(raw, Mapping):
        raise ConditionError("each condition must be a mapping")
    condition = {key: value for key, value in raw.items() if value is not None}
    unknown = sorted(str(key) for key in condition if key not in CONDITION_FIELDS)
    if unknown:
        raise ConditionError(
            f"unknown condition field(s) {', '.join(unknown)}; "
            f"accepted fields are {', '.join(CONDITION_FIELDS)}"
        )
    if isinstance(condition.get("status"), bool):
        condition["status"] = "True" if condition["status"] else "False"
    for key in ("type", "status"):
        if not condition.get(key):
            raise ConditionError(f"condition field '{key}' must be set")
    label = f"condition '{condition['type']}'"
    if condition["status"] not in CONDITION_STATUSES:
        raise ConditionError(
            f"{label}: status must be one of True, False, Unknown, not {condition['status']!r}"
        )
    reason = condition.get("reason")
    if reason and not _REASON.match(str(reason)):
        raise ConditionError(f"{label}: reason must be a single CamelCase word, not {reason!r}")
    for key in TIME_FIELDS:
        value = condition.get(key)
        if value in (None, ""):
            continue
        match = _RFC3339.match(str(value))
        if not match:
            raise ConditionError(
                f"{label}: {key} must be an RFC 3339 date-time "
                f"(like 2025-01-31T12:00:00Z), not {value!r}"
            )
        date, clock, zone = match.groups()
        condition[key] = f"{date}T{clock}{zone.upper()}"
    return condition


def validate_conditions(raw: Any) -> list[dict[str, Any]]:
    """Cleaned copies of the `conditions` parameter (see `validate_condition`)."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConditionError("conditions must be a list of mappings")
    return [validate_condition(item) for item in raw]


def _index_of(conditions: list[Any], kind: Any) -> int | None:
    for index, condition in enumerate(conditions):
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return index
    return None


def has_transitioned(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """True when `new` sets any field, other than lastTransitionTime, to another value."""
    return any(key != "lastTransitionTime" and old.get(key) != value for key, value in new.items())


def _stamped(new: Mapping[str, Any], old: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    condition = dict(new)
    if condition.get("lastTransitionTime"):
        return condition
    if old is not None and old.get("status") == new.get("status") and old.get("lastTransitionTime"):
        condition["lastTransitionTime"] = old["lastTransitionTime"]
    else:
        condition["lastTransitionTime"] = now
    return condition


def merge_conditions(old: Any, new: list[Any], now: str) -> list[Any]:
    """The stored conditions with `new` merged in by type (see the module docstring)."""
    merged = copy.deepcopy(old) if isinstance(old, list) else []
    for condition in new:
        if not isinstance(condition, Mapping) or "type" not in condition:
            if condition not in merged:  # untyped entries only ever get added once
                merged.append(copy.deepcopy(condition))
            continue
        index = _index_of(merged, condition["type"])
        if index is None:
            merged.append(_stamped(condition, None, now))
        elif has_transitioned(merged[index], condition):
            merged[index] = _stamped(condition, merged[index], now)
    return merged


def stamp_conditions(old: Any, new: list[Any], now: str) -> list[Any]:
    """`new` as a whole replacement list, each condition given a lastTransitionTime."""
    previous = old if isinstance(old, list) else []
    stamped: list[Any] = []
    for condition in new:
        if not isinstance(condition, Mapping) or "type" not in condition:
            stamped.append(copy.deepcopy(condition))
            continue
        index = _index_of(previous, condition["type"])
        stamped.append(_stamped(condition, None if index is None else previous[index], now))
    return stamped


def contains(current: Any, wanted: Any, *, replace_lists: bool, key: str | None = None) -> bool:
    """True when writing `wanted` over `current` would change nothing worth a write."""
    if isinstance(wanted, Mapping):
        if not isinstance(current, Mapping):
            return False
        return all(
            contains(current.get(k), v, replace_lists=replace_lists, key=str(k))
            for k, v in wanted.items()
        )
    if isinstance(wanted, list) and isinstance(current, list):
        if replace_lists and key != "conditions":
            return current == wanted
        return all(item in current for item in wanted)
    return bool(current == wanted)


def merge_patch(target: Any, patch: Any) -> Any:
    """`target` after applying the JSON merge patch `patch` (RFC 7386)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def without_nulls(value: Any) -> Any:
    """A copy of `value` with None-valued map entries removed, recursively."""
    if isinstance(value, Mapping):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def plan_patch(
    old_status: Any, new_status: Mapping[str, Any], *, replace_lists: bool, now: str
) -> dict[str, Any] | None:
    """The merge patch for `/status`, or None when the stored status already has it all."""
    if not new_status:
        return None
    patch = copy.deepcopy(dict(new_status))
    stored = old_status if isinstance(old_status, Mapping) else {}
    if isinstance(patch.get("conditions"), list):
        patch["conditions"] = merge_conditions(stored.get("conditions"), patch["conditions"], now)
    if contains(stored, patch, replace_lists=replace_lists):
        return None
    return patch


def plan_replace(
    old_status: Any, new_status: Mapping[str, Any], *, now: str
) -> dict[str, Any] | None:
    """The full status to PUT, or None when it equals the stored one."""
    desired = without_nulls(copy.deepcopy(dict(new_status)))
    stored = old_status if isinstance(old_status, Mapping) else {}
    if isinstance(desired.get("conditions"), list):
        desired["conditions"] = stamp_conditions(
            stored.get("conditions"), desired["conditions"], now
        )
    if desired == stored:
        return None
    return dict(desired)
