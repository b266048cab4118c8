"""Upgrade requests through the API proxy: `exec`, `attach` and `portforward`.

These do not fit request/response forwarding. The client asks to switch protocols
(`Connection: Upgrade` with `Upgrade: SPDY/3.1`, or `websocket` with a
`v5.channel.k8s.io`-style subprotocol), and after the API server's `101 Switching
Protocols` the connection carries a byte stream in both directions for as long as the
session lasts. So for these the proxy opens its own connection to the API server (its TLS
settings and credentials, as for every request), sends the request head, and relays the
answer: a refusal as a plain response, a `101` as the start of a splice that copies bytes
both ways until either side closes, then closes both.

The client's side is taken over the way aiohttp's own WebSocket support does it: a
payload parser set on the connection's protocol receives every byte that arrives after
the request head, whatever the upgrade protocol (aiohttp itself only knows `websocket`).

`is_upgrade`, `request_head` and `parse_response_head` are pure; `relay` does the IO.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from aiohttp import web
from multidict import CIMultiDict

__all__ = [
    "Upstream",
    "is_upgrade",
    "parse_response_head",
    "relay",
    "request_head",
]

log = logging.getLogger("ansible-operator.proxy")

_MAX_HEAD: Final = 64 * 1024
_CHUNK: Final = 64 * 1024
_HIGH_WATER: Final = 1024 * 1024
"""Bytes queued towards the API server before the client is paused."""
_CONNECT_TIMEOUT: Final = 30.0
_HEAD_TIMEOUT: Final = 60.0
"""Seconds the API server may take to answer the upgrade (it dials the kubelet first)."""

# Not passed on to the API server: ours replace them, or they describe this hop only.
_DROPPED_REQUEST: Final = frozenset(
    ("authorization", "host", "keep-alive", "proxy-authorization", "proxy-connection", "te")
)
# Not passed back: aiohttp writes these itself for what it sends.
_DROPPED_RESPONSE: Final = frozenset(("content-length", "transfer-encoding", "keep-alive"))


def is_upgrade(headers: Mapping[str, str]) -> bool:
    """The request asks to switch protocols (`Connection: upgrade` and an `Upgrade`)."""
    connection = headers.get("Connection", "")
    tokens = {token.strip().lower() for token in connection.split(",")}
    return "upgrade" in tokens and bool(headers.get("Upgrade", "").strip())


def request_head(
    method: str,
    target: str,
    headers: Iterable[tuple[str, str]],
    *,
    host: str,
    auth: Mapping[str, str],
    body_length: int = 0,
) -> bytes:
    """The HTTP/1.1 request head sent to the API server: the client's headers but for its
    credentials and this hop's, the API server's `host`, our `auth` headers."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for name, value in headers:
        lowered = name.lower()
        if lowered in _DROPPED_REQUEST or lowered == "content-length":
            continue
        lines.append(f"{name}: {value}")
    lines += [f"{name}: {value}" for name, value in auth.items()]
    if body_length:
        lines.append(f"Content-Length: {body_length}")
    for line in lines:
        if "\r" in line or "\n" in line:
            raise ValueError("a header holds a line break")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@dataclass(frozen=True)
class ResponseHead:
    status: int
    reason: str
    headers: list[tuple[str, str]]

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


