"""Upgrade requests through the API proxy (`runner.proxy.upgrade`): the pure parts, and
the splice with real protocol switches (WebSocket and SPDY/3.1) against a local peer
standing where the API server would."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s_client

from runner.k8s.client import KubeClient
from runner.proxy.access import basic_authorization
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.server import ProxyServer
from runner.proxy.upgrade import is_upgrade, parse_response_head, request_head

EXEC = "/api/v1/namespaces/ns/pods/p/exec?command=sh&stdin=true&stdout=true"
UPSTREAM_TOKEN = "Bearer the-operators-own-token"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}, True, id="spdy"),
        pytest.param({"Connection": "keep-alive, upgrade", "Upgrade": "websocket"}, True, id="ws"),
        pytest.param({"Connection": "Upgrade"}, False, id="no-upgrade-header"),
        pytest.param({"Upgrade": "websocket"}, False, id="no-connection-token"),
        pytest.param({"Connection": "keep-alive"}, False, id="plain"),
        pytest.param({"Connection": "upgraded", "Upgrade": "x"}, False, id="token-must-match"),
    ],
)
def test_is_upgrade(headers: dict[str, str], expected: bool) -> None:
    assert is_upgrade(headers) is expected


def test_request_head_carries_our_credentials_and_the_servers_host() -> None:
    head = request_head(
        "POST",
        EXEC,
        [
            ("Host", "127.0.0.1:8888"),
            ("Authorization", "Basic cnVuOnNlY3JldA=="),
            ("Connection", "Upgrade"),
            ("Upgrade", "SPDY/3.1"),
            ("X-Stream-Protocol-Version", "v4.channel.k8s.io"),
            ("X-Stream-Protocol-Version", "v5.channel.k8s.io"),
            ("Content-Length", "0"),
        ],
        host="10.0.0.1:6443",
        auth={"Authorization": UPSTREAM_TOKEN},
    )
    assert head.decode() == (
        f"POST {EXEC} HTTP/1.1\r\n"
        "Host: 10.0.0.1:6443\r\n"
        "Connection: Upgrade\r\n"
        "Upgrade: SPDY/3.1\r\n"
        "X-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
        "X-Stream-Protocol-Version: v5.channel.k8s.io\r\n"
        f"Authorization: {UPSTREAM_TOKEN}\r\n"
        "\r\n"
    )


def test_request_head_refuses_header_injection() -> None:
    with pytest.raises(ValueError, match="line break"):
        request_head("GET", "/", [("X", "a\r\nEvil: 1")], host="h", auth={})


def test_parse_response_head() -> None:
    head = parse_response_head(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\n"
        b"Connection: Upgrade\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
    )
    assert (head.status, head.reason) == (101, "Switching Protocols")
    assert head.header("upgrade") == "SPDY/3.1"
    assert head.header("missing") is None
    with pytest.raises(ValueError, match="not an HTTP response"):
        parse_response_head(b"SSH-2.0-OpenSSH\r\n\r\n")


# -- the splice, end to end -------------------------------------------------------------


@dataclass
class Peer:
    """What the stand-in API server saw."""

    heads: list[dict[str, str]] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    echoed: int = 0


async def spdy_peer(peer: Peer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers an upgrade to SPDY/3.1 with 101 and echoes every byte; `close` as a
    message makes it close first. Refuses anything else with a Status, like the API
    server without an upgrade."""
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode().split("\r\n")
    headers = {"request": lines[0]}
    for line in lines[1:]:
        name, _, value = line.partition(": ")
        if name:
            headers[name.lower()] = value
    peer.heads.append(headers)
    if headers.get("upgrade") != "SPDY/3.1":
        body = b'{"kind":"Status","message":"Upgrade request required","code":400}'
        writer.write(
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        await writer.drain()
    else:
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
            b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\nhello"
        )
        while chunk := await reader.read(65536):
            if chunk == b"close":
                break
            writer.write(chunk)
            peer.echoed += len(chunk)
            await writer.drain()
    writer.close()
    peer.closed.set()


