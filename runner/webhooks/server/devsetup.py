"""`ansible-operator run` against a local cluster: webhooks served on loopback, registered
with the API server for as long as the operator runs.

In a cluster, `config/webhook` (a Service, the configurations) and cert-manager or OLM
wire the API server to the operator's pod. During development the operator runs on the
developer's machine next to the local control plane, so it does the wiring itself: a
serving certificate for 127.0.0.1 in its own run directory (signed by the local
cluster's CA when the API server is ours, else by a CA made for this process), a
ValidatingWebhookConfiguration and a MutatingWebhookConfiguration whose
`clientConfig.url` points at the loopback server with that CA, and, for conversion, the
CRD's `spec.conversion` pointed there too. On exit the configurations are deleted and
each CRD's `spec.conversion` is put back as it was.

The configurations are named after the project directory, so a restarted (or killed)
operator of the same project replaces its own leftovers instead of adding to them.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from runner.k8s.apierrors import Conflict, NotFound
from runner.k8s.client import KubeClient
from runner.structs import GVK
from runner.webhooks.declarations import Webhook
from runner.webhooks.manifests import admission_configuration, conversion
from runner.webhooks.server.https import CERT_FILE, KEY_FILE

__all__ = [
    "DevRegistration",
    "configuration_name",
    "is_loopback_server",
    "write_dev_certificates",
]

log = logging.getLogger("ansible-operator.webhooks")

VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration")
MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration")
CRD = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
_VALIDITY = datetime.timedelta(days=30)


def is_loopback_server(url: str) -> bool:
    """True when the API server is on this machine (it can then call our loopback)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def write_dev_certificates(directory: Path, *, now: datetime.datetime | None = None) -> bytes:
    """A new CA and a serving certificate for 127.0.0.1 and localhost in `directory`
    (`tls.crt`, `tls.key`, `ca.crt`); returns the CA certificate (PEM)."""
    # Imported here: `cryptography` (about 10 MiB) only for an operator serving webhooks.
    from runner.util.certauthority import CertificateAuthority, cert_pem, key_pem

    now = now or datetime.datetime.now(datetime.UTC)
    ca = CertificateAuthority.create(
        "ansible-operator webhook CA", key_type="ec", validity=_VALIDITY, path_length=0, now=now
    )
    key, cert = ca.issue_serving(
        "127.0.0.1",
        names=("localhost",),
        ips=("127.0.0.1",),
        key_type="ec",
        validity=_VALIDITY,
        now=now,
    )
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    (directory / KEY_FILE).write_bytes(key_pem(key, pkcs8=True))
    (directory / KEY_FILE).chmod(0o600)
    (directory / CERT_FILE).write_bytes(cert_pem(cert))
    (directory / "ca.crt").write_bytes(cert_pem(ca.cert))
    return cert_pem(ca.cert)


def configuration_name(project: Path) -> str:
    """`<project>-<hash>-dev`: one name per project directory."""
    slug = re.sub(r"[^a-z0-9-]+", "-", project.name.lower()).strip("-")[:40] or "operator"
    digest = hashlib.sha256(str(project).encode()).hexdigest()[:8]
    return f"{slug}-{digest}-dev"


class DevRegistration:
    """Registers `webhooks` at `url` (the loopback server) and removes them again."""

    def __init__(
        self,
        client: KubeClient,
        webhooks: Sequence[Webhook],
        *,
        url: str,
        ca_pem: bytes,
        name: str,
        namespaces: Sequence[str] | None = None,
    ) -> None:
        self._client = client
        self._webhooks = tuple(webhooks)
        self._url = url
        self._ca = base64.b64encode(ca_pem).decode()
        self._name = name
        self._namespaces = namespaces
        self._created: list[GVK] = []
        self._conversions: dict[str, Any] = {}  # CRD name -> its spec.conversion before

    async def apply(self) -> None:
        plurals = {
            w.gvk: (await self._client.resource(w.gvk)).plural
            for w in self._webhooks
            if w.type != "conversion"
        }
        client_config = {"url": self._url, "caBundle": self._ca}
        for gvk, kind in ((VALIDATING, "validating"), (MUTATING, "mutating")):
            chosen = [w for w in self._webhooks if w.type == kind]
            if not chosen:
                continue
            body = admission_configuration(
                gvk.kind,
                chosen,
                name=self._name,
                plurals=plurals,
                client_config=client_config,
                path_in_url=True,
                namespaces=self._namespaces,
            )
            await self._create_or_replace(gvk, body)
            self._created.append(gvk)
            log.info("registered %s %s -> %s", gvk.kind, self._name, self._url)
        for webhook in (w for w in self._webhooks if w.type == "conversion"):
            await self._point_conversion(webhook)
        log.info("webhooks registered with the API server at %s", self._url)

    async def remove(self) -> None:
        for gvk in self._created:
            try:
                await self._client.delete(gvk, name=self._name, namespace=None)
                log.info("removed %s %s", gvk.kind, self._name)
            except NotFound:
                pass
            except Exception as err:
                log.error("could not remove %s %s: %s", gvk.kind, self._name, err)
        for crd_name, before in self._conversions.items():
            try:
                await self._client.patch(
                    CRD,
                    name=crd_name,
                    namespace=None,
                    body=[{"op": "replace", "path": "/spec/conversion", "value": before}],
                    patch_type="json",
                )
                log.info("restored the conversion of CRD %s", crd_name)
            except Exception as err:
                log.error("could not restore the conversion of CRD %s: %s", crd_name, err)

    async def _create_or_replace(self, gvk: GVK, body: dict[str, Any]) -> None:
        try:
            await self._client.create(gvk, body)
        except Conflict:
            current = await self._client.get(gvk, name=self._name, namespace=None)
            body = {
                **body,
                "metadata": {
                    **body["metadata"],
                    "resourceVersion": current["metadata"]["resourceVersion"],
                },
            }
            await self._client.replace(gvk, obj=body)

    async def _point_conversion(self, webhook: Webhook) -> None:
        crds, _ = await self._client.list(CRD, namespace=None)
        found = [
            item
            for item in crds
            if item["spec"]["group"] == webhook.gvk.group
            and item["spec"]["names"]["kind"] == webhook.gvk.kind
        ]
        if not found:
            log.error(
                "no CRD for %s.%s: its conversion webhook is not registered",
                webhook.gvk.kind,
                webhook.gvk.group,
            )
            return
        crd = found[0]
        name = crd["metadata"]["name"]
        before = crd["spec"].get("conversion") or {"strategy": "None"}
        previous_url = str((before.get("webhook") or {}).get("clientConfig", {}).get("url", ""))
        if is_loopback_server(previous_url):
            before = {"strategy": "None"}  # our own leftover from a killed run
        wanted = conversion({"url": self._url + webhook.path, "caBundle": self._ca})
        await self._client.patch(
            CRD,
            name=name,
            namespace=None,
            body=[{"op": "replace", "path": "/spec/conversion", "value": wanted}],
            patch_type="json",
        )
        self._conversions[name] = before
        log.info("pointed the conversion of CRD %s at %s", name, self._url + webhook.path)
