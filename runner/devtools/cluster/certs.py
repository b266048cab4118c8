"""Keys and certificates for the local control plane, made with `cryptography`.

One self-signed CA signs the API server's serving certificate (valid for the loopback
address and the in-cluster service names); a separate RSA key pair signs service-account
tokens. Everything is written once into the state dir and reused on restart.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from runner.devtools.cluster.layout import PKI
from runner.util.certauthority import CertificateAuthority, cert_pem, key_pem, new_key

_VALIDITY = datetime.timedelta(days=365)
_SERVING_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


def _covers(cert: Path, ip: str) -> bool:
    names = (
        x509.load_pem_x509_certificate(cert.read_bytes())
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    return ip in {str(address) for address in names.get_values_for_type(x509.IPAddress)}


def ensure_pki(directory: Path, *, service_ip: str = "10.0.0.1") -> PKI:
    """Create the CA, serving certificate and service-account keys unless present. The
    serving certificate covers `service_ip` (the `kubernetes` Service's address, which
    in-cluster clients dial); one made for another address is made again."""
    pki = PKI.under(directory)
    if all(p.is_file() for p in vars(pki).values()):
        if not _covers(pki.serving_cert, service_ip):
            pki.serving_cert.unlink()
            _issue_apiserver_cert(pki, service_ip)
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca = CertificateAuthority.create(
        "ansible-operator-local-ca", key_type="rsa", validity=_VALIDITY, path_length=None, now=now
    )
    sa_key = new_key("rsa")
    _write(pki.ca_key, key_pem(ca.key), private=True)
    _write(pki.ca_cert, cert_pem(ca.cert))
    _issue_apiserver_cert(pki, service_ip)
    _write(pki.service_account_key, key_pem(sa_key), private=True)
    _write(
        pki.service_account_pub,
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return pki


def _issue_apiserver_cert(pki: PKI, service_ip: str) -> None:
    ensure_serving_cert(
        pki,
        pki.serving_cert,
        pki.serving_key,
        common_name="kube-apiserver",
        names=_SERVING_NAMES,
        ips=("127.0.0.1", service_ip),
    )


def ensure_serving_cert(
    pki: PKI,
    cert: Path,
    key: Path,
    *,
    common_name: str,
    ips: tuple[str, ...],
    names: tuple[str, ...] = ("localhost",),
) -> None:
    """A serving certificate for `ips` and `names` signed by the cluster's CA, made
    once (e.g. the local registry's, trusted by whoever trusts the cluster)."""
    if cert.is_file() and key.is_file():
        return
    ca = CertificateAuthority.from_pem(
        pki.ca_key.read_bytes(), pki.ca_cert.read_bytes(), source=str(pki.ca_key)
    )
    serving_key, serving_cert = ca.issue_serving(
        common_name,
        names=names,
        ips=ips,
        key_type="rsa",
        validity=_VALIDITY,
        now=datetime.datetime.now(datetime.UTC),
    )
    cert.parent.mkdir(parents=True, exist_ok=True)
    _write(key, key_pem(serving_key), private=True)
    _write(cert, cert_pem(serving_cert))
