"""Forwarding one request of an Ansible run to the API server, as the proxy does when it
cannot answer from the cache: the client's credentials and hop-by-hop headers dropped,
a time limit fitting the verb (`upstream_timeout`), watch and followed-log answers
streamed as they come, `metadata.managedFields` left out of JSON answers
(`without_managed_fields`), and an unreachable or silent API server turned into a
Kubernetes Status answer (503, 504) rather than a hung run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import aiohttp
from aiohttp import web

from runner.k8s.apierrors import APIError
from runner.k8s.client import KubeClient
from runner.proxy.requestinfo import RequestInfo
from runner.structs.bodies import Status

log = logging.getLogger("ansible-operator.proxy")

# Never passed on: credentials (ours replace them) and hop-by-hop or length headers that
# aiohttp sets itself for what it actually sends.
_DROPPED_REQUEST_HEADERS = frozenset(
    ("authorization", "host", "connection", "keep-alive", "content-length", "transfer-encoding")
)
_DROPPED_RESPONSE_HEADERS = frozenset(
    ("connection", "keep-alive", "content-length", "transfer-encoding", "content-encoding")
)
# The API server ends any request that is not long-running after its --request-timeout
# (1 minute by default); an upstream that has not answered a little after that is dead
# or stalled, and the run gets a 504 instead of hanging with it.
REQUEST_TIMEOUT_SECONDS = 90.0
_CONNECT_TIMEOUT_SECONDS = 15.0
# A watch lasts as long as its client wants, but the server ends it after `timeoutSeconds`
# (without one, after at most twice its --min-request-timeout of 30 minutes): a stream
# silent for longer than that plus this grace comes from a dead upstream.
WATCH_GRACE_SECONDS = 30
_WATCH_MAX_SECONDS = 3600
_STREAMED_SUBRESOURCES = frozenset(("log",))
"""Answered as they come, like watches: a followed log lasts as long as its container."""


async def forward(
    client: KubeClient,
    request: web.Request,
    info: RequestInfo,
    body: bytes | None,
    *,
    request_timeout: float,
) -> web.StreamResponse:
    """Pass `request` (with `body`) on to the API server with the operator's credentials
    and relay the answer: read whole and without managedFields, or streamed for a watch
    or a followed log; a 503 or 504 Status when the API server cannot be reached or does
    not answer in time."""
    headers = {
        name: value
        for name, value in request.headers.items()
        if name.lower() not in _DROPPED_REQUEST_HEADERS
    }
    try:
        upstream = await client.forward(
            request.method,
            request.rel_url.raw_path,
            query=list(request.query.items()),
            headers=headers,
            data=body,
            timeout=upstream_timeout(
                info.verb,
                request.query,
                total=request_timeout,
                subresource=info.subresource,
            ),
        )
    except APIError as err:
        log.warning("API proxy: %s %s: %s", request.method, request.path, err)
        if isinstance(err.__cause__, TimeoutError):
            message = f"the API server did not answer within {request_timeout:g} s"
            return web.json_response(status_body(504, message), status=504)
        return web.json_response(status_body(503, str(err)), status=503)
    try:
        response_headers = {
            name: value
            for name, value in upstream.headers.items()
            if name.lower() not in _DROPPED_RESPONSE_HEADERS
        }
        if info.verb != "watch" and info.subresource not in _STREAMED_SUBRESOURCES:
            try:
                content = await upstream.read()
            except (aiohttp.ClientError, OSError, TimeoutError) as err:
                reason = str(err) or type(err).__name__
                log.warning("API proxy: %s %s: %s", request.method, request.path, reason)
                message = f"no complete answer from the API server: {reason}"
                return web.json_response(status_body(504, message), status=504)
            if upstream.content_type == "application/json":
                content = without_managed_fields(content)
            return web.Response(status=upstream.status, body=content, headers=response_headers)
        streamed = web.StreamResponse(status=upstream.status, headers=response_headers)
        await streamed.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await streamed.write(chunk)
            await streamed.write_eof()
        except (ConnectionResetError, OSError):
            log.debug("API proxy: the client of a streamed answer went away")
        except (aiohttp.ClientError, TimeoutError) as err:
            # The client sees its watch end and watches again, as after a server close.
            log.info("API proxy: stream %s ended: upstream %s", request.path, err or "silent")
        return streamed
    finally:
        upstream.release()


def upstream_timeout(
    verb: str,
    query: Mapping[str, str],
    *,
    total: float = REQUEST_TIMEOUT_SECONDS,
    subresource: str = "",
) -> aiohttp.ClientTimeout:
    """How long the proxy waits on the API server for one forwarded request: `total` for
    the whole of a request that is not a watch; for a watch, the quiet it may keep; for a
    followed log (`k8s_log` with `follow`), only the connection: a container may stay
    silent for as long as it runs."""
    connect = min(total, _CONNECT_TIMEOUT_SECONDS)
    if subresource == "log" and query.get("follow", "").lower() in ("true", "1"):
        return aiohttp.ClientTimeout(connect=connect)
    if verb != "watch":
        return aiohttp.ClientTimeout(total=total, connect=connect)
    try:
        asked = int(query.get("timeoutSeconds", ""))
    except ValueError:
        asked = 0
    seconds = asked if 0 < asked < _WATCH_MAX_SECONDS else _WATCH_MAX_SECONDS
    return aiohttp.ClientTimeout(connect=connect, sock_read=seconds + WATCH_GRACE_SECONDS)


def without_managed_fields(content: bytes) -> bytes:
    """The response without `metadata.managedFields` (of the object, or of each item).

    The cache keeps objects without them (they are most of an object's size and nobody
    here reads them), so every answer leaves them out, as `kubectl get` does by default.
    Otherwise `kubernetes.core.k8s` would compare a cached object with the PATCH answer,
    see managedFields appear, and report every run as changed."""
    try:
        body = json.loads(content)
    except ValueError:
        return content
    if not isinstance(body, dict):
        return content
    found = False
    for obj in [body, *(body.get("items") or [])]:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and "managedFields" in meta:
            del meta["managedFields"]
            found = True
    return json.dumps(body).encode() if found else content


_REASONS = {401: "Unauthorized", 403: "Forbidden", 503: "ServiceUnavailable", 504: "Timeout"}


def status_body(code: int, message: str) -> Status:
    """A Kubernetes `Status` answer for an error the proxy itself gives."""
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": message,
        "reason": _REASONS.get(code, "InternalError"),
        "code": code,
    }
