"""A kubeconfig that authenticates as a service account, from an admin kubeconfig (pure).

Used to run an operator on this machine with exactly the permissions OLM granted its
Deployment's service account: the cluster entry (server, CA) is the admin
kubeconfig's current one, the user is a token from the TokenRequest API.
"""

from __future__ import annotations

from typing import Any

from runner.errors import ConfigError

Obj = dict[str, Any]


def _current_cluster(config: Obj) -> Obj:
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
    context = contexts.get(config.get("current-context"))
    if context is None:
        raise ConfigError("the kubeconfig has no current context")
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or []}
    cluster = clusters.get(context.get("cluster"))
    if cluster is None:
        raise ConfigError(f"the kubeconfig has no cluster {context.get('cluster')!r}")
    return dict(cluster)


def service_account_kubeconfig(
    admin: Obj, *, namespace: str, service_account: str, token: str
) -> Obj:
    """A kubeconfig for `system:serviceaccount:<namespace>:<service_account>`."""
    name = f"{namespace}-{service_account}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": _current_cluster(admin)}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {
                "name": name,
                "context": {"cluster": "cluster", "user": name, "namespace": namespace},
            }
        ],
        "current-context": name,
        "preferences": {},
    }
