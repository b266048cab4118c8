"""The one edge where the runtime talks to the Kubernetes API.

Everything above this package sees raw JSON dicts and our own `APIError` tree; nothing
above it imports kubernetes_asyncio or aiohttp's client errors.
"""

# First: kubernetes_asyncio is imported below, and `slim` makes that import light.
import runner.k8s.slim  # noqa: F401  (imported for its effect)
from runner.k8s.apierrors import APIError, Conflict, Forbidden, Gone, Invalid, NotFound, Unavailable
from runner.k8s.client import KubeClient
from runner.k8s.discovery import APIResource

__all__ = [
    "APIError",
    "APIResource",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeClient",
    "NotFound",
    "Unavailable",
]
