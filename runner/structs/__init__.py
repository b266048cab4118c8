"""Small value types shared by every layer."""

from runner.structs.gvk import GVK, NamespacedName

__all__ = ["GVK", "NamespacedName"]
