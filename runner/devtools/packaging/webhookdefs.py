"""The CSV's `webhookdefinitions`, from the project's webhook configurations (pure).

Under OLM the operator does not ship its webhook configurations, Service or cert-manager
objects: OLM creates the Service, issues and rotates the certificate (mounted where the
operator reads it, `/tmp/k8s-webhook-server/serving-certs`), and registers the webhooks
from the CSV, as operator-sdk's `generate bundle` arranges it. So the
Validating/MutatingWebhookConfigurations of `config/webhook` become `webhookdefinitions`
entries, each CRD converted by a webhook a `ConversionWebhook` entry, and those objects,
the Service they name and cert-manager's objects stay out of the bundle.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from runner.devtools.packaging.projectconfig import Obj, ProjectInputs, group_of, name_of

__all__ = ["bundle_inputs", "webhook_definitions"]

_TYPES = {
    "ValidatingWebhookConfiguration": "ValidatingAdmissionWebhook",
    "MutatingWebhookConfiguration": "MutatingAdmissionWebhook",
}
_ADMISSION_GROUP = "admissionregistration.k8s.io"
_CERT_MANAGER = "cert-manager.io"
_INJECT = "cert-manager.io/inject-ca-from"
_SERVICE_PORT = 443
_TARGET_PORT = 9443
_COPIED = (
    "rules",
    "failurePolicy",
    "matchPolicy",
    "objectSelector",
    "sideEffects",
    "timeoutSeconds",
    "admissionReviewVersions",
    "reinvocationPolicy",
)


def _configurations(inputs: ProjectInputs) -> list[Obj]:
    return [
        obj
        for obj in inputs.others
        if group_of(obj) == _ADMISSION_GROUP and str(obj.get("kind")) in _TYPES
    ]


def _service_names(inputs: ProjectInputs) -> set[str]:
    names = set()
    for config in _configurations(inputs):
        for webhook in config.get("webhooks") or []:
            service = (webhook.get("clientConfig") or {}).get("service") or {}
            if service.get("name"):
                names.add(str(service["name"]))
    for crd in inputs.crds:
        service = _conversion_service(crd)
        if service.get("name"):
            names.add(str(service["name"]))
    return names


def _conversion_service(crd: Obj) -> dict[str, Any]:
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return {}
    client = (conversion.get("webhook") or {}).get("clientConfig") or {}
    return dict(client.get("service") or {})


def _named(name: str, references: set[str]) -> bool:
    """The Service a reference names: the same name, or that name with a kustomize
    `namePrefix` (rendered here without kustomize's webhook name references)."""
    return any(name == ref or name.endswith(f"-{ref}") for ref in references)


def _target_port(inputs: ProjectInputs, service_name: str) -> int:
    for obj in inputs.others:
        if obj.get("kind") == "Service" and _named(name_of(obj), {service_name}):
            for port in (obj.get("spec") or {}).get("ports") or []:
                target = port.get("targetPort")
                if isinstance(target, int):
                    return target
    return _TARGET_PORT


def webhook_definitions(inputs: ProjectInputs) -> list[dict[str, Any]]:
    """The `webhookdefinitions` entries of the project's webhooks (empty: none)."""
    deployment = name_of(inputs.deployments[0]) if inputs.deployments else ""
    definitions: list[dict[str, Any]] = []
    for config in _configurations(inputs):
        for webhook in config.get("webhooks") or []:
            service = (webhook.get("clientConfig") or {}).get("service") or {}
            entry: dict[str, Any] = {
                "type": _TYPES[str(config["kind"])],
                "generateName": webhook.get("name", ""),
                "deploymentName": deployment,
                "containerPort": _SERVICE_PORT,
                "targetPort": _target_port(inputs, str(service.get("name", ""))),
                "webhookPath": service.get("path", "/"),
            }
            entry.update({k: copy.deepcopy(webhook[k]) for k in _COPIED if k in webhook})
            definitions.append(entry)
    for crd in inputs.crds:
        service = _conversion_service(crd)
        if not service:
            continue
        conversion = crd["spec"]["conversion"]["webhook"]
        kind = str(((crd.get("spec") or {}).get("names") or {}).get("kind", "")).lower()
        definitions.append(
            {
                "type": "ConversionWebhook",
                "generateName": f"c{kind}.{(crd.get('spec') or {}).get('group', '')}",
                "deploymentName": deployment,
                "containerPort": _SERVICE_PORT,
                "targetPort": _target_port(inputs, str(service.get("name", ""))),
                "webhookPath": service.get("path", "/convert"),
                "conversionCRDs": [name_of(crd)],
                "admissionReviewVersions": list(
                    conversion.get("conversionReviewVersions") or ["v1"]
                ),
                "sideEffects": "None",
            }
        )
    return sorted(definitions, key=lambda d: (d["type"], d["generateName"]))


def bundle_inputs(inputs: ProjectInputs) -> ProjectInputs:
    """`inputs` without what OLM provides instead: the webhook configurations, the Service
    they call, cert-manager's objects, and the CRDs' webhook conversion (OLM sets it)."""
    services = _service_names(inputs)
    configurations = {id(obj) for obj in _configurations(inputs)}
    others = tuple(
        obj
        for obj in inputs.others
        if id(obj) not in configurations
        and group_of(obj) != _CERT_MANAGER
        and not (obj.get("kind") == "Service" and _named(name_of(obj), services))
    )
    crds = []
    for crd in inputs.crds:
        if not _conversion_service(crd):
            crds.append(crd)
            continue
        crd = copy.deepcopy(crd)
        crd["spec"].pop("conversion", None)
        annotations = (crd.get("metadata") or {}).get("annotations") or {}
        annotations.pop(_INJECT, None)
        if not annotations:
            (crd.get("metadata") or {}).pop("annotations", None)
        crds.append(crd)
    return dataclasses.replace(inputs, others=others, crds=tuple(crds))
