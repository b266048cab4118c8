"""Webhooks written as roles, called by the real kube-apiserver.

One operator serves every test of the module: a `Widget` CRD with two served versions
(v1alpha1 stored, v1beta1), a validating role (Fail), a mutating role (Ignore) and a
conversion role; `ansible-operator run` registers them at its loopback server against
the test cluster and removes them when it stops.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from support.kube import wait_for
from support.operator import BACKEND_ENV, OperatorProcess, install_crd, write_project

from runner.devtools.cluster.processes import free_port

GROUP = f"wh{uuid.uuid4().hex[:6]}.example.com"
KIND = "Widget"
PLURAL = "widgets"
CR_VAR = "_" + GROUP.replace(".", "_") + "_widget"
# Seconds the validating and mutating roles may take: ansible-runner starts a new
# ansible-playbook per run, several seconds on a loaded machine.
TIMEOUT = 20 if os.environ.get(BACKEND_ENV) == "runner" else 4

VALIDATE = """
- name: size is at most 5
  ansible.builtin.fail:
    msg: "size {{ size }} is larger than 5"
  when: operation != 'DELETE' and (size | default(0) | int) > 5
- name: protected widgets stay
  ansible.builtin.fail:
    msg: "{{ ansible_operator_meta.name }} is protected ({{ user_info.username }})"
  when: operation == 'DELETE' and (old_object.metadata.labels | default({})).protected is defined
- name: a hanging role
  ansible.builtin.command: sleep 60
  when: operation != 'DELETE' and (hang | default('')) == 'validating'
- name: warn about empty widgets
  ansible.builtin.set_fact:
    webhook_warnings: ["size 0 makes an empty widget"]
  when: operation != 'DELETE' and (size | default(1) | int) == 0
"""

DEFAULTS = f"""
- name: a hanging role
  ansible.builtin.command: sleep 60
  when: (hang | default('')) == 'mutating'
- name: default the size, note the dry run
  ansible.builtin.set_fact:
    webhook_object: >-
      {{{{ {CR_VAR} | combine({{'spec': {{'size': size | default(3)}},
          'metadata': {{'annotations': {{'example.com/dry-run': dry_run | string}}}}}},
          recursive=True) }}}}
"""

CONVERT = f"""
- name: size (v1alpha1) <-> replicas (v1beta1)
  vars:
    source: "{{{{ {CR_VAR} }}}}"
    spec: "{{{{ source.spec | default({{}}) }}}}"
    beta: "{{{{ desired_api_version is search('/v1beta1$') }}}}"
    old_key: "{{{{ 'size' if beta else 'replicas' }}}}"
    new_key: "{{{{ 'replicas' if beta else 'size' }}}}"
    moved: >-
      {{{{ spec | dict2items | rejectattr('key', 'equalto', old_key) | items2dict
         | combine({{new_key: spec[old_key]}} if old_key in spec else {{}}) }}}}
  ansible.builtin.set_fact:
    webhook_object: >-
      {{{{ source | combine({{'apiVersion': desired_api_version, 'spec': moved}}) }}}}
