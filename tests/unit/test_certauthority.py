"""The shared CA helper with each caller's parameters: the local cluster's (RSA, no path
limit, a year) and the webhook server's development CA (EC, path length 0, 30 days)."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa, x25519

from runner.util.certauthority import (
    CertificateAuthority,
    KeyType,
    cert_pem,
    key_pem,
    self_signed_serving,
)

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


@pytest.mark.parametrize(
    ("key_type", "key_class", "path_length", "days"),
    [
        pytest.param("rsa", rsa.RSAPrivateKey, None, 365, id="cluster"),
        pytest.param("ec", ec.EllipticCurvePrivateKey, 0, 30, id="webhooks"),
    ],
)
def test_a_ca_signs_a_serving_certificate_with_the_callers_choices(
    key_type: KeyType, key_class: type, path_length: int | None, days: int
) -> None:
    validity = datetime.timedelta(days=days)
    ca = CertificateAuthority.create(
        "test CA", key_type=key_type, validity=validity, path_length=path_length, now=NOW
    )
    key, cert = ca.issue_serving(
        "server",
        names=("localhost",),
        ips=("127.0.0.1",),
        key_type=key_type,
        validity=validity,
        now=NOW,
    )

    assert isinstance(ca.key, key_class) and isinstance(key, key_class)
    constraints = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca and constraints.path_length == path_length
    cert.verify_directly_issued_by(ca.cert)
    assert cert.not_valid_after_utc == NOW + validity
    assert cert.not_valid_before_utc < NOW
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]

    again = CertificateAuthority.from_pem(key_pem(ca.key), cert_pem(ca.cert), source="ca.key")
    _key, reissued = again.issue_serving(
        "again", names=(), ips=("10.1.2.3",), key_type=key_type, validity=validity, now=NOW
    )
    reissued.verify_directly_issued_by(ca.cert)


def test_pkcs8_is_chosen_by_the_caller() -> None:
    ca = CertificateAuthority.create(
        "ca", key_type="ec", validity=datetime.timedelta(days=1), path_length=0, now=NOW
    )
    assert key_pem(ca.key, pkcs8=True).startswith(b"-----BEGIN PRIVATE KEY-----")
    assert key_pem(ca.key).startswith(b"-----BEGIN EC PRIVATE KEY-----")


def test_a_key_that_cannot_sign_is_refused_naming_its_file() -> None:
    pem = x25519.X25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(ValueError, match=r"pki/ca\.key: not an RSA or EC private key"):
        CertificateAuthority.from_pem(pem, b"", source="pki/ca.key")


def test_a_self_signed_serving_certificate_is_its_own_issuer() -> None:
    # The metrics server's certificate when no directory is given: nothing to trust it by.
    key, cert = self_signed_serving(
        "metrics",
        names=("localhost",),
        ips=("127.0.0.1",),
        key_type="ec",
        validity=datetime.timedelta(days=365),
        now=NOW,
    )
    assert cert.issuer == cert.subject
    cert.verify_directly_issued_by(cert)
    assert cert.public_key() == key.public_key()
    alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert alt.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in alt.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert cert.not_valid_after_utc - NOW == datetime.timedelta(days=365)
