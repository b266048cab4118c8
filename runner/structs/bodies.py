"""Kubernetes object bodies: their shapes as TypedDicts, and reading their metadata.

Objects reach us as the API server's JSON (`dict[str, Any]`) and are never turned into
model classes (that costs time on every event). The TypedDicts below say which fields
the runtime reads and writes; the accessors read an object's metadata the one way the
whole code base does, tolerating what a body from a role or a file may lack: a missing
or non-mapping `metadata`, missing fields, `null` values and fields of the wrong type all
read as empty. Only `object_key` insists, on a name, since a key without one is a bug.
"""

# No `from __future__ import annotations`: it would be shadowed by `annotations()` below.
from collections.abc import Mapping
from typing import Any, TypedDict

from runner.structs.gvk import NamespacedName

__all__ = [
    "Condition",
    "KubeList",
    "KubeObject",
    "ListMeta",
    "ObjectMeta",
    "OwnerReference",
    "Status",
    "WatchEvent",
    "annotations",
    "creation_timestamp",
    "deletion_timestamp",
    "finalizers",
    "generation",
    "labels",
    "metadata",
    "name",
    "namespace",
    "object_key",
    "owner_references",
    "resource_version",
    "uid",
]


class OwnerReference(TypedDict, total=False):
    """`metadata.ownerReferences[]`."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool
    blockOwnerDeletion: bool


class ObjectMeta(TypedDict, total=False):
    """`metadata`: the fields the runtime reads or writes."""

    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    ownerReferences: list[OwnerReference]
    managedFields: list[dict[str, Any]]


class KubeObject(TypedDict, total=False):
    """Any object: its type, metadata, and the free-form rest."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: dict[str, Any]
    status: dict[str, Any]


# `metadata` of a list (`continue` is a keyword, hence the functional form).
ListMeta = TypedDict(
    "ListMeta", {"resourceVersion": str, "continue": str, "remainingItemCount": int}, total=False
)


class KubeList(TypedDict, total=False):
    """A `<Kind>List`: a LIST's answer."""

    apiVersion: str
    kind: str
    metadata: ListMeta
    items: list[KubeObject]


class Status(TypedDict, total=False):
    """A `Status`: what the API server answers for an error (and a delete, at times)."""

    apiVersion: str
    kind: str
    status: str
    message: str
    reason: str
    details: dict[str, Any]
    code: int


class WatchEvent(TypedDict, total=False):
    """One line of a watch: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (whose object is
    a Status)."""

    type: str
    object: KubeObject


class Condition(TypedDict, total=False):
    """`status.conditions[]` as the runtime writes them (`ansibleResult` is its own)."""

    type: str
    status: str
    lastTransitionTime: str
    ansibleResult: dict[str, Any]
    reason: str
    message: str


def metadata(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """`obj`'s metadata; empty when `obj` is None or has none (or not a mapping)."""
    meta = obj.get("metadata") if obj is not None else None
    return meta if isinstance(meta, Mapping) else {}


def _text(obj: Mapping[str, Any] | None, field: str) -> str:
    value = metadata(obj).get(field)
    return value if isinstance(value, str) else ""


def name(obj: Mapping[str, Any] | None) -> str:
    """`metadata.name`, or ""."""
    return _text(obj, "name")


def namespace(obj: Mapping[str, Any] | None) -> str:
    """`metadata.namespace`, or "" (a cluster-scoped object, or one not yet placed)."""
    return _text(obj, "namespace")


def uid(obj: Mapping[str, Any] | None) -> str:
    """`metadata.uid`, or ""."""
    return _text(obj, "uid")


def resource_version(obj: Mapping[str, Any] | None) -> str:
    """`metadata.resourceVersion`, or ""."""
    return _text(obj, "resourceVersion")


def creation_timestamp(obj: Mapping[str, Any] | None) -> str:
    """`metadata.creationTimestamp` (RFC 3339), or ""."""
    return _text(obj, "creationTimestamp")


def deletion_timestamp(obj: Mapping[str, Any] | None) -> str:
    """`metadata.deletionTimestamp` (RFC 3339), or "" when the object is not being deleted."""
    return _text(obj, "deletionTimestamp")


def generation(obj: Mapping[str, Any] | None) -> int | None:
    """`metadata.generation`, or None (objects without a spec/status split have none)."""
    value = metadata(obj).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    """`metadata.labels`, or an empty mapping."""
    value = metadata(obj).get("labels")
    return value if isinstance(value, Mapping) else {}


def annotations(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    """`metadata.annotations`, or an empty mapping."""
    value = metadata(obj).get("annotations")
    return value if isinstance(value, Mapping) else {}


def finalizers(obj: Mapping[str, Any] | None) -> list[str]:
    """`metadata.finalizers` as a new list (to edit freely), or an empty one."""
    value = metadata(obj).get("finalizers")
    return list(value) if isinstance(value, list) else []


def owner_references(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """`metadata.ownerReferences` (entries that are not mappings skipped), or []."""
    value = metadata(obj).get("ownerReferences")
    if not isinstance(value, list):
        return []
    return [ref for ref in value if isinstance(ref, Mapping)]


def object_key(obj: Mapping[str, Any]) -> NamespacedName:
    """The object's namespace/name key; KeyError when it has no `metadata.name`."""
    meta = metadata(obj)
    return NamespacedName(namespace=str(meta.get("namespace") or ""), name=str(meta["name"]))
