"""Whether a client's API server is one of our local clusters, and certificates that
cluster trusts.

A client trusts the local cluster when the CA it verifies the API server with is the
one in that cluster's state dir (`pki/ca.crt`); the CA's key next to it can then sign
certificates the API server trusts too (e.g. the loopback webhook server of
`ansible-operator run`), with no CA of its own to hand around.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from runner.devtools.cluster.layout import PKI, default_state_dir

__all__ = ["local_cluster_signer", "local_pki_trusted_with", "write_serving_pair"]


_PEM_CERTIFICATE = re.compile(
    rb"-----BEGIN CERTIFICATE-----\s*(.+?)-----END CERTIFICATE-----", re.DOTALL
)


def _fingerprints(pem: bytes) -> set[bytes]:
    """SHA-256 of the DER of each certificate in `pem` (what X.509 tools call its
    fingerprint). Read with the standard library: every `run` against a kubeconfig with
    a CA file comes here, and `cryptography` would add about 10 MiB to the process."""
    try:
        return {
            hashlib.sha256(base64.b64decode(body, validate=False)).digest()
            for body in _PEM_CERTIFICATE.findall(pem)
        }
    except ValueError:  # binascii.Error: not base64
        return set()


def local_pki_trusted_with(ca_pem: bytes, state_dirs: Iterable[Path]) -> PKI | None:
    """The PKI of the first local cluster (by state dir) whose CA is in `ca_pem` and
    whose CA key is at hand; None for any other API server."""
    trusted = _fingerprints(ca_pem)
    if not trusted:
        return None
    for state_dir in state_dirs:
        pki = PKI.under(state_dir / "pki")
        if not (pki.ca_cert.is_file() and pki.ca_key.is_file()):
            continue
        if _fingerprints(pki.ca_cert.read_bytes()) & trusted:
            return pki
    return None


def write_serving_pair(pki: PKI, directory: Path) -> bytes:
    """A serving certificate for 127.0.0.1 and localhost signed by the cluster's CA, in
    `directory` as `tls.crt`, `tls.key` and `ca.crt`; returns the CA certificate (PEM)."""
    # Here, not at the top: only a webhook server on a local cluster makes certificates.
    from runner.devtools.cluster.certs import ensure_serving_cert

    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    ensure_serving_cert(
        pki,
        directory / "tls.crt",
        directory / "tls.key",
        common_name="127.0.0.1",
        ips=("127.0.0.1",),
    )
    ca_pem = pki.ca_cert.read_bytes()
    (directory / "ca.crt").write_bytes(ca_pem)
    return ca_pem


def local_cluster_signer(
    ca_file: str | None, kubeconfig: str | None, environ: Mapping[str, str]
) -> Callable[[Path], bytes] | None:
    """`write_serving_pair` with the local cluster's PKI when the client trusting
    `ca_file` talks to one; None otherwise. Looked for next to the client's `kubeconfig`
    (`cluster up` writes it into the state dir) and in the state dir `cluster` commands
    use ($ANSIBLE_OPERATOR_CLUSTER_DIR, else ./.cluster)."""
    if not ca_file:
        return None
    try:
        ca_pem = Path(ca_file).read_bytes()
    except OSError:
        return None
    candidates = [Path(kubeconfig).resolve().parent] if kubeconfig else []
    candidates.append(default_state_dir(environ))
    pki = local_pki_trusted_with(ca_pem, candidates)
    return None if pki is None else functools.partial(write_serving_pair, pki)