@pytest.fixture
async def start_proxy() -> AsyncIterator[Callable[[str], Awaitable[ProxyServer]]]:
    cleanup: list[Callable[[], Awaitable[Any]]] = []

    async def start(server: str) -> ProxyServer:
        configuration = k8s_client.Configuration()
        configuration.host = server
        configuration.api_key = {"BearerToken": UPSTREAM_TOKEN}
        kube = KubeClient(k8s_client.ApiClient(configuration=configuration))
        cache = InformerCache(kube, namespaces=None)
        dependents = DependentWatches(cache, enqueue=lambda gvk, key: None)
        proxy = ProxyServer(
            kube, watches=[], namespaces=None, cache=cache, dependents=dependents, port=0
        )
        await proxy.start()
        cleanup.extend((kube.close, cache.close, proxy.stop))
        return proxy

    yield start
    for step in reversed(cleanup):
        await step()


@pytest.fixture
async def spdy_server() -> AsyncIterator[tuple[str, Peer]]:
    peer = Peer()
    server = await asyncio.start_server(
        lambda r, w: spdy_peer(peer, r, w), "127.0.0.1", 0, limit=1 << 20
    )
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", peer
    server.close()


async def open_upgrade(
    proxy: ProxyServer, *, upgrade: str = "SPDY/3.1", authorization: str | None = None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    auth = authorization if authorization is not None else proxy.authorization()
    writer.write(
        (
            f"POST {EXEC} HTTP/1.1\r\nHost: 127.0.0.1:{proxy.port}\r\n"
            f"Authorization: {auth}\r\nConnection: Upgrade\r\nUpgrade: {upgrade}\r\n"
            "X-Stream-Protocol-Version: v4.channel.k8s.io\r\nContent-Length: 0\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    return reader, writer, head


async def open_session(proxy: ProxyServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """An upgraded session (101), past the 5 bytes the server greets it with."""
    reader, writer, head = await open_upgrade(proxy)
    assert parse_response_head(head).status == 101
    await reader.readexactly(5)
    return reader, writer


async def test_spdy_upgrade_is_spliced_both_ways_until_the_client_closes(
    start_proxy: Callable[[str], Awaitable[ProxyServer]], spdy_server: tuple[str, Peer]
) -> None:
    url, peer = spdy_server
    proxy = await start_proxy(url)
    reader, writer, head = await open_upgrade(proxy)
    answer = parse_response_head(head)
    assert answer.status == 101
    assert answer.header("Upgrade") == "SPDY/3.1"
    assert answer.header("X-Stream-Protocol-Version") == "v4.channel.k8s.io"
    assert await asyncio.wait_for(reader.readexactly(5), 10) == b"hello"  # sent with the 101

    # The API server got our credentials, not the run's, and its own Host.
    (seen,) = peer.heads
    assert seen["request"] == f"POST {EXEC} HTTP/1.1"
    assert seen["authorization"] == UPSTREAM_TOKEN
    assert seen["host"] == url.removeprefix("http://")
    assert seen["connection"] == "Upgrade"

    # Binary data, more than any buffer on the way, comes back intact.
    payload = os.urandom(4 * 1024 * 1024)

    async def send() -> None:
        writer.write(payload)
        await writer.drain()

    sending = asyncio.create_task(send())
    received = await asyncio.wait_for(reader.readexactly(len(payload)), 60)
    await sending
    assert received == payload

    writer.close()  # the client ends the session: the API server's side is closed too
    await asyncio.wait_for(peer.closed.wait(), 10)
    assert proxy.stats.upgrades == 1


async def test_the_servers_close_ends_the_session_for_the_client(
    start_proxy: Callable[[str], Awaitable[ProxyServer]], spdy_server: tuple[str, Peer]
) -> None:
    url, peer = spdy_server
    proxy = await start_proxy(url)
    reader, writer = await open_session(proxy)
    assert not peer.closed.is_set()
    writer.write(b"close")
    await writer.drain()
    assert await asyncio.wait_for(reader.read(), 10) == b""  # EOF: the proxy closed too
    writer.close()


async def test_a_refused_upgrade_is_answered_as_it_came(
    start_proxy: Callable[[str], Awaitable[ProxyServer]], spdy_server: tuple[str, Peer]
) -> None:
    url, _ = spdy_server
    proxy = await start_proxy(url)
    reader, writer, head = await open_upgrade(proxy, upgrade="h2c")
    answer = parse_response_head(head)
    assert answer.status == 400
    length = int(answer.header("Content-Length") or 0)
    body = await asyncio.wait_for(reader.readexactly(length), 10)
    assert b"Upgrade request required" in body
    writer.close()


@pytest.mark.parametrize("authorization", ["", "Basic Og=="])
async def test_an_upgrade_without_the_run_credential_gets_401(
    start_proxy: Callable[[str], Awaitable[ProxyServer]],
    spdy_server: tuple[str, Peer],
    authorization: str,
) -> None:
    url, peer = spdy_server
    proxy = await start_proxy(url)
    _, writer, head = await open_upgrade(proxy, authorization=authorization)
    assert parse_response_head(head).status == 401
    assert peer.heads == []  # the API server never heard of it
    writer.close()


async def test_websocket_exec_with_a_channel_subprotocol(
    start_proxy: Callable[[str], Awaitable[ProxyServer]],
) -> None:
    """What the Python client's `stream()` sends for k8s_exec: a WebSocket upgrade with
    `v5.channel.k8s.io`; frames pass both ways untouched and a close reaches the server."""
    seen: list[dict[str, str]] = []
    closed = asyncio.Event()

    async def exec_handler(request: web.Request) -> web.WebSocketResponse:
        seen.append(dict(request.headers))
        ws = web.WebSocketResponse(protocols=("v5.channel.k8s.io", "v4.channel.k8s.io"))
        await ws.prepare(request)
        await ws.send_bytes(b"\x01ready\n")
        async for message in ws:
            if message.type == aiohttp.WSMsgType.BINARY:
                await ws.send_bytes(b"\x01" + message.data[1:])
        closed.set()
        return ws

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/pods/p/exec", exec_handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        proxy = await start_proxy(f"http://127.0.0.1:{port}")
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                f"http://127.0.0.1:{proxy.port}{EXEC}",
                protocols=("v5.channel.k8s.io",),
                headers={"Authorization": basic_authorization("", proxy.secret)},
            ) as ws,
        ):
            assert ws.protocol == "v5.channel.k8s.io"
            assert (await ws.receive_bytes(timeout=10)) == b"\x01ready\n"
            for text in (b"echo one\n", b"x" * 200_000):
                await ws.send_bytes(b"\x00" + text)
                assert (await ws.receive_bytes(timeout=10)) == b"\x01" + text
        await asyncio.wait_for(closed.wait(), 10)
        (headers,) = seen
        assert headers["Authorization"] == UPSTREAM_TOKEN
        assert headers["Sec-WebSocket-Protocol"] == "v5.channel.k8s.io"
    finally:
        with contextlib.suppress(Exception):
            await runner.cleanup()


async def test_stopping_the_proxy_ends_open_sessions(
    start_proxy: Callable[[str], Awaitable[ProxyServer]], spdy_server: tuple[str, Peer]
) -> None:
    url, peer = spdy_server
    proxy = await start_proxy(url)
    reader, writer = await open_session(proxy)
    await asyncio.wait_for(proxy.stop(), 10)  # not aiohttp's minute-long shutdown wait
    assert await asyncio.wait_for(reader.read(), 10) == b""
    await asyncio.wait_for(peer.closed.wait(), 10)
    writer.close()
