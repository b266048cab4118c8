"""The new files `create webhook` writes for a kind's webhooks, rendered from their inputs:
the role task files, `config/webhook` (the Service, the kustomize wiring and the
Validating/MutatingWebhookConfiguration rendered from every webhooks.yaml entry by
`runner.webhooks.manifests`), `config/certmanager` (a self-signed Issuer and the serving
Certificate whose CA cert-manager injects), the manager's patch that mounts it, and a
CRD's conversion patch. Pure: texts in, texts out.
"""

from __future__ import annotations

from runner.devtools.scaffold import yamltext
from runner.devtools.scaffold.names import Resource
from runner.devtools.scaffold.plural import plural
from runner.webhooks import declarations, manifests

SERVICE = "webhook-service"
SECRET = "webhook-server-cert"
CERTIFICATE = "serving-cert"
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"

VALIDATION_ROLE = """\
---
# Validates {kind} objects ({what}). A failed task denies the request with its
# message; `webhook_warnings` (a string or a list) are shown to the client.
# Vars: the spec's keys (snake_case), {cr_var} (the object), operation,
# old_object, user_info, dry_run. See docs/webhooks.md.
- name: Refuse a negative size
  ansible.builtin.fail:
    msg: "spec.size must not be negative, got {{{{ size }}}}"
  when: operation != 'DELETE' and (size | default(0) | int) < 0

- name: Warn about a large size
  ansible.builtin.set_fact:
    webhook_warnings: "spec.size {{{{ size }}}} is large"
  when: operation != 'DELETE' and (size | default(0) | int) > 100
"""

DEFAULTING_ROLE = """\
---
# Defaults {kind} objects: set `webhook_object` to the object as it should be
# (the operator sends the API server the JSON patch), or `webhook_patch` to a JSON
# Patch list. Vars as for validation. See docs/webhooks.md.
- name: Default spec.size to 1
  ansible.builtin.set_fact:
    webhook_object: >-
      {{{{ {cr_var} | combine({{'spec': {{'size': size | default(1)}}}}, recursive=True) }}}}
"""

CONVERSION_ROLE = """\
---
# Converts {kind} objects between the CRD's versions: the object ({cr_var}, spec
# keys as snake_case vars) arrives in any version; set `webhook_object` to it in
# `desired_api_version`. Must depend on the object alone (results are cached).
- name: Convert (the versions share their fields so far)
  ansible.builtin.set_fact:
    webhook_object: "{{{{ {cr_var} | combine({{'apiVersion': desired_api_version}}) }}}}"
"""

WEBHOOK_KUSTOMIZATION = """\
# The webhook Service and configurations (`create webhook` regenerates manifests.yaml
# from webhooks.yaml).
---
resources:
  - manifests.yaml
  - service.yaml
configurations:
  - kustomizeconfig.yaml
"""

WEBHOOK_KUSTOMIZECONFIG = """\
# Lets namePrefix and namespace reach the Service named in the configurations.
---
nameReference:
  - kind: Service
    version: v1
    fieldSpecs:
      - kind: MutatingWebhookConfiguration
        group: admissionregistration.k8s.io
        path: webhooks/clientConfig/service/name
      - kind: ValidatingWebhookConfiguration
        group: admissionregistration.k8s.io
        path: webhooks/clientConfig/service/name
namespace:
  - kind: MutatingWebhookConfiguration
    group: admissionregistration.k8s.io
    path: webhooks/clientConfig/service/namespace
    create: true
  - kind: ValidatingWebhookConfiguration
    group: admissionregistration.k8s.io
    path: webhooks/clientConfig/service/namespace
    create: true
"""

CRD_KUSTOMIZECONFIG = """\
# Lets namePrefix and namespace reach the webhook Service a CRD's conversion names.
---
nameReference:
  - kind: Service
    version: v1
    fieldSpecs:
      - kind: CustomResourceDefinition
        version: v1
        group: apiextensions.k8s.io
        path: spec/conversion/webhook/clientConfig/service/name
namespace:
  - kind: CustomResourceDefinition
    version: v1
    group: apiextensions.k8s.io
    path: spec/conversion/webhook/clientConfig/service/namespace
    create: false
"""

