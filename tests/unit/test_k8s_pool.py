"""The API connection pool shrinks back after a burst while requests keep coming
(runner/k8s/pool.py). Found by the chaos soak: a sharded replica, which makes a request
every second or so, kept every connection of its busiest moment open for good, since
aiohttp hands idle connections out oldest first."""

from __future__ import annotations

import asyncio

import aiohttp

from runner.k8s.pool import NewestFirstConnector

KEEPALIVE = 0.6
"""Seconds an idle pooled connection lives (the operator's is aiohttp's 15 s)."""


class Server:
    """A loopback HTTP/1.1 server answering every request with keep-alive, counting its
    open connections and the client ports it was asked from."""

    def __init__(self) -> None:
        self.open = 0
        self.ports: list[int] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        port = writer.get_extra_info("peername")[1]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head:
                    return
                self.ports.append(port)
                await asyncio.sleep(0.05)  # long enough for a burst to need its own
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.open -= 1
            writer.close()


async def burst_then_steady(connector: aiohttp.TCPConnector) -> tuple[int, int]:
    """Five requests at once, then one every 0.1 s for 2 s (each pooled connection would
    be reused well within its keep-alive if they were handed out in turn). Returns the
    client ports of the last second's requests and the server's open connections then."""
    server = Server()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    try:
        async with aiohttp.ClientSession(connector=connector) as session:

            async def get() -> None:
                async with session.get(url) as response:
                    await response.read()

            await asyncio.gather(*(get() for _ in range(5)))
            assert server.open == 5
            for _ in range(20):
                await get()
                await asyncio.sleep(0.05)
            last = len(set(server.ports[-10:]))
            return last, server.open
    finally:
        listener.close()


def test_steady_requests_reuse_one_connection_and_the_rest_close() -> None:
    async def run() -> tuple[int, int]:
        return await burst_then_steady(NewestFirstConnector(keepalive_timeout=KEEPALIVE))

    ports, still_open = asyncio.run(run())
    assert ports == 1, f"the last requests went over {ports} connections"
    assert still_open == 1, f"{still_open} connections open after the burst idled"


def test_aiohttp_alone_keeps_the_burst_open() -> None:
    """What the connector is for: aiohttp's own pool cycles through every connection
    (when this fails, aiohttp hands out the newest first itself: pool.py can go)."""

    async def run() -> tuple[int, int]:
        # A keep-alive far longer than a cycle through the five, however slow the machine.
        return await burst_then_steady(aiohttp.TCPConnector(keepalive_timeout=30))

    ports, still_open = asyncio.run(run())
    assert ports > 1 and still_open > 1
