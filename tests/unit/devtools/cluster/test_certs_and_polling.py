"""The local cluster's certificates and the poll that waits on one of its processes."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from runner.devtools.cluster import certs
from runner.devtools.cluster import processes as process
from runner.errors import ClusterError


def _sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = set(names.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    return dns, ips


def test_serving_certificates_are_signed_by_the_cluster_ca(tmp_path: Path) -> None:
    pki = certs.ensure_pki(tmp_path / "pki")
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    apiserver = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    cert, key = tmp_path / "registry.crt", tmp_path / "registry.key"
    certs.ensure_serving_cert(pki, cert, key, common_name="registry", ips=("10.1.2.3",))
    registry = x509.load_pem_x509_certificate(cert.read_bytes())

    for served, common_name in ((apiserver, "kube-apiserver"), (registry, "registry")):
        assert served.issuer == ca.subject
        served.verify_directly_issued_by(ca)
        cn = served.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        assert cn == common_name
        usage = served.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert _sans(apiserver) == (
        {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
        {"127.0.0.1", "10.0.0.1"},
    )
    assert _sans(registry) == ({"localhost"}, {"10.1.2.3"})
    assert oct(key.stat().st_mode & 0o777) == oct(0o600)


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[process.RunningProcess]:
    log = tmp_path / "sleeper.log"
    log.write_text("last words\n")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    yield process.RunningProcess("sleeper", proc.pid, sys.executable, log)
    proc.kill()
    proc.wait()


def test_poll_returns_once_ready(sleeper: process.RunningProcess) -> None:
    answers = iter([False, False, True])
    assert process.poll_while_running(sleeper, lambda: next(answers), timeout=10, interval=0)


def test_poll_gives_up_after_the_timeout(sleeper: process.RunningProcess) -> None:
    assert not process.poll_while_running(sleeper, lambda: False, timeout=0.2, interval=0.01)


class _NotReady(http.server.BaseHTTPRequestHandler):
    """Answers like a kube-apiserver whose RBAC bootstrap has not finished."""

    def do_GET(self) -> None:
        body = b"readyz check failed"
        if self.path == "/readyz?verbose":
            body = (
                b"[+]ping ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: "
                b"not finished\n[-]informer-sync failed: 1 informer not started\n"
            )
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_timeout_names_the_failing_checks(sleeper: process.RunningProcess) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotReady)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = process.Endpoint(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        with pytest.raises(ClusterError) as failed:
            process.wait_until_ready(sleeper, endpoint, "/readyz", timeout=0.3)
    finally:
        server.shutdown()
        server.server_close()
    assert str(failed.value).startswith(
        f"sleeper did not answer {endpoint.url}/readyz within 0 s "
        "(failing: poststarthook/rbac/bootstrap-roles, informer-sync); last lines of "
    )
    assert str(failed.value).endswith("sleeper.log:\nlast words")
    # an endpoint that is gone adds nothing rather than hiding the log
    assert process.failing_checks(endpoint, "/readyz") == ""


def test_poll_fails_with_the_log_when_the_process_exits(tmp_path: Path) -> None:
    log = tmp_path / "gone.log"
    log.write_text("it broke\n")
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    gone = process.RunningProcess("gone", done.pid, sys.executable, log)
    tail = r"; last lines of .*gone\.log:\nit broke$"
    with pytest.raises(ClusterError, match=r"^gone exited during start-up" + tail):
        process.poll_while_running(gone, lambda: False, timeout=10)
    with pytest.raises(ClusterError, match=r"^the gone exited while waiting" + tail):
        process.poll_while_running(
            gone, lambda: False, timeout=10, exited="the gone exited while waiting"
        )


def test_the_apiserver_certificate_follows_the_service_range(tmp_path: Path) -> None:
    pki = certs.ensure_pki(tmp_path / "pki")
    ca_before = pki.ca_cert.read_bytes()
    assert "10.0.0.1" in _sans(x509.load_pem_x509_certificate(pki.serving_cert.read_bytes()))[1]

    certs.ensure_pki(tmp_path / "pki", service_ip="198.18.0.1")
    reissued = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    assert _sans(reissued)[1] == {"127.0.0.1", "198.18.0.1"}
    assert pki.ca_cert.read_bytes() == ca_before  # kubeconfigs and trust stay valid
    reissued.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_before))
