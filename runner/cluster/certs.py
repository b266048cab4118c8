"""Keys and certificates for the local control plane, made with `cryptography`.

One self-signed CA signs the API server's serving certificate (valid for the loopback
address and the in-cluster service names); a separate RSA key pair signs service-account
tokens. Everything is written once into the state dir and reused on restart.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=365)
_SERVING_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
_SERVING_IPS = ("127.0.0.1", "10.0.0.1")


@dataclass(frozen=True)
class PKI:
    """Paths of the files the control plane is started with."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    service_account_key: Path
    service_account_pub: Path

    @classmethod
    def under(cls, directory: Path) -> PKI:
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            serving_cert=directory / "apiserver.crt",
            serving_key=directory / "apiserver.key",
            service_account_key=directory / "sa.key",
            service_account_pub=directory / "sa.pub",
        )


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, *, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)


def _serving_cert(
    ca_key: rsa.RSAPrivateKey,
    issuer: x509.Name,
    common_name: str,
    *,
    names: tuple[str, ...],
    ips: tuple[str, ...],
    now: datetime.datetime,
) -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    """A new key and a server certificate for `names` and `ips`, signed by the CA."""
    key = _new_key()
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return key, cert


def ensure_pki(directory: Path) -> PKI:
    """Create the CA, serving certificate and service-account keys unless present."""
    pki = PKI.under(directory)
    if all(p.is_file() for p in vars(pki).values()):
        return pki
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    ca_key = _new_key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ansible-operator-local-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    serving_key, serving_cert = _serving_cert(
        ca_key, ca_name, "kube-apiserver", names=_SERVING_NAMES, ips=_SERVING_IPS, now=now
    )

    sa_key = _new_key()
    _write(pki.ca_key, _key_pem(ca_key), private=True)
    _write(pki.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM))
    _write(pki.serving_key, _key_pem(serving_key), private=True)
    _write(pki.serving_cert, serving_cert.public_bytes(serialization.Encoding.PEM))
    _write(pki.service_account_key, _key_pem(sa_key), private=True)
    _write(
        pki.service_account_pub,
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    return pki


def ensure_serving_cert(
    pki: PKI, cert: Path, key: Path, *, common_name: str, ips: tuple[str, ...]
) -> None:
    """A serving certificate for `ips` (and localhost) signed by the cluster's CA, made
    once (e.g. the local registry's, trusted by whoever trusts the cluster)."""
    if cert.is_file() and key.is_file():
        return
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, rsa.RSAPrivateKey):
        raise ValueError(f"{pki.ca_key}: not an RSA key")
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    now = datetime.datetime.now(datetime.UTC)
    serving_key, serving_cert = _serving_cert(
        ca_key, ca_cert.subject, common_name, names=("localhost",), ips=ips, now=now
    )
    cert.parent.mkdir(parents=True, exist_ok=True)
    _write(key, _key_pem(serving_key), private=True)
    _write(cert, serving_cert.public_bytes(serialization.Encoding.PEM))
