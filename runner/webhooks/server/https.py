"""The HTTPS server the API server calls: AdmissionReview and ConversionReview in, answers
out, with the serving certificate reloaded when its files change.

cert-manager and OLM rotate a webhook's certificate by rewriting the Secret mounted at the
certificate directory (`tls.crt`, `tls.key`); the kubelet swaps the files in place. The
server checks them every second and loads a changed pair into the same TLS context, so
new connections get the new certificate and nothing restarts. A pair that does not load
(half written) is tried again at the next check; the old one stays in use meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from runner.structs.bodies import KubeObject
from runner.util.redact import MESSAGE_LIMIT, redact_message
from runner.webhooks.declarations import Webhook, conversion_path
from runner.webhooks.reviews import AdmissionReview, ConversionResponse, ConversionReview
from runner.webhooks.server.roles import WebhookFailure, WebhookRunner

__all__ = ["CERT_FILE", "KEY_FILE", "CertificateReloader", "WebhookServer"]

log = logging.getLogger("ansible-operator.webhooks")

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
_MAX_BODY = 16 * 1024 * 1024
_CONVERSION_CACHE = 1024


class CertificateReloader:
    """A server TLS context with `tls.crt`/`tls.key` of `directory`, kept current."""

    def __init__(self, directory: Path, *, interval: float = 1.0) -> None:
        self.directory = directory
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._interval = interval
        self._signature: tuple[Any, ...] | None = None
        self._task: asyncio.Task[None] | None = None
        self.reloads = 0

    def _current(self) -> tuple[Any, ...]:
        signature: list[Any] = []
        for name in (CERT_FILE, KEY_FILE):
            stat = (self.directory / name).stat()
            signature += [stat.st_ino, stat.st_mtime_ns, stat.st_size]
        return tuple(signature)

    def load(self) -> None:
        """Load the pair now; raises OSError or ssl.SSLError when it cannot be used."""
        signature = self._current()
        self.context.load_cert_chain(self.directory / CERT_FILE, self.directory / KEY_FILE)
        self._signature = signature

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                if self._current() == self._signature:
                    continue
                self.load()
            except (OSError, ssl.SSLError) as err:
                log.warning(
                    "webhook serving certificate in %s not reloaded: %s", self.directory, err
                )
                continue
            self.reloads += 1
            log.info("webhook serving certificate reloaded from %s", self.directory)


class _ConversionCache:
    """Converted objects by (object, desired version): a conversion role is a pure
    function of its input, and the API server converts the same stored objects again
    on every read in another version."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[str, KubeObject] = OrderedDict()

    @staticmethod
    def key(obj: Mapping[str, Any], desired: str) -> str:
        return desired + "\0" + json.dumps(obj, sort_keys=True, default=str)

    def get(self, key: str) -> KubeObject | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
            return _copy(found)
        return None

    def put(self, key: str, value: KubeObject) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)


class WebhookServer:
    """Serves `webhooks` over HTTPS on `host:port` (port 0: any free one)."""

    def __init__(
        self,
        webhooks: Sequence[Webhook],
        runner: WebhookRunner,
        *,
        host: str,
        port: int,
        certificates: CertificateReloader,
    ) -> None:
        self._webhooks = tuple(webhooks)
        self._runner = runner
        self._host = host
        self._port = port
        self._certificates = certificates
        self._conversions = {
            (w.gvk.group, w.gvk.kind): w for w in self._webhooks if w.type == "conversion"
        }
        self._cache = _ConversionCache(_CONVERSION_CACHE)
        self._runner_app: web.AppRunner | None = None
        self.port = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=_MAX_BODY)
        for webhook in self._webhooks:
            if webhook.type != "conversion":
                app.router.add_post(webhook.path, self._admission_handler(webhook))
        if self._conversions:
            app.router.add_post(conversion_path(), self._convert)
        app.router.add_get("/healthz", self._healthz)
        return app

    async def start(self) -> int:
        self._certificates.load()
        self._certificates.start()
        self._runner_app = web.AppRunner(self.app(), access_log=None)
        await self._runner_app.setup()
        site = web.TCPSite(
            self._runner_app, self._host or None, self._port, ssl_context=self._certificates.context
        )
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else self._port
        log.info(
            "serving %d webhook(s) on https://%s:%d (certificates from %s)",
            len(self._webhooks),
            self._host or "0.0.0.0",
            self.port,
            self._certificates.directory,
        )
        return self.port

    async def stop(self) -> None:
        await self._certificates.stop()
        if self._runner_app is not None:
            await self._runner_app.cleanup()

    def warming(self) -> bool:
        """The webhooks' backend is still warming up (for /readyz)."""
        return self._runner.warming()

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    def _admission_handler(self, webhook: Webhook) -> Any:
        async def handle(request: web.Request) -> web.Response:
            review: AdmissionReview = await _read_json(request)
            body = review.get("request") if isinstance(review, Mapping) else None
            if not isinstance(body, Mapping) or not body.get("uid"):
                raise web.HTTPBadRequest(text="expected an AdmissionReview with a request")
            return web.json_response(await self._runner.admit(webhook, body))

        return handle

    async def _convert(self, request: web.Request) -> web.Response:
        review: ConversionReview = await _read_json(request)
        body = review.get("request") if isinstance(review, Mapping) else None
        if not isinstance(body, Mapping) or not body.get("uid"):
            raise web.HTTPBadRequest(text="expected a ConversionReview with a request")
        desired = str(body.get("desiredAPIVersion") or "")
        objects = body.get("objects") or []
        response: ConversionResponse = {"uid": body["uid"]}
        try:
            converted = await asyncio.gather(*(self._convert_one(o, desired) for o in objects))
            response.update({"convertedObjects": converted, "result": {"status": "Success"}})
        except WebhookFailure as failure:
            message = redact_message(str(failure), MESSAGE_LIMIT)
            response.update(
                {"convertedObjects": [], "result": {"status": "Failure", "message": message}}
            )
        return web.json_response(
            {
                "apiVersion": review.get("apiVersion") or "apiextensions.k8s.io/v1",
                "kind": "ConversionReview",
                "response": response,
            }
        )

    async def _convert_one(self, obj: KubeObject, desired: str) -> KubeObject:
        if not isinstance(obj, Mapping):
            raise WebhookFailure("contract", f"not an object: {obj!r}"[:200])
        api_version = str(obj.get("apiVersion") or "")
        if api_version == desired:
            return obj.copy()
        group = api_version.rpartition("/")[0]
        webhook = self._conversions.get((group, str(obj.get("kind") or "")))
        if webhook is None:
            raise WebhookFailure(
                "contract", f"no conversion webhook for {obj.get('kind')}.{group} in webhooks.yaml"
            )
        key = self._cache.key(obj, desired)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        converted = await self._runner.convert(webhook, obj, desired)
        self._cache.put(key, converted)
        return _copy(converted)


def _copy(obj: Mapping[str, Any]) -> KubeObject:
    copied: KubeObject = json.loads(json.dumps(obj))
    return copied


async def _read_json(request: web.Request) -> Any:
    try:
        return await request.json()
    except (ValueError, UnicodeDecodeError):
        raise web.HTTPBadRequest(text="the body is not JSON") from None
