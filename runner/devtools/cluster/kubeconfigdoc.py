"""Render kubeconfig documents (pure)."""

from __future__ import annotations

import base64
from typing import Any


def admin_kubeconfig(*, server: str, ca_pem: bytes, token: str, name: str) -> dict[str, Any]:
    """A kubeconfig with one cluster, one token user and one current context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
        "preferences": {},
    }
