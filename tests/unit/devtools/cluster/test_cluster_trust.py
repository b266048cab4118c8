"""Recognising our local cluster by the CA a client trusts, and signing with its CA."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import padding

from runner.devtools.cluster.certs import ensure_pki
from runner.devtools.cluster.trust import local_cluster_signer, local_pki_trusted_with
from runner.webhooks.server.devsetup import write_dev_certificates


def test_the_local_clusters_ca_signs_the_serving_pair(tmp_path: Path) -> None:
    state = tmp_path / "state"
    pki = ensure_pki(state / "pki")
    signer = local_cluster_signer(str(pki.ca_cert), str(state / "kubeconfig"), environ={})
    assert signer is not None
    ca_pem = signer(tmp_path / "certs")
    assert ca_pem == pki.ca_cert.read_bytes()
    assert (tmp_path / "certs" / "ca.crt").read_bytes() == ca_pem
    ca = x509.load_pem_x509_certificate(ca_pem)
    served = x509.load_pem_x509_certificate((tmp_path / "certs" / "tls.crt").read_bytes())
    assert served.issuer == ca.subject
    public_key = ca.public_key()
    public_key.verify(  # type: ignore[union-attr,call-arg]
        served.signature,
        served.tbs_certificate_bytes,
        padding.PKCS1v15(),  # type: ignore[arg-type]
        served.signature_hash_algorithm,  # type: ignore[arg-type]
    )
    names = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}


def test_found_through_the_cluster_dir_setting(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "state" / "pki")
    environ = {"ANSIBLE_OPERATOR_CLUSTER_DIR": str(tmp_path / "state")}
    elsewhere = str(tmp_path / "home" / ".kube" / "config")
    assert local_cluster_signer(str(pki.ca_cert), elsewhere, environ) is not None
    other = {"ANSIBLE_OPERATOR_CLUSTER_DIR": str(tmp_path / "other")}
    assert local_cluster_signer(str(pki.ca_cert), elsewhere, other) is None


def test_a_foreign_cluster_gets_no_signer(tmp_path: Path) -> None:
    ensure_pki(tmp_path / "state" / "pki")
    foreign = write_dev_certificates(tmp_path / "foreign")
    assert local_pki_trusted_with(foreign, [tmp_path / "state"]) is None
    assert local_pki_trusted_with(b"not a certificate", [tmp_path / "state"]) is None
    ca_file = tmp_path / "foreign" / "ca.crt"
    kubeconfig = str(tmp_path / "state" / "kubeconfig")
    assert local_cluster_signer(str(ca_file), kubeconfig, environ={}) is None
    assert local_cluster_signer(None, kubeconfig, environ={}) is None


def test_a_ca_without_its_key_is_not_used(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "state" / "pki")
    pki.ca_key.unlink()
    assert local_pki_trusted_with(pki.ca_cert.read_bytes(), [tmp_path / "state"]) is None


def test_the_ca_is_found_in_a_bundle_of_several(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "state" / "pki")
    foreign = write_dev_certificates(tmp_path / "foreign")
    local = pki.ca_cert.read_bytes()
    for bundle in (foreign + local, local + b"\n" + foreign, local.replace(b"\n", b"\r\n")):
        assert local_pki_trusted_with(bundle, [tmp_path / "state"]) == pki
    truncated = local[: len(local) // 2]
    assert local_pki_trusted_with(truncated, [tmp_path / "state"]) is None
