"""Group/version/kind and object keys: the identities the engine works with."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class GVK:
    """A Kubernetes group/version/kind; the core group is the empty string."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GVK:
        group, _, version = api_version.rpartition("/")
        return cls(group=group, version=version, kind=kind)

    def __str__(self) -> str:
        # The form controller-runtime prints and the Go operator's metrics use.
        return f"{self.group}/{self.version}, Kind={self.kind}"


@dataclass(frozen=True, order=True)
class NamespacedName:
    """The key of one object; `namespace` is empty for cluster-scoped objects."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name