CERTMANAGER_KUSTOMIZATION = """\
# A self-signed Issuer and the webhook's serving Certificate (needs cert-manager);
# cert-manager renews it and the operator reloads it without a restart.
---
resources:
  - certificate.yaml
"""


def service(project: str) -> str:
    """config/webhook/service.yaml: the Service the API server calls."""
    return yamltext.dump(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": SERVICE,
                "namespace": "system",
                "labels": {"app.kubernetes.io/name": project},
            },
            "spec": {
                "ports": [{"port": 443, "protocol": "TCP", "targetPort": 9443}],
                "selector": {
                    "control-plane": "controller-manager",
                    "app.kubernetes.io/name": project,
                },
            },
        },
        header="The Service the API server calls the webhooks through (HTTPS, port 443).",
    )


def certificate(namespace: str, prefix: str) -> str:
    """config/certmanager/certificate.yaml: the Issuer and the serving Certificate."""
    service = f"{prefix}{SERVICE}"
    return yamltext.dump_all(
        [
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "Issuer",
                "metadata": {"name": "selfsigned-issuer", "namespace": "system"},
                "spec": {"selfSigned": {}},
            },
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "Certificate",
                "metadata": {"name": CERTIFICATE, "namespace": "system"},
                "spec": {
                    "dnsNames": [
                        f"{service}.{namespace}.svc",
                        f"{service}.{namespace}.svc.cluster.local",
                    ],
                    "issuerRef": {"kind": "Issuer", "name": f"{prefix}selfsigned-issuer"},
                    "secretName": SECRET,
                },
            },
        ],
        header="The webhook server's certificate, in the Secret mounted at " + CERT_DIR + ".",
    )


def manager_patch() -> str:
    """The manager Deployment's patch: the webhook port and the certificate's Secret."""
    return yamltext.dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "controller-manager", "namespace": "system"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "manager",
                                "ports": [
                                    {
                                        "containerPort": 9443,
                                        "name": "webhook-server",
                                        "protocol": "TCP",
                                    }
                                ],
                                "volumeMounts": [
                                    {"mountPath": CERT_DIR, "name": "cert", "readOnly": True}
                                ],
                            }
                        ],
                        "volumes": [{"name": "cert", "secret": {"secretName": SECRET}}],
                    }
                }
            },
        },
        header="The manager serves the webhooks on 9443 with the certificate's Secret.",
    )


def conversion_patch(resource: Resource, inject: str) -> str:
    """The CRD patch that sends `resource`'s conversions to the operator."""
    conversion = manifests.conversion(
        {
            "service": {
                "name": SERVICE,
                "namespace": "system",
                "path": declarations.conversion_path(),
            }
        }
    )
    return yamltext.dump(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {
                "name": resource.crd_name,
                "annotations": {"cert-manager.io/inject-ca-from": inject},
            },
            "spec": {"conversion": conversion},
        },
        header=f"Conversions of {resource.kind} go to the operator's /convert webhook.",
    )


def admission_manifests(
    webhooks: tuple[declarations.Webhook, ...], resource: Resource, inject: str
) -> str:
    """config/webhook/manifests.yaml: the admission configurations of `webhooks`."""
    plurals = {w.gvk: _plural_of(w, resource) for w in webhooks}
    documents = []
    client = {"service": {"name": SERVICE, "namespace": "system"}}
    for kind, type_, name in (
        ("MutatingWebhookConfiguration", "mutating", manifests.MUTATING_NAME),
        ("ValidatingWebhookConfiguration", "validating", manifests.VALIDATING_NAME),
    ):
        chosen = [w for w in webhooks if w.type == type_]
        if not chosen:
            continue
        body = manifests.admission_configuration(
            kind, chosen, name=name, plurals=plurals, client_config=client, path_in_url=False
        )
        body["metadata"] = {
            "name": name,
            "annotations": {"cert-manager.io/inject-ca-from": inject},
        }
        documents.append(body)
    if not documents:
        return "# No admission webhooks yet (webhooks.yaml declares only conversion).\n"
    return yamltext.dump_all(
        documents,
        header="Rendered by `ansible-operator create webhook` from webhooks.yaml; "
        "kept in step by running it again.",
    )


def _plural_of(webhook: declarations.Webhook, resource: Resource) -> str:
    return resource.plural if webhook.gvk.kind == resource.kind else plural(webhook.gvk.kind)