def parse_response_head(head: bytes) -> ResponseHead:
    """The status line and headers of an HTTP/1.x response head (up to the blank line);
    `ValueError` when it is not one."""
    text = head.decode("latin-1")
    lines = text.split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not code.isdigit() or len(code) != 3:
        raise ValueError(f"not an HTTP response: {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise ValueError(f"malformed header line: {line[:80]!r}")
        headers.append((name.strip(), value.strip()))
    return ResponseHead(status=int(code), reason=reason.strip(), headers=headers)


@dataclass(frozen=True)
class Upstream:
    """How to reach the API server: its base URL, TLS settings, and current credentials."""

    server: str
    ssl_context: ssl.SSLContext | None
    server_hostname: str | None
    auth: Mapping[str, str]


async def relay(request: web.Request, upstream: Upstream) -> web.StreamResponse:
    """Serve one upgrade request by relaying it to the API server (see the docstring)."""
    url = urllib.parse.urlsplit(upstream.server)
    secure = url.scheme == "https"
    port = url.port or (443 if secure else 80)
    host = url.hostname or ""
    body = await request.read() if request.can_read_body else b""
    base_path = url.path.rstrip("/")
    head = request_head(
        request.method,
        base_path + request.rel_url.raw_path_qs,
        request.headers.items(),
        host=url.netloc.rpartition("@")[2],
        auth=upstream.auth,
        body_length=len(body),
    )
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                host,
                port,
                ssl=upstream.ssl_context if secure else None,
                server_hostname=(upstream.server_hostname or host) if secure else None,
                limit=_MAX_HEAD,
            ),
            _CONNECT_TIMEOUT,
        )
    except (OSError, TimeoutError, ssl.SSLError) as err:
        log.warning(
            "API proxy: %s %s: cannot reach the API server: %s", request.method, request.path, err
        )
        return _failure(502, f"cannot reach the API server: {err}")
    try:
        writer.write(head + body)
        try:
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT)
            answer = parse_response_head(raw)
        except (
            OSError,
            TimeoutError,
            ValueError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ) as err:
            return _failure(502, f"no valid answer from the API server to the upgrade: {err}")
        headers = CIMultiDict(
            (name, value) for name, value in answer.headers if name.lower() not in _DROPPED_RESPONSE
        )
        if answer.status != 101:
            content = await _read_body(reader, answer)
            return web.Response(
                status=answer.status, reason=answer.reason, body=content, headers=headers
            )
        return await _splice(request, reader, writer, answer, headers)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


class _Inbound:
    """Receives the client's bytes after the upgrade and writes them to the API server
    (it stands where aiohttp puts its WebSocket reader: `feed_data`, `feed_eof`)."""

    def __init__(self, writer: asyncio.StreamWriter, client: asyncio.Transport) -> None:
        self._writer = writer
        self._client = client
        self._draining: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        if not self.closed.is_set() and not self._writer.is_closing():
            self._writer.write(data)
            if self._writer.transport.get_write_buffer_size() > _HIGH_WATER:
                self._pause()
        return False, b""

    def feed_eof(self) -> None:
        self.closed.set()

    def _pause(self) -> None:
        if self._draining is not None:
            return
        with contextlib.suppress(Exception):
            self._client.pause_reading()
        self._draining = asyncio.get_running_loop().create_task(self._resume_after_drain())

    async def _resume_after_drain(self) -> None:
        try:
            await self._writer.drain()
        except (ConnectionError, OSError):
            self.closed.set()
        finally:
            self._draining = None
            with contextlib.suppress(Exception):
                self._client.resume_reading()


async def _splice(
    request: web.Request,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    answer: ResponseHead,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    transport = request.transport
    if transport is None:
        return _failure(502, "the client went away")
    response = web.StreamResponse(status=101, reason=answer.reason or "Switching Protocols")
    response.headers.extend(headers)
    response.force_close()  # the connection ends with the session
    inbound = _Inbound(writer, transport)
    # From here every byte the client sends goes to `inbound`, not to the HTTP parser.
    request.protocol.set_parser(cast(Any, inbound))
    await response.prepare(request)
    log.debug(
        "API proxy: %s %s upgraded to %s", request.method, request.path, answer.header("Upgrade")
    )

    async def outbound() -> None:
        while chunk := await reader.read(_CHUNK):
            await response.write(chunk)

    copying = asyncio.ensure_future(outbound())
    closed = asyncio.ensure_future(inbound.closed.wait())
    try:
        await asyncio.wait((copying, closed), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (copying, closed):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
            await copying
        inbound.closed.set()
    return response


async def _read_body(reader: asyncio.StreamReader, answer: ResponseHead) -> bytes:
    """The body of a response that refused the upgrade (a Status, normally)."""
    try:
        length = answer.header("Content-Length")
        if length is not None:
            return await asyncio.wait_for(reader.readexactly(int(length)), _HEAD_TIMEOUT)
        if (answer.header("Transfer-Encoding") or "").lower() == "chunked":
            return await asyncio.wait_for(_read_chunked(reader), _HEAD_TIMEOUT)
        return await asyncio.wait_for(reader.read(), _HEAD_TIMEOUT)
    except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError):
        return b""


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _failure(code: int, message: str) -> web.Response:
    return web.json_response(
        {
            "apiVersion": "v1",
            "kind": "Status",
            "status": "Failure",
            "message": message,
            "reason": "BadGateway" if code == 502 else "InternalError",
            "code": code,
        },
        status=code,
    )
