"""The operator's two HTTP endpoints for the cluster: metrics and health probes.

Bind addresses are written as the Go operator's flags take them: `:8443` (all
interfaces), `127.0.0.1:8080`, `[::1]:8080`, and `0` to switch the server off.

Metrics may be served over HTTPS (`--metrics-secure`: the certificate from
`--metrics-cert-path`, or a self-signed one made at start-up) and, with
`--metrics-require-rbac`, only to callers whose bearer token the API server accepts
(TokenReview) and who may `get` the `/metrics` path (SubjectAccessReview) — what
Prometheus in a cluster does with its service account token.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from runner.errors import ConfigError
from runner.k8s.apierrors import APIError
from runner.k8s.client import KubeClient
from runner.structs import GVK

log = logging.getLogger("ansible-operator.serving")

Authorizer = Callable[[str], Awaitable[tuple[bool, str]]]
"""Given a bearer token: may its holder read the metrics? And why not."""

Readiness = Callable[[], tuple[bool, str]]

TOKEN_REVIEW = GVK("authentication.k8s.io", "v1", "TokenReview")
ACCESS_REVIEW = GVK("authorization.k8s.io", "v1", "SubjectAccessReview")
_DECISION_TTL = 60.0


def parse_bind_address(flag: str, value: str) -> tuple[str, int] | None:
    """`host:port` → (host, port); `:port` → all interfaces; `0` or "" → None (off)."""
    if value in ("", "0"):
        return None
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ConfigError(f"{flag}: {value!r} is not host:port, :port or 0")
    host = host.strip("[]") or "0.0.0.0"
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ConfigError(f"{flag}: {host!r} in {value!r} is not an IP address") from None
    return host, int(port_text)


class _Server:
    def __init__(self, app: web.Application, bind: tuple[str, int], what: str) -> None:
        self._app = app
        self._bind = bind
        self._what = what
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, *, ssl_context: ssl.SSLContext | None = None) -> int:
        runner = web.AppRunner(self._app, access_log=None, handle_signals=False)
        await runner.setup()
        host, port = self._bind
        try:
            await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
        except OSError as err:
            await runner.cleanup()
            raise ConfigError(f"{self._what} cannot listen on {host}:{port}: {err}") from err
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        scheme = "https" if ssl_context else "http"
        log.info("serving %s on %s://%s:%d", self._what, scheme, host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class HealthServer(_Server):
    """`/healthz` (the process answers) and `/readyz` (`ready()` says so)."""

    def __init__(self, bind: tuple[str, int], *, ready: Readiness) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        super().__init__(app, bind, "health probes")
        self._ready = ready

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, _request: web.Request) -> web.Response:
        ok, reason = self._ready()
        return web.Response(status=200 if ok else 500, text="ok" if ok else reason)


class MetricsServer(_Server):
    """`/metrics` of `registry`, optionally over TLS and behind the API server's RBAC."""

    def __init__(
        self,
        registry: CollectorRegistry,
        bind: tuple[str, int],
        *,
        authorize: Authorizer | None = None,
    ) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        super().__init__(app, bind, "metrics")
        self._registry = registry
        self._authorize = authorize

    async def _metrics(self, request: web.Request) -> web.Response:
        if self._authorize is not None:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not token:
                return web.Response(status=401, text="Unauthorized: a bearer token is required")
            allowed, reason = await self._authorize(token.strip())
            if not allowed:
                return web.Response(status=403, text=f"Forbidden: {reason}")
        return web.Response(
            body=generate_latest(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )


class KubeAuthorizer:
    """TokenReview, then SubjectAccessReview for `get /metrics`; decisions kept a minute."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._decisions: dict[str, tuple[float, bool, str]] = {}

    async def __call__(self, token: str) -> tuple[bool, str]:
        now = time.monotonic()
        cached = self._decisions.get(token)
        if cached is not None and now - cached[0] < _DECISION_TTL:
            return cached[1], cached[2]
        try:
            allowed, reason = await self._decide(token)
        except APIError as err:
            return False, f"cannot check the token with the API server: {err}"
        if len(self._decisions) > 1000:
            self._decisions.clear()
        self._decisions[token] = (now, allowed, reason)
        return allowed, reason

    async def _decide(self, token: str) -> tuple[bool, str]:
        review = await self._client.create(
            TOKEN_REVIEW,
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return False, str(status.get("error") or "the token is not valid")
        user = status.get("user") or {}
        access = await self._client.create(
            ACCESS_REVIEW,
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": {
                    "user": user.get("username", ""),
                    "uid": user.get("uid", ""),
                    "groups": user.get("groups") or [],
                    "extra": user.get("extra") or {},
                    "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
                },
            },
        )
        decision = access.get("status") or {}
        if decision.get("allowed"):
            return True, ""
        name = user.get("username", "?")
        return False, f"{name} may not get /metrics {decision.get('reason', '')}".strip()


def tls_context(cert_dir: str) -> ssl.SSLContext:
    """A server context from `<cert_dir>/tls.crt` and `tls.key`, or a self-signed pair."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    if cert_dir:
        directory = Path(cert_dir)
        try:
            context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
        except (OSError, ssl.SSLError) as err:
            raise ConfigError(f"--metrics-cert-path: cannot load tls.crt/tls.key: {err}") from err
        return context
    with tempfile.TemporaryDirectory(prefix="ansible-operator-tls-") as scratch:
        cert, key = Path(scratch, "tls.crt"), Path(scratch, "tls.key")
        _self_signed(cert, key)
        context.load_cert_chain(cert, key)  # read now: the files go with the directory
    return context


def _self_signed(cert_path: Path, key_path: Path) -> None:
    # Imported here: `cryptography` (about 10 MiB) only for an operator that makes one.
    from runner.util import certauthority

    key, cert = certauthority.self_signed_serving(
        "ansible-operator-metrics",
        names=("localhost",),
        ips=("127.0.0.1",),
        key_type="ec",
        validity=datetime.timedelta(days=365),
        now=datetime.datetime.now(datetime.UTC),
    )
    cert_path.write_bytes(certauthority.cert_pem(cert))
    key_path.write_bytes(certauthority.key_pem(key, pkcs8=True))
