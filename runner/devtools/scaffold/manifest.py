"""What the objects under a new project's config/ have in common: the kustomize labels,
the manager's pod selector, and the head of an object in the `system` namespace (which
config/default renames to `<project>-system`)."""

from __future__ import annotations

from typing import Any

__all__ = ["RBAC_API", "labels", "selector", "service_account_subject", "system_object"]

RBAC_API = "rbac.authorization.k8s.io"


def labels(project: str, *, manager: bool = False) -> dict[str, str]:
    """The labels every object carries; the manager's own objects add `control-plane`."""
    common = {"app.kubernetes.io/name": project, "app.kubernetes.io/managed-by": "kustomize"}
    return {"control-plane": "controller-manager", **common} if manager else common


def selector(project: str) -> dict[str, str]:
    """The labels that pick the manager's pods."""
    return {"control-plane": "controller-manager", "app.kubernetes.io/name": project}


def system_object(
    api_version: str, kind: str, name: str, project: str, *, manager: bool = False
) -> dict[str, Any]:
    """apiVersion, kind and metadata of a labelled object in the `system` namespace; the
    caller adds the body (keys keep their order in the written YAML)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "system",
            "labels": labels(project, manager=manager),
        },
    }


def service_account_subject() -> dict[str, str]:
    """The operator's ServiceAccount as a binding's subject."""
    return {"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}
