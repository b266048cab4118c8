"""OLM v1's kinds and the objects `ansible-operator olm ... --v1` creates (pure).

OLM v1 (operator-controller and catalogd, `olm.operatorframework.io/v1`) installs a
bundle from a `ClusterCatalog` (a catalog image that catalogd unpacks and serves over
HTTPS) through a `ClusterExtension` (package, channel, the namespace to install into).
There are no Subscriptions, InstallPlans, CSVs or OperatorGroups on the cluster.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from runner.devtools.olm.olmobjects import MANAGED_BY, MANAGED_BY_LABEL, dns_label
from runner.structs import GVK, bodies

Obj = dict[str, Any]

GROUP = "olm.operatorframework.io"
CLUSTER_CATALOG = GVK(GROUP, "v1", "ClusterCatalog")
CLUSTER_EXTENSION = GVK(GROUP, "v1", "ClusterExtension")
MUTATING_WEBHOOK = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")

# As in OLM v1's release manifests.
SYSTEM_NAMESPACE = "olmv1-system"
SERVICE_ACCOUNTS = {
    "operator-controller": "operator-controller-controller-manager",
    "catalogd": "catalogd-controller-manager",
}
# catalogd's mutating webhook labels every ClusterCatalog with its own name, the label
# a ClusterExtension's catalog selector matches.
CATALOG_NAME_LABEL = "olm.operatorframework.io/metadata.name"
# operator-controller labels every object it installs with its ClusterExtension's name.
OWNER_NAME_LABEL = "olm.operatorframework.io/owner-name"
WEBHOOK_CONFIGURATION = "catalogd-mutating-webhook-configuration"
WEBHOOK_NAME = "inject-metadata-name.olm.operatorframework.io"
WEBHOOK_PATH = "/mutate-olm-operatorframework-io-v1-clustercatalog"
# How operator-controller's CRD upgrade-safety preflight words a refusal.
PREFLIGHT_REFUSAL = "validating upgrade for CRD"


def _metadata(name: str) -> Obj:
    return {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY}}


def catalog_name(package: str) -> str:
    return dns_label(f"{package}-catalog")


def extension_name(package: str) -> str:
    return dns_label(package)


def catalogd_webhook(port: int, ca_pem: bytes) -> Obj:
    """catalogd's mutating webhook, called at a loopback URL with the cluster's CA."""
    match = (
        "'name' in object.metadata && (!has(object.metadata.labels) || "
        f"!('{CATALOG_NAME_LABEL}' in object.metadata.labels) || "
        f"object.metadata.labels['{CATALOG_NAME_LABEL}'] != object.metadata.name)"
    )
    return {
        "apiVersion": MUTATING_WEBHOOK.api_version,
        "kind": MUTATING_WEBHOOK.kind,
        "metadata": _metadata(WEBHOOK_CONFIGURATION),
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1"],
                "clientConfig": {
                    "url": f"https://127.0.0.1:{port}{WEBHOOK_PATH}",
                    "caBundle": base64.b64encode(ca_pem).decode(),
                },
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "timeoutSeconds": 10,
                "rules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["clustercatalogs"],
                    }
                ],
                "matchConditions": [
                    {"name": "MissingOrIncorrectMetadataNameLabel", "expression": match}
                ],
            }
        ],
    }


def cluster_catalog(name: str, image: str) -> Obj:
    return {
        "apiVersion": CLUSTER_CATALOG.api_version,
        "kind": CLUSTER_CATALOG.kind,
        "metadata": _metadata(name),
        "spec": {"source": {"type": "Image", "image": {"ref": image}}},
    }


def cluster_extension(
    name: str, *, package: str, namespace: str, channel: str | None, catalog: str
) -> Obj:
    """A ClusterExtension of `package` from the catalog `catalog` only, following the
    catalog's upgrade edges (`replaces`, `skips`, `skipRange`)."""
    source: Obj = {
        "packageName": package,
        "selector": {"matchLabels": {CATALOG_NAME_LABEL: catalog}},
        "upgradeConstraintPolicy": "CatalogProvided",
    }
    if channel:
        source["channels"] = [channel]
    return {
        "apiVersion": CLUSTER_EXTENSION.api_version,
        "kind": CLUSTER_EXTENSION.kind,
        "metadata": _metadata(name),
        "spec": {
            "namespace": namespace,
            "source": {"sourceType": "Catalog", "catalog": source},
        },
    }


