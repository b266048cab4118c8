"""The SOCKS5 proxy that resolves Service names for OLM's catalog operator."""

from __future__ import annotations

import asyncio
import struct

import pytest

from runner.devtools.olm import servicedial
from runner.devtools.olm.servicedial import (
    ResolveError,
    ServiceName,
    parse_service_host,
    pick_endpoint,
)

SERVICE = {"spec": {"ports": [{"name": "grpc", "port": 50051, "targetPort": 50051}]}}


def _slice(address: str, *, ready: bool = True, port: int = 50051) -> dict[str, object]:
    return {
        "addressType": "IPv4",
        "ports": [{"name": "grpc", "port": port}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": ready}}],
    }


def test_service_names_are_recognised() -> None:
    assert parse_service_host("cat.demo.svc") == ServiceName("cat", "demo")
    assert parse_service_host("cat.demo.svc.cluster.local.") == ServiceName("cat", "demo")
    assert parse_service_host("example.com") is None
    assert parse_service_host("cat.svc") is None


def test_a_ready_endpoint_on_the_services_target_port_is_chosen() -> None:
    slices = [_slice("10.0.0.9", ready=False), _slice("10.245.1.2", port=6000)]
    assert pick_endpoint(SERVICE, slices, 50051) == ("10.245.1.2", 6000)


def test_no_ready_endpoint_or_unknown_port_is_an_error() -> None:
    with pytest.raises(ResolveError, match="no ready endpoint"):
        pick_endpoint(SERVICE, [_slice("10.0.0.9", ready=False)], 50051)
    with pytest.raises(ResolveError, match="no port 80"):
        pick_endpoint(SERVICE, [_slice("10.0.0.9")], 80)


def _connect_request(host: str, port: int) -> bytes:
    name = host.encode()
    return bytes([5, 1, 0]) + bytes([5, 1, 0, 3, len(name)]) + name + struct.pack("!H", port)


async def _through_proxy(resolved: dict[str, tuple[str, int]], host: str) -> tuple[int, bytes]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"echo:" + await reader.read(100))
        await writer.drain()
        writer.close()

    upstream = await asyncio.start_server(echo, "127.0.0.1", 0)
    upstream_port = upstream.sockets[0].getsockname()[1]

    async def resolve(name: str, port: int) -> tuple[str, int]:
        if name not in resolved:
            raise ResolveError(name)
        return resolved[name][0], upstream_port

    proxy = await asyncio.start_server(
        lambda r, w: servicedial.handle(resolve, r, w), "127.0.0.1", 0
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.sockets[0].getsockname()[1])
    writer.write(_connect_request(host, 50051))
    await reader.readexactly(2)  # method selection
    answer = await reader.readexactly(10)
    data = b""
    if answer[1] == servicedial.OK:
        writer.write(b"hi")
        writer.write_eof()
        data = await reader.read()
    writer.close()
    proxy.close()
    upstream.close()
    return answer[1], data


def test_connect_reaches_the_resolved_pod_and_unknown_names_are_refused() -> None:
    resolved = {"cat.demo.svc": ("127.0.0.1", 0)}
    assert asyncio.run(_through_proxy(resolved, "cat.demo.svc")) == (servicedial.OK, b"echo:hi")
    code, _ = asyncio.run(_through_proxy(resolved, "other.demo.svc"))
    assert code == servicedial.UNREACHABLE
