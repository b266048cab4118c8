"""Service addresses for OLM's catalog operator, which runs as a local process.

For a CatalogSource with `spec.image` the catalog operator starts a registry pod and a
Service, and dials `<service>.<namespace>.svc:50051`. No cluster DNS or kube-proxy
serves this machine, so that name resolves nowhere. OLM honours `$GRPC_PROXY` for these
connections (made for catalog operators that run outside their cluster): with
`GRPC_PROXY=socks5://127.0.0.1:<port>` it hands the unresolved name to this SOCKS5
proxy, which resolves it the way kube-proxy would route it (the Service's port, its
target port, a ready endpoint of its EndpointSlices) and connects to the pod's address
on the real node's bridge. Only CONNECT to `*.svc[.cluster.local]` names is served, on
loopback; loopback addresses never reach the proxy (OLM's proxy rules leave them out),
so CatalogSources with `spec.address` keep working unchanged.

Run as `python -m runner.devtools.olm.servicedial --kubeconfig K --port P` (an add-on process of
the cluster, started by `olm install`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import struct
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runner.k8s import KubeClient, NotFound
from runner.structs import GVK

Obj = dict[str, Any]
SERVICE = GVK("", "v1", "Service")
ENDPOINT_SLICE = GVK("discovery.k8s.io", "v1", "EndpointSlice")
LOG = logging.getLogger("ansible-operator.servicedial")

_SOCKS = 5
_CONNECT = 1
_ATYP_IPV4, _ATYP_NAME, _ATYP_IPV6 = 1, 3, 4
# Reply codes (RFC 1928): succeeded, general failure, host unreachable, command not
# supported, address type not supported.
OK, FAILURE, UNREACHABLE, NO_COMMAND, NO_ATYP = 0, 1, 4, 7, 8


class ResolveError(Exception):
    """The name is not a Service with a ready endpoint."""


@dataclass(frozen=True)
class ServiceName:
    name: str
    namespace: str


def parse_service_host(host: str) -> ServiceName | None:
    """`<name>.<namespace>.svc` (optionally `.cluster.local`) or None."""
    labels = host.rstrip(".").lower().split(".")
    if labels[-2:] == ["cluster", "local"]:
        labels = labels[:-2]
    if len(labels) != 3 or labels[2] != "svc" or not all(labels[:2]):
        return None
    return ServiceName(labels[0], labels[1])


def pick_endpoint(
    service: Mapping[str, Any], slices: Sequence[Mapping[str, Any]], port: int
) -> tuple[str, int]:
    """The address and port a connection to the Service's `port` goes to (pure)."""
    ports = (service.get("spec") or {}).get("ports") or []
    wanted = next((p for p in ports if int(p.get("port", 0)) == port), None)
    if wanted is None:
        raise ResolveError(f"service has no port {port}")
    name = str(wanted.get("name") or "")
    for endpoint_slice in slices:
        if endpoint_slice.get("addressType") not in ("IPv4", "IPv6"):
            continue
        slice_port = next(
            (p for p in endpoint_slice.get("ports") or [] if str(p.get("name") or "") == name),
            None,
        )
        if slice_port is None or slice_port.get("port") is None:
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            addresses = endpoint.get("addresses") or []
            if addresses:
                return str(addresses[0]), int(slice_port["port"])
    raise ResolveError("no ready endpoint")


Resolver = Callable[[str, int], Awaitable[tuple[str, int]]]


def cluster_resolver(client: KubeClient) -> Resolver:
    async def resolve(host: str, port: int) -> tuple[str, int]:
        service = parse_service_host(host)
        if service is None:
            raise ResolveError(f"{host} is not a Service name (<name>.<namespace>.svc)")
        try:
            found = await client.get(SERVICE, name=service.name, namespace=service.namespace)
        except NotFound as exc:
            raise ResolveError(f"no Service {service.namespace}/{service.name}") from exc
        slices, _ = await client.list(
            ENDPOINT_SLICE,
            namespace=service.namespace,
            label_selector=f"kubernetes.io/service-name={service.name}",
        )
        try:
            return pick_endpoint(found, slices, port)
        except ResolveError as exc:
            raise ResolveError(f"Service {service.namespace}/{service.name}: {exc}") from exc

    return resolve


def reply(code: int) -> bytes:
    return struct.pack("!BBBB4sH", _SOCKS, code, 0, _ATYP_IPV4, b"\0\0\0\0", 0)


async def _read_request(reader: asyncio.StreamReader) -> tuple[int, str, int]:
    """The greeting (no authentication) and the request: (command, host, port)."""
    version, count = await reader.readexactly(2)
    if version != _SOCKS:
        raise ValueError(f"not SOCKS5 (version {version})")
    await reader.readexactly(count)
    return await _read_command(reader)


async def _read_command(reader: asyncio.StreamReader) -> tuple[int, str, int]:
    _, command, _, atyp = await reader.readexactly(4)
    if atyp == _ATYP_IPV4:
        host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
    elif atyp == _ATYP_IPV6:
        host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
    elif atyp == _ATYP_NAME:
        (length,) = await reader.readexactly(1)
        host = (await reader.readexactly(length)).decode("ascii", errors="replace")
    else:
        raise ValueError(f"address type {atyp}")
    (port,) = struct.unpack("!H", await reader.readexactly(2))
    return command, host, port


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError):
            writer.write_eof()


async def handle(
    resolve: Resolver, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        try:
            writer.write(bytes([_SOCKS, 0]))  # version 5, no authentication
            command, host, port = await _read_request(reader)
        except (ValueError, asyncio.IncompleteReadError):
            return
        if command != _CONNECT:
            writer.write(reply(NO_COMMAND))
            return
        try:
            address, target_port = await resolve(host, port)
            upstream_reader, upstream_writer = await asyncio.open_connection(address, target_port)
        except (ResolveError, OSError) as exc:
            LOG.info("cannot connect %s:%s: %s", host, port, exc)
            writer.write(reply(UNREACHABLE))
            return
        LOG.info("%s:%s -> %s:%s", host, port, address, target_port)
        writer.write(reply(OK))
        await writer.drain()
        try:
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        finally:
            upstream_writer.close()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def serve(kubeconfig: str, host: str, port: int) -> None:
    client = await KubeClient.connect(kubeconfig=kubeconfig)
    resolve = cluster_resolver(client)
    server = await asyncio.start_server(lambda r, w: handle(resolve, r, w), host=host, port=port)
    LOG.info("serving SOCKS5 on %s:%s", host, port)
    async with server:
        await server.serve_forever()


def proxy_environ(port: int) -> Mapping[str, str]:
    """The catalog operator's environment for this proxy."""
    return {"GRPC_PROXY": f"socks5://127.0.0.1:{port}"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="servicedial", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    asyncio.run(serve(args.kubeconfig, args.host, args.port))


if __name__ == "__main__":
    main()
