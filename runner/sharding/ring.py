"""The ring's vocabulary and arithmetic: names, labels, and who owns a key (pure).

Every replica holds a Lease of its own, labelled with the ring's name; the live Leases
are the ring's members. A CR's owner is chosen by rendezvous (highest random weight)
hashing of its key over the members: every replica with the same view of the members
computes the same owner, and a member joining or leaving moves only the keys it wins or
held (about 1/N of them). The owner is written on the CR as a label
(`shard.sharding.ansible-operator/<ring>: <member>`), so each replica lists and watches
only its own CRs with a server-side label selector, and a key moves only when a label is
rewritten: by its owner after it stopped working on it (a hand-off), or by a survivor
after the owner's Lease expired.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from runner.structs import GVK, NamespacedName, bodies

RING_LABEL = "sharding.ansible-operator/ring"
"""On each member's Lease: the ring it belongs to."""

LEAVING_ANNOTATION = "sharding.ansible-operator/leaving"
"""On the Lease of a member that is stopping ("true"): it still owns its keys until it has
handed them off, but none is assigned to it any more."""

_SHARD_PREFIX = "shard.sharding.ansible-operator/"
_HANDOFF_PREFIX = "handoff.sharding.ansible-operator/"

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE_UNSAFE = re.compile(r"[^a-z0-9-]+")


def check_ring_name(name: str) -> str | None:
    """Why `name` cannot name a ring (it is part of label keys and Lease names), or None."""
    if len(name) > 50:
        return f"{name!r} is longer than 50 characters"
    if not _NAME.match(name):
        return f"{name!r} is not a DNS label (lower-case letters, digits and '-')"
    return None


def shard_label(ring: str) -> str:
    """The label naming the member that owns a CR (and the dependents it created)."""
    return _SHARD_PREFIX + ring


def handoff_annotation(ring: str) -> str:
    """The annotation a hand-off leaves on a CR: when its next run was due, and how many
    failures its back-off counted (`Handoff`)."""
    return _HANDOFF_PREFIX + ring


def new_member(hostname: str) -> str:
    """A member name: the host (the pod's name) and a random suffix, as a label value.

    The suffix makes every process a new member: a restarted pod never resumes keys that
    a survivor may already have taken over."""
    host = _LABEL_VALUE_UNSAFE.sub("-", hostname.lower()).strip("-")[:40].strip("-")
    return f"{host or 'replica'}-{secrets.token_hex(3)}"


def lease_name(ring: str, member: str) -> str:
    return f"{ring}-{member}"


def key_of(gvk: GVK, key: NamespacedName) -> str:
    """What is hashed for a CR: group, kind, namespace and name (stable over its life)."""
    return f"{gvk.group}/{gvk.kind}/{key.namespace}/{key.name}"


def _weight(member: str, key: str) -> bytes:
    return hashlib.blake2b(f"{member}\x00{key}".encode(), digest_size=8).digest()


def owner_of(key: str, members: Collection[str]) -> str | None:
    """The member that owns `key` (None without members): the highest weight wins."""
    if not members:
        return None
    return max(members, key=lambda member: (_weight(member, key), member))


def own_selector(ring: str, member: str) -> str:
    """A label selector for the CRs `member` owns."""
    return f"{shard_label(ring)}={member}"


def unowned_selector(ring: str, members: Collection[str]) -> str:
    """A label selector for CRs that no live member owns: unlabelled ones, and those of
    members whose Lease is gone (`notin` also matches objects without the label)."""
    if not members:
        return f"!{shard_label(ring)}"
    return f"{shard_label(ring)} notin ({','.join(sorted(members))})"


def shard_of(obj: Mapping[str, Any], ring: str) -> str:
    """The member named by the CR's shard label ("" when unlabelled)."""
    return str(bodies.labels(obj).get(shard_label(ring)) or "")


@dataclass(frozen=True)
class Handoff:
    """The schedule of a key as its old owner had it: the next run due at `due` (Unix
    time; 0 when none was waiting) after `failures` failed runs in a row, for the CR at
    `generation` (None: not recorded, as by an older version)."""

    source: str
    due: float = 0.0
    failures: int = 0
    generation: int | None = None

    def encode(self) -> str:
        fields: dict[str, object] = {
            "from": self.source,
            "due": round(self.due, 3),
            "failures": self.failures,
        }
        if self.generation is not None:
            fields["generation"] = self.generation
        return json.dumps(fields, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> Handoff | None:
        """The hand-off in an annotation's value; None when it is not one."""
        try:
            raw = json.loads(text)
            generation = raw.get("generation")
            return cls(
                source=str(raw["from"]),
                due=float(raw["due"]),
                failures=int(raw["failures"]),
                generation=int(generation) if generation is not None else None,
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def applies_to(self, obj: Mapping[str, Any]) -> bool:
        """Whether the schedule still holds for `obj` as it arrives: not when the CR is
        being deleted or changed since the hand-off (its new generation, or its deletion,
        needs a run now, whatever the old owner had planned)."""
        if bodies.deletion_timestamp(obj):
            return False
        return self.generation is None or bodies.generation(obj) == self.generation


def handoff_of(obj: Mapping[str, Any], ring: str) -> Handoff | None:
    text = bodies.annotations(obj).get(handoff_annotation(ring))
    return Handoff.decode(text) if isinstance(text, str) else None
