"""What a write makes of an object the plan already holds, as the API server would.

The dry-run layer (`dryrun.py`) applies a later write to an object the plan wrote (or
created) itself, then lets the server validate the result. The rules of the status
subresource and of the fields only the server sets are kept here:

* a status write changes the status only (`combined`, subresource `status`);
* a main write changes everything but the status when the kind has a status subresource,
  and never `resourceVersion`, `uid`, `creationTimestamp`, `generation` or the deletion
  state, which stay as the plan has them;
* the server's answer to the validation is kept with the object's identity and deletion
  state as the plan has them (a dry-run create of an object only the plan has gets a new
  uid each time; a dry-run update cannot set a `deletionTimestamp`), and with the other
  half of a status write (`validated`).

Pure.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Final

from runner.structs import bodies

__all__ = ["SERVER_SET", "combined", "decode", "validated", "with_metadata"]

SERVER_SET: Final = ("resourceVersion", "uid", "creationTimestamp", "generation")
"""Metadata only the API server sets."""
_DELETION: Final = ("deletionTimestamp", "deletionGracePeriodSeconds")


def combined(
    base: Mapping[str, Any], sent: Mapping[str, Any], *, subresource: str, has_status: bool
) -> dict[str, Any]:
    """What a write of `sent` (to the object, or to its `status` subresource) makes of
    `base`; `has_status`: the kind has a status subresource."""
    if subresource == "status":
        new = copy.deepcopy(dict(base))
        if "status" in sent:
            new["status"] = copy.deepcopy(sent["status"])
        else:
            new.pop("status", None)
        return new
    new = copy.deepcopy(dict(sent))
    if has_status:
        if "status" in base:
            new["status"] = copy.deepcopy(base["status"])
        else:
            new.pop("status", None)
    meta = dict(bodies.metadata(new))
    old = bodies.metadata(base)
    for name in (*SERVER_SET, *_DELETION):
        if name in old:
            meta[name] = old[name]
        else:
            meta.pop(name, None)
    new["metadata"] = meta
    return new


def validated(
    new: Mapping[str, Any],
    result: Mapping[str, Any],
    *,
    subresource: str,
    has_status: bool,
) -> dict[str, Any]:
    """The server's answer (`result`) to the dry-run validation of `new`, with what the
    plan keeps itself: the object's identity and deletion state, and the rest of the
    object of a status write."""
    if subresource == "status":
        kept = copy.deepcopy(dict(new))
        if "status" in result:
            kept["status"] = copy.deepcopy(result["status"])
        return kept
    kept = copy.deepcopy(dict(result))
    if has_status or "status" not in kept:
        if "status" in new:
            kept["status"] = copy.deepcopy(new["status"])
        else:
            kept.pop("status", None)
    meta = dict(bodies.metadata(kept))
    old = bodies.metadata(new)
    for name in ("uid", "creationTimestamp", *_DELETION):
        if name in old:
            meta[name] = old[name]
    kept["metadata"] = meta
    return kept


def with_metadata(obj: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """`obj` with these metadata fields set (empty values left out)."""
    meta = {**bodies.metadata(obj), **{k: v for k, v in fields.items() if v}}
    return {**obj, "metadata": meta}


def decode(body: bytes | None) -> dict[str, Any] | None:
    """A request body as a JSON object, None when it is none."""
    if not body:
        return None
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