"""


def _crd() -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "plural": PLURAL,
                "singular": "widget",
                "listKind": "WidgetList",
            },
            "scope": "Namespaced",
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": True, "schema": schema},
                {"name": "v1beta1", "served": True, "storage": False, "schema": schema},
            ],
        },
    }


def _kubectl(kubeconfig: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner.cli", "cluster", "kubectl", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        timeout=60,
        check=False,
    )


def _issue(cert_dir: Path, ca_dir: Path, serial_hint: str) -> None:
    """A new serving certificate for 127.0.0.1 signed by the CA in `ca_dir`, written
    into `cert_dir` the way the kubelet updates a Secret volume (rename into place)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ca_key = serialization.load_pem_private_key((ca_dir / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((ca_dir / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, serial_hint)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
    )
    staging = cert_dir.parent / f"staging-{serial_hint}"
    staging.mkdir()
    (staging / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (staging / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (staging / "ca.crt").write_bytes((ca_dir / "ca.crt").read_bytes())
    for name in ("tls.key", "tls.crt", "ca.crt"):
        os.replace(staging / name, cert_dir / name)
    staging.rmdir()


def _ca(directory: Path) -> None:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test webhook CA")])
    now = datetime.datetime.now(datetime.UTC)
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True)
    (directory / "ca.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (directory / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))


class Served:
    def __init__(
        self,
        proc: OperatorProcess,
        kubeconfig: Path,
        cert_dir: Path,
        ca_dir: Path,
        metrics_port: int,
    ) -> None:
        self.proc = proc
        self.kubeconfig = kubeconfig
        self.cert_dir = cert_dir
        self.ca_dir = ca_dir
        self.metrics_port = metrics_port

    def webhook_port(self) -> int:
        for line in self.proc.log().splitlines():
            if "webhook(s) on https://" in line:
                return int(line.rsplit(":", 1)[1].split()[0])
        raise AssertionError("the webhook server did not start:\n" + self.proc.log()[-3000:])

    def metrics(self) -> str:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics") as resp:
            return str(resp.read().decode())


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, kubeconfig: Path, dyn: Any
) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("webhooks")
    install_crd(dyn, _crd())
    project = write_project(
        root / "project",
        watches=[],
        roles={"validate": VALIDATE, "defaults": DEFAULTS, "convert": CONVERT},
    )
    (project / "webhooks.yaml").write_text(
        yaml.safe_dump(
            [
                {
                    "group": GROUP,
                    "version": "v1alpha1",
                    "kind": KIND,
                    "validating": {
                        "role": "validate",
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "timeout": f"{TIMEOUT}s",
                    },
                    "mutating": {
                        "role": "defaults",
                        "failurePolicy": "Ignore",
                        "timeout": f"{TIMEOUT}s",
                    },
                    "conversion": {"role": "convert"},
                }
            ]
        )
    )
    ca_dir, cert_dir = root / "ca", root / "certs"
    _ca(ca_dir)
    cert_dir.mkdir()
    _issue(cert_dir, ca_dir, "first")
    metrics_port = free_port()
    proc = OperatorProcess(
        project,
        kubeconfig=kubeconfig,
        log=root / "operator.log",
        args=[
            "--webhook-bind-address",
            "127.0.0.1:0",
            "--webhook-cert-dir",
            str(cert_dir),
            "--metrics-bind-address",
            f"127.0.0.1:{metrics_port}",
        ],
        env={"ANSIBLE_GATHERING": "explicit"},
    )
    handle = Served(proc, kubeconfig, cert_dir, ca_dir, metrics_port)
    try:
        crds = dyn.resources.get(
            api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
        )

        def registered() -> bool:
            assert proc.running(), proc.log()[-3000:]
            conversion = crds.get(name=f"{PLURAL}.{GROUP}").to_dict()["spec"]["conversion"]
            return conversion.get("strategy") == "Webhook"

        wait_for(registered, timeout=90, message="webhooks registered")
        yield handle
    finally:
        code = proc.stop()
        print(proc.log()[-6000:])
        try:
            crd = crds.get(name=f"{PLURAL}.{GROUP}").to_dict()
            cleaned = crd["spec"]["conversion"].get("strategy") == "None"
        finally:
            crds.delete(name=f"{PLURAL}.{GROUP}")
        assert code == 0
        assert cleaned, "the CRD's conversion was not restored on exit"


@pytest.fixture
def widgets(served: Served, dyn: Any) -> Any:
    return dyn.resources.get(api_version=f"{GROUP}/v1alpha1", kind=KIND)


def _widget(name: str, namespace: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": spec,
    }


def _create_until_admitted(widgets: Any, body: dict[str, Any]) -> Any:
    """The first create after registration may reach the API server before its webhook
    configuration informer has them: retry until a webhook answered (the annotation the
    mutating role sets is there)."""

    def attempt() -> Any:
        created = widgets.create(body=body, namespace=body["metadata"]["namespace"])
        annotations = created.to_dict()["metadata"].get("annotations") or {}
        if "example.com/dry-run" in annotations:
            return created
        widgets.delete(name=body["metadata"]["name"], namespace=body["metadata"]["namespace"])
        return None

    return wait_for(attempt, timeout=3 * TIMEOUT + 20, message="the mutating webhook called")


def test_defaulting_is_visible_on_the_stored_object(widgets: Any, namespace: str) -> None:
    created = _create_until_admitted(widgets, _widget("plain", namespace, {"colour": "red"}))
    stored = widgets.get(name="plain", namespace=namespace).to_dict()
    assert stored["spec"] == {"colour": "red", "size": 3}
    assert stored["metadata"]["annotations"]["example.com/dry-run"] == "False"
    assert created.to_dict()["spec"]["size"] == 3


def test_validating_role_denies_with_its_message(widgets: Any, namespace: str) -> None:
    _create_until_admitted(widgets, _widget("ok", namespace, {"size": 2}))
    with pytest.raises(ApiException) as denied:
        widgets.create(body=_widget("big", namespace, {"size": 9}), namespace=namespace)
    assert denied.value.status == 403
    assert "size 9 is larger than 5" in str(denied.value.body)
    assert f"vwidget.{GROUP}" in str(denied.value.body)

    # Update: denied the same way; the stored object keeps its size.
    with pytest.raises(ApiException) as update:
        widgets.patch(
            name="ok",
            namespace=namespace,
            body={"spec": {"size": 7}},
            content_type="application/merge-patch+json",
        )
    assert "size 7 is larger than 5" in str(update.value.body)
    assert widgets.get(name="ok", namespace=namespace).spec.size == 2


def test_delete_is_validated_with_old_object_and_user_info(widgets: Any, namespace: str) -> None:
    _create_until_admitted(
        widgets, _widget("keep", namespace, {"size": 1}, labels={"protected": "yes"})
    )
    _create_until_admitted(widgets, _widget("drop", namespace, {"size": 1}))
    with pytest.raises(ApiException) as denied:
        widgets.delete(name="keep", namespace=namespace)
    assert "keep is protected (" in str(denied.value.body)
    widgets.delete(name="drop", namespace=namespace)
    # Unblock the namespace's clean-up: drop the label (an UPDATE the role allows).
    widgets.patch(
        name="keep",
        namespace=namespace,
        body={"metadata": {"labels": None}},
        content_type="application/merge-patch+json",
    )


def test_warnings_reach_the_client(served: Served, widgets: Any, namespace: str) -> None:
    _create_until_admitted(widgets, _widget("probe", namespace, {"size": 1}))
    manifest = json.dumps(_widget("empty", namespace, {"size": 0}))
    result = _kubectl(served.kubeconfig, "create", "-f", "-", stdin=manifest)
    assert result.returncode == 0, result.stderr
    assert "Warning: size 0 makes an empty widget" in result.stderr


def test_server_side_dry_run(served: Served, widgets: Any, namespace: str) -> None:
    _create_until_admitted(widgets, _widget("first", namespace, {"size": 1}))
    manifest = json.dumps(_widget("dry", namespace, {"colour": "blue"}))
    result = _kubectl(
        served.kubeconfig, "apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=manifest
    )
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["spec"]["size"] == 3
    assert shown["metadata"]["annotations"]["example.com/dry-run"] == "True"
    with pytest.raises(ApiException) as missing:
        widgets.get(name="dry", namespace=namespace)
    assert missing.value.status == 404

    too_big = json.dumps(_widget("dry-big", namespace, {"size": 8}))
    result = _kubectl(served.kubeconfig, "apply", "--dry-run=server", "-f", "-", stdin=too_big)
    assert result.returncode != 0
    assert "size 8 is larger than 5" in result.stderr


def test_conversion_between_served_versions(
    served: Served, dyn: Any, widgets: Any, namespace: str
) -> None:
    if os.environ.get(BACKEND_ENV) != "runner":
        # Its role is all set_fact: it runs warm (the others run a command: full runs).
        log = served.proc.log()
        assert f"conversion webhook for {KIND}.{GROUP}: runs warm" in log
        assert f"validating webhook for {KIND}.{GROUP}: runs each request as a full run" in log
    _create_until_admitted(widgets, _widget("conv-a", namespace, {"size": 4}))
    beta = dyn.resources.get(api_version=f"{GROUP}/v1beta1", kind=KIND)
    # Written in v1beta1 (stored as v1alpha1: converted, then admitted in v1alpha1).
    beta.create(
        body={
            "apiVersion": f"{GROUP}/v1beta1",
            "kind": KIND,
            "metadata": {"name": "conv-b", "namespace": namespace},
            "spec": {"replicas": 2, "colour": "green"},
        },
        namespace=namespace,
    )
    assert beta.get(name="conv-a", namespace=namespace).to_dict()["spec"] == {"replicas": 4}
    as_alpha = widgets.get(name="conv-b", namespace=namespace).to_dict()
    assert as_alpha["spec"] == {"size": 2, "colour": "green"}
    assert as_alpha["apiVersion"] == f"{GROUP}/v1alpha1"
    as_beta = beta.get(name="conv-b", namespace=namespace).to_dict()
    assert as_beta["spec"] == {"replicas": 2, "colour": "green"}
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    assert crds.get(name=f"{PLURAL}.{GROUP}").to_dict()["status"]["storedVersions"] == ["v1alpha1"]
    # The validating webhook still sees v1alpha1 (matchPolicy Equivalent) for v1beta1 writes.
    with pytest.raises(ApiException) as denied:
        beta.patch(
            name="conv-b",
            namespace=namespace,
            body={"spec": {"replicas": 6}},
            content_type="application/merge-patch+json",
        )
    assert "size 6 is larger than 5" in str(denied.value.body)


def test_hanging_roles_hit_the_timeout_and_the_failure_policy_decides(
    served: Served, widgets: Any, namespace: str
) -> None:
    _create_until_admitted(widgets, _widget("before", namespace, {"size": 1}))
    started = time.monotonic()
    with pytest.raises(ApiException) as denied:  # validating: failurePolicy Fail
        widgets.create(
            body=_widget("stuck", namespace, {"hang": "validating"}), namespace=namespace
        )
    assert time.monotonic() - started < TIMEOUT + 5
    body = str(denied.value.body)
    assert f"did not finish within {TIMEOUT}s" in body and "failurePolicy Fail" in body

    # mutating: failurePolicy Ignore -> admitted unchanged, and the client is told why.
    created = widgets.create(
        body=_widget("slow", namespace, {"hang": "mutating", "size": 1}), namespace=namespace
    )
    assert "example.com/dry-run" not in (created.to_dict()["metadata"].get("annotations") or {})
    metrics = served.metrics()
    assert (
        f'ansible_operator_webhook_failures_total{{policy="Fail",reason="timeout",webhook="vwidget.{GROUP}"}}'
        in metrics
    )
    assert (
        f'ansible_operator_webhook_failures_total{{policy="Ignore",reason="timeout",webhook="mwidget.{GROUP}"}}'
        in metrics
    )
    log = served.proc.log()
    assert "failurePolicy Ignore" in log and "failurePolicy Fail" in log


def _served_certificate(port: int) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port)) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def test_certificate_rotation_without_restart(served: Served, widgets: Any, namespace: str) -> None:
    port = served.webhook_port()
    before = _served_certificate(port)
    pid = served.proc.process.pid
    _issue(served.cert_dir, served.ca_dir, "rotated")
    wait_for(
        lambda: _served_certificate(port) != before, timeout=20, message="new certificate served"
    )
    assert served.proc.process.pid == pid and served.proc.running()
    # The API server (trusting the CA) still reaches the webhooks.
    with pytest.raises(ApiException) as denied:
        widgets.create(body=_widget("after-rotation", namespace, {"size": 11}), namespace=namespace)
    assert "size 11 is larger than 5" in str(denied.value.body)
    assert "webhook serving certificate reloaded" in served.proc.log()
