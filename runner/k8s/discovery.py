"""What discovery tells about the kinds an API server serves, and the paths of their
objects: `APIResource` and the reading of a group/version's discovery answer. Pure; the
client (`client.py`) asks the API server and caches the answers per group/version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

__all__ = ["APIResource", "resources_of"]


@dataclass(frozen=True)
class APIResource:
    """One kind as discovery describes it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    verbs: frozenset[str]
    subresources: frozenset[str]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The URL path of the collection (no `name`) or of one object; `namespace` is
        ignored for cluster-scoped kinds, and None means "all namespaces"."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


def resources_of(listing: Mapping[str, Any], *, group: str, version: str) -> dict[str, APIResource]:
    """The kinds of one group/version's discovery answer (an `APIResourceList`) by kind,
    each with the subresources listed beside it (`<plural>/<subresource>` entries)."""
    subresources: dict[str, set[str]] = {}
    found: dict[str, APIResource] = {}
    entries = listing.get("resources") or []
    for entry in entries:
        name = str(entry.get("name", ""))
        if "/" in name:
            plural, _, sub = name.partition("/")
            subresources.setdefault(plural, set()).add(sub)
    for entry in entries:
        name = str(entry.get("name", ""))
        if "/" in name or not entry.get("kind"):
            continue
        found[str(entry["kind"])] = APIResource(
            group=group,
            version=version,
            kind=str(entry["kind"]),
            plural=name,
            namespaced=bool(entry.get("namespaced")),
            verbs=frozenset(str(v) for v in entry.get("verbs") or ()),
            subresources=frozenset(subresources.get(name, ())),
        )
    return found
