"""A certificate authority of our own and the serving certificates it signs.

The local cluster (its CA, the API server's and the registry's certificates) and
`ansible-operator run`'s webhook server (a CA made for one process) both need the same
two X.509 shapes; they differ only in key type, CA path length and validity, which are
the parameters here. Pure: keys and certificates in, PEM bytes out; callers write files.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
KeyType = Literal["rsa", "ec"]
# Certificates are valid from a little before "now", so that a clock a few seconds
# behind on the verifying side does not reject a certificate made a moment ago.
_BACKDATE = datetime.timedelta(minutes=5)


def new_key(key_type: KeyType) -> PrivateKey:
    """An RSA 2048 (what Kubernetes' service-account keys need) or an EC P-256 key."""
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: PrivateKey, *, pkcs8: bool = False) -> bytes:
    """The unencrypted PEM of `key`: PKCS#8, or the key type's traditional format."""
    formats = serialization.PrivateFormat
    return key.private_bytes(
        serialization.Encoding.PEM,
        formats.PKCS8 if pkcs8 else formats.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass(frozen=True)
class CertificateAuthority:
    """A CA's key and certificate: what signing needs."""

    key: PrivateKey
    cert: x509.Certificate

    @classmethod
    def create(
        cls,
        common_name: str,
        *,
        key_type: KeyType,
        validity: datetime.timedelta,
        path_length: int | None,
        now: datetime.datetime,
    ) -> CertificateAuthority:
        """A new self-signed CA; `path_length` 0 lets it sign only end certificates,
        None sets no limit."""
        key = new_key(key_type)
        name = _name(common_name)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        return cls(key, cert)

    @classmethod
    def from_pem(cls, key: bytes, cert: bytes, *, source: str) -> CertificateAuthority:
        """A CA loaded from its PEM files (`source` names them in errors)."""
        loaded = serialization.load_pem_private_key(key, password=None)
        if not isinstance(loaded, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
            raise ValueError(f"{source}: not an RSA or EC private key")
        return cls(loaded, x509.load_pem_x509_certificate(cert))

    def issue_serving(
        self,
        common_name: str,
        *,
        names: tuple[str, ...],
        ips: tuple[str, ...],
        key_type: KeyType,
        validity: datetime.timedelta,
        now: datetime.datetime,
    ) -> tuple[PrivateKey, x509.Certificate]:
        """A new key and a server certificate for the DNS `names` and `ips`."""
        key = new_key(key_type)
        builder = _serving(common_name, key, names=names, ips=ips, validity=validity, now=now)
        return key, builder.issuer_name(self.cert.subject).sign(self.key, hashes.SHA256())


def self_signed_serving(
    common_name: str,
    *,
    names: tuple[str, ...],
    ips: tuple[str, ...],
    key_type: KeyType,
    validity: datetime.timedelta,
    now: datetime.datetime,
) -> tuple[PrivateKey, x509.Certificate]:
    """A new key and a server certificate it signs itself: for a server whose clients
    do not verify it (there is no CA to give them)."""
    key = new_key(key_type)
    builder = _serving(common_name, key, names=names, ips=ips, validity=validity, now=now)
    return key, builder.issuer_name(_name(common_name)).sign(key, hashes.SHA256())


def _serving(
    common_name: str,
    key: PrivateKey,
    *,
    names: tuple[str, ...],
    ips: tuple[str, ...],
    validity: datetime.timedelta,
    now: datetime.datetime,
) -> x509.CertificateBuilder:
    """A server certificate for `key`, the DNS `names` and `ips`, but for its issuer."""
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    return (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    )
