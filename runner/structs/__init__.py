"""Small value types shared by every layer: identities (`gvk`) and object bodies
(`bodies`: their TypedDicts and the metadata accessors)."""

from runner.structs.gvk import GVK, NamespacedName

__all__ = ["GVK", "NamespacedName"]
