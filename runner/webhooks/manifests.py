"""The API objects that point the API server at the webhooks, as data.

`ansible-operator run` registers them against a local cluster (a `url` at the loopback
server); `create webhook` writes them into `config/webhook` (a `service` reference,
the CA injected by cert-manager); `bundle generate` turns them into the CSV's
`webhookdefinitions`. One renderer keeps the three in step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.structs import GVK
from runner.webhooks.declarations import Webhook

__all__ = [
    "LABEL",
    "MUTATING_NAME",
    "VALIDATING_NAME",
    "admission_configuration",
    "conversion",
]

LABEL = "ansible-operator.operatorframework.io/webhooks"
VALIDATING_NAME = "validating-webhook-configuration"
MUTATING_NAME = "mutating-webhook-configuration"
"""The names controller-gen gives them in a Go operator's config/webhook/manifests.yaml."""


def admission_configuration(
    kind: str,
    webhooks: Sequence[Webhook],
    *,
    name: str,
    plurals: Mapping[GVK, str],
    client_config: Mapping[str, Any],
    path_in_url: bool,
    namespaces: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A Validating- or MutatingWebhookConfiguration for `webhooks` (all of one type).

    `client_config` is the part every webhook shares (`url` or `service`, `caBundle`); with
    `path_in_url` each webhook's path is appended to the URL, else set as the service's.
    With `namespaces`, only requests in those namespaces are sent (cluster-scoped ones
    too: a namespaceSelector does not apply to them)."""
    items = []
    for webhook in webhooks:
        config = dict(client_config)
        if path_in_url:
            config["url"] = str(config["url"]).rstrip("/") + webhook.path
        else:
            config["service"] = {**config["service"], "path": webhook.path}
        item: dict[str, Any] = {
            "name": webhook.name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": config,
            "failurePolicy": webhook.failure_policy,
            "sideEffects": webhook.side_effects,
            "timeoutSeconds": webhook.timeout_seconds,
            "matchPolicy": "Equivalent",
            "rules": [
                {
                    "apiGroups": [webhook.gvk.group],
                    "apiVersions": [webhook.gvk.version],
                    "operations": list(webhook.operations),
                    "resources": [plurals[webhook.gvk]],
                    "scope": "*",
                }
            ],
        }
        if namespaces:
            item["namespaceSelector"] = {
                "matchExpressions": [
                    {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "In",
                        "values": list(namespaces),
                    }
                ]
            }
        if webhook.type == "mutating":
            item["reinvocationPolicy"] = "Never"
        items.append(item)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "labels": {LABEL: "true"}},
        "webhooks": items,
    }


def conversion(client_config: Mapping[str, Any]) -> dict[str, Any]:
    """A CRD's `spec.conversion` sending conversions to the webhook at `client_config`
    (`url` or `service`, with its path, and `caBundle` when known)."""
    return {
        "strategy": "Webhook",
        "webhook": {"clientConfig": dict(client_config), "conversionReviewVersions": ["v1"]},
    }
