"""OLM's kinds and the objects `ansible-operator olm` creates (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from runner.structs import GVK

Obj = dict[str, Any]

GROUP = "operators.coreos.com"
CSV = GVK(GROUP, "v1alpha1", "ClusterServiceVersion")
SUBSCRIPTION = GVK(GROUP, "v1alpha1", "Subscription")
INSTALL_PLAN = GVK(GROUP, "v1alpha1", "InstallPlan")
CATALOG_SOURCE = GVK(GROUP, "v1alpha1", "CatalogSource")
OPERATOR_GROUP = GVK(GROUP, "v1", "OperatorGroup")
OLM_CONFIG = GVK(GROUP, "v1", "OLMConfig")
CRD = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
NAMESPACE = GVK("", "v1", "Namespace")
SERVICE_ACCOUNT = GVK("", "v1", "ServiceAccount")
DEPLOYMENT = GVK("apps", "v1", "Deployment")
POD = GVK("", "v1", "Pod")
CLUSTER_ROLE = GVK("rbac.authorization.k8s.io", "v1", "ClusterRole")
CLUSTER_ROLE_BINDING = GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding")

# Where OLM itself lives, as in OLM's upstream manifests.
OLM_NAMESPACE = "olm"
OPERATORS_NAMESPACE = "operators"
GLOBAL_OPERATOR_GROUP = "global-operators"

# Marks what `ansible-operator olm` created, so cleanup removes only that.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "ansible-operator-olm"
OPERATOR_GROUP_NAME = "ansible-operator-og"
APPROVALS = ("Automatic", "Manual")


def _metadata(name: str, namespace: str | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def dns_label(text: str) -> str:
    """`text` made a DNS-1123 label (lower case, `-` for anything else, at most 63)."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return label[:63].rstrip("-") or "x"


def catalog_source_name(package: str) -> str:
    return dns_label(f"{package}-catalog")


def subscription_name(package: str) -> str:
    return dns_label(f"{package}-sub")


def namespace(name: str, annotations: dict[str, str] | None = None) -> Obj:
    meta = _metadata(name)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def operator_group(name: str, namespace: str, targets: list[str] | None) -> Obj:
    """An OperatorGroup; `targets` None selects all namespaces."""
    spec: Obj = {} if targets is None else {"targetNamespaces": list(targets)}
    return {
        "apiVersion": OPERATOR_GROUP.api_version,
        "kind": OPERATOR_GROUP.kind,
        "metadata": _metadata(name, namespace),
        "spec": spec,
    }


def olm_config() -> Obj:
    return {
        "apiVersion": OLM_CONFIG.api_version,
        "kind": OLM_CONFIG.kind,
        "metadata": _metadata("cluster"),
    }


def catalog_source(
    name: str,
    namespace: str,
    *,
    display_name: str,
    address: str = "",
    image: str = "",
    pod_config: Obj | None = None,
) -> Obj:
    """A CatalogSource the catalog operator dials directly at `address` (no registry
    pod), or whose registry pod it runs from `image` (with `pod_config` as
    `grpcPodConfig`: node selector, tolerations)."""
    spec: Obj = {
        "sourceType": "grpc",
        "displayName": display_name,
        "publisher": "ansible-operator (local)",
    }
    if image:
        spec["image"] = image
        spec["grpcPodConfig"] = {"securityContextConfig": "restricted", **(pod_config or {})}
    else:
        spec["address"] = address
    return {
        "apiVersion": CATALOG_SOURCE.api_version,
        "kind": CATALOG_SOURCE.kind,
        "metadata": _metadata(name, namespace),
        "spec": spec,
    }


def subscription(
    name: str,
    namespace: str,
    *,
    package: str,
    channel: str,
    source: str,
    approval: str,
    starting_csv: str | None,
    config: Obj | None = None,
) -> Obj:
    spec: Obj = {
        "name": package,
        "channel": channel,
        "source": source,
        "sourceNamespace": namespace,
        "installPlanApproval": approval,
    }
    if starting_csv:
        spec["startingCSV"] = starting_csv
    if config:
        spec["config"] = dict(config)
    return {
        "apiVersion": SUBSCRIPTION.api_version,
        "kind": SUBSCRIPTION.kind,
        "metadata": _metadata(name, namespace),
        "spec": spec,
    }


def token_request(seconds: int) -> Obj:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }


def conditions(obj: Obj) -> list[Obj]:
    return list((obj.get("status") or {}).get("conditions") or [])


def crd_established(crd: Obj) -> bool:
    return any(
        c.get("type") == "Established" and c.get("status") == "True" for c in conditions(crd)
    )


def deployment_service_accounts(csv: Obj) -> list[str]:
    """The service accounts of the CSV's deployments (OLM creates them), in order."""
    install = ((csv.get("spec") or {}).get("install") or {}).get("spec") or {}
    found: list[str] = []
    for deployment in install.get("deployments") or []:
        pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
        account = str(pod.get("serviceAccountName") or "default")
        if account not in found:
            found.append(account)
    return found


def pod_runs_image(pod: Mapping[str, Any], image: str) -> bool:
    """The pod's first container is `image` and the pod is Ready."""
    containers = (pod.get("spec") or {}).get("containers") or []
    if not containers or containers[0].get("image") != image:
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