def registries_conf(insecure: list[str]) -> str:
    """containers-registries.conf(5) marking plain-HTTP registries (loopback ones)."""
    lines = ["unqualified-search-registries = []", ""]
    for location in insecure:
        lines += ["[[registry]]", f'location = "{location}"', "insecure = true", ""]
    return "\n".join(lines)


def condition(obj: Obj | None, kind: str) -> Obj | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def is_true(obj: Obj | None, kind: str) -> bool:
    found = condition(obj, kind)
    return bool(found and found.get("status") == "True")


def catalog_serving(catalog: Obj | None, image: str) -> bool:
    """catalogd serves this catalog, unpacked from `image` (its `status.resolvedSource`
    names the image by digest, so the generation tells that the new ref was unpacked)."""
    if catalog is None or not is_true(catalog, "Serving"):
        return False
    ref = (((catalog.get("spec") or {}).get("source") or {}).get("image") or {}).get("ref")
    generation = bodies.generation(catalog)
    progressing = condition(catalog, "Progressing") or {}
    current = progressing.get("observedGeneration") in (None, generation)
    return ref == image and current and progressing.get("reason") == "Succeeded"


@dataclass(frozen=True)
class ExtensionState:
    """What a ClusterExtension reports: the bundle installed and why it is not done."""

    installed_bundle: str | None
    installed_version: str | None
    installed: bool
    progressing_reason: str
    message: str

    @property
    def retrying(self) -> bool:
        """operator-controller hit an error it retries (a failed preflight, a pull)."""
        return self.progressing_reason in ("Retrying", "Blocked")

    @property
    def refused(self) -> bool:
        """A preflight check refused the bundle: retrying cannot help until the catalog
        offers another bundle (the CRD upgrade-safety check names the CRD it validated)."""
        return self.retrying and PREFLIGHT_REFUSAL in self.message


def extension_state(extension: Obj | None) -> ExtensionState:
    status = (extension or {}).get("status") or {}
    bundle = (status.get("install") or {}).get("bundle") or {}
    progressing = condition(extension, "Progressing") or {}
    installed = condition(extension, "Installed") or {}
    message = str(progressing.get("message") or installed.get("message") or "")
    return ExtensionState(
        installed_bundle=bundle.get("name"),
        installed_version=bundle.get("version"),
        installed=installed.get("status") == "True",
        progressing_reason=str(progressing.get("reason") or ""),
        message=message,
    )


def status_lines(kind: str, obj: Obj) -> list[str]:
    """One line for the object and one per condition (type, status, reason, message)."""
    lines = [f"  {kind} {bodies.name(obj)}"]
    if kind == CLUSTER_EXTENSION.kind:
        state = extension_state(obj)
        spec = obj.get("spec") or {}
        lines[0] += (
            f" (namespace {spec.get('namespace')}; installed "
            f"{state.installed_bundle or '-'} {state.installed_version or ''})".rstrip()
        )
    else:
        ref = (((obj.get("spec") or {}).get("source") or {}).get("image") or {}).get("ref")
        lines[0] += f" ({ref})"
    for cond in (obj.get("status") or {}).get("conditions") or []:
        message = " ".join(str(cond.get("message") or "").split())
        lines.append(
            f"    {cond.get('type')}={cond.get('status')} {cond.get('reason', '')}: {message}"
        )
    return lines


def healthy_extension(obj: Obj) -> bool:
    state = extension_state(obj)
    return state.installed and not state.retrying
