"""What a plan's writes did, kept in memory: the objects as the plan has them.

Every write a planned reconcile makes is answered by the API server as a dry run: valid,
defaulted, and forgotten by the server at once. The overlay remembers each answer under the
object's key, so that later reads of the same run see the object as if the write had
happened: a GET finds it, a LIST includes it (or no longer includes a deleted one). Each
entry also keeps the object as the cluster had it before the plan's first write to it
(`live`), which is what the plan's diff compares against.

Keys are (API group, resource, namespace, name): one object read or written through two
API versions of its kind is one entry (served in the version it was last written in).

An object that gets `metadata.deletionTimestamp` and has no finalizers left is gone, as
in the API server. A dry run of a create answers without a `resourceVersion`; clients
expect every object to have one (`k8s_status` reads it), so an object only the plan has
gets one of the overlay's own (`1`, `2`, ...; the diff ignores resourceVersions).
Pure: the IO is `dryrun.py`'s.
"""

from __future__ import annotations

import copy
import enum
import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.structs import bodies

__all__ = ["Entry", "Found", "ObjectKey", "Overlay", "settled"]


@dataclass(frozen=True, order=True)
class ObjectKey:
    """One object: its API group, resource (plural), namespace ("" when cluster-scoped)
    and name."""

    group: str
    resource: str
    namespace: str
    name: str

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        kind = f"{self.resource}.{self.group}" if self.group else self.resource
        return f"{kind} {where}"


class Found(enum.Enum):
    """What the overlay knows of a key."""

    UNKNOWN = "unknown"  # nothing: ask the cluster
    PRESENT = "present"  # the plan has the object
    ABSENT = "absent"  # the plan deleted it (or it was never created)


@dataclass
class Entry:
    """One object the plan wrote: as the cluster had it, and as the plan has it now."""

    key: ObjectKey
    live: dict[str, Any] | None
    """Before the plan's first write (None: it did not exist)."""
    current: dict[str, Any] | None
    """Now (None: deleted)."""
    order: int
    writes: int = 0
    subresources: set[str] = field(default_factory=set)
    """Subresources written (`status`, `scale`); "" for the object itself."""


def settled(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """`obj`, or None when it is being deleted and no finalizer holds it any more."""
    if obj is not None and bodies.deletion_timestamp(obj) and not bodies.finalizers(obj):
        return None
    return obj


class Overlay:
    """The objects a plan wrote, by key."""

    def __init__(self) -> None:
        self._entries: dict[ObjectKey, Entry] = {}
        self._versions = itertools.count(1)

    def entry(self, key: ObjectKey) -> Entry | None:
        return self._entries.get(key)

    def entries(self) -> list[Entry]:
        """Every entry, in the order the plan first touched them."""
        return sorted(self._entries.values(), key=lambda entry: entry.order)

    def lookup(self, key: ObjectKey) -> tuple[Found, dict[str, Any] | None]:
        """What a GET of `key` answers: the object (a copy) when the plan has it."""
        entry = self._entries.get(key)
        if entry is None:
            return Found.UNKNOWN, None
        if entry.current is None:
            return Found.ABSENT, None
        return Found.PRESENT, copy.deepcopy(entry.current)

    def begin(self, key: ObjectKey, live: Mapping[str, Any] | None) -> Entry:
        """The entry of `key`, made from `live` (the cluster's object, None: none) on the
        plan's first touch."""
        entry = self._entries.get(key)
        if entry is None:
            snapshot = copy.deepcopy(dict(live)) if live is not None else None
            entry = Entry(
                key=key,
                live=snapshot,
                current=copy.deepcopy(snapshot),
                order=len(self._entries),
            )
            self._entries[key] = entry
        return entry

    def write(
        self,
        key: ObjectKey,
        obj: Mapping[str, Any],
        *,
        live: Mapping[str, Any] | None,
        subresource: str = "",
    ) -> dict[str, Any] | None:
        """Keep `obj` (a dry-run answer) as the object of `key`; `live` is the cluster's
        object, used when this is the plan's first touch of it. Returns the object as
        kept (None: it is gone, see `settled`)."""
        entry = self.begin(key, live)
        kept = copy.deepcopy(dict(obj))
        meta = kept.get("metadata")
        if isinstance(meta, dict) and not meta.get("resourceVersion"):
            meta["resourceVersion"] = str(next(self._versions))
        entry.current = settled(kept)
        entry.writes += 1
        entry.subresources.add(subresource)
        return copy.deepcopy(entry.current)

    def delete(self, key: ObjectKey, *, live: Mapping[str, Any] | None) -> None:
        """The object of `key` is gone from the plan's view."""
        entry = self.begin(key, live)
        entry.current = None
        entry.writes += 1
        entry.subresources.add("")

    def merge_list(
        self,
        *,
        group: str,
        resource: str,
        namespace: str,
        live_items: Iterable[Mapping[str, Any]],
        selects: Callable[[Mapping[str, Any]], bool],
    ) -> list[dict[str, Any]]:
        """The items of a LIST as the plan sees them: the cluster's (`live_items`, already
        selected by the server) with the plan's version of each written object instead,
        deleted ones left out, and objects only the plan has added when `selects` (the
        request's label and field selectors) takes them. `namespace` "" is all of them.
        Sorted by namespace and name, as the API server lists."""
        mine = {
            key: entry
            for key, entry in self._entries.items()
            if key.group == group
            and key.resource == resource
            and (not namespace or key.namespace == namespace)
        }
        items: dict[tuple[str, str], dict[str, Any]] = {}
        for item in live_items:
            key = ObjectKey(group, resource, bodies.namespace(item), bodies.name(item))
            if key not in mine:
                items[(key.namespace, key.name)] = dict(item)
        for key, entry in mine.items():
            if entry.current is not None and selects(entry.current):
                items[(key.namespace, key.name)] = copy.deepcopy(entry.current)
        return [items[position] for position in sorted(items)]
