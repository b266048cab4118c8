"""The test forwarder (tests/support/tcpstall.py) lets go of a connection both ends closed.

Found by the chaos soak (docs/soak.md): each replica's forwarder kept both sockets of
every connection closed cleanly on both sides (FIN each way) open and counted, so its
`open_connections()` only grew and the soak's own process piled up descriptors over a
long run."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from support.tcpstall import StallingForwarder


@pytest.fixture
def upstream() -> Iterator[tuple[str, int]]:
    """A loopback server answering each connection's bytes with their upper case, then
    closing its side once the client closed its own."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(1024):
                conn.sendall(data.upper())

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()
    finally:
        stop.set()
        listener.close()


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_a_connection_closed_on_both_sides_is_let_go(upstream: tuple[str, int]) -> None:
    with StallingForwarder(upstream) as forwarder:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", forwarder.port), timeout=5) as client:
                client.sendall(b"ping")
                assert client.recv(16) == b"PING"
                client.shutdown(socket.SHUT_WR)
                assert client.recv(16) == b""  # the server's side closed in turn
        assert forwarder.connections == 3
        assert eventually(lambda: forwarder.open_connections() == 0), (
            f"{forwarder.open_connections()} connection(s) closed on both sides still open"
        )


def test_a_half_closed_connection_stays_open(upstream: tuple[str, int]) -> None:
    """Only the client's side closed: the answer still comes back through it."""
    with StallingForwarder(upstream) as forwarder:
        client = socket.create_connection(("127.0.0.1", forwarder.port), timeout=5)
        with client:
            client.sendall(b"ping")
            assert client.recv(16) == b"PING"
            forwarder.stall()
            client.sendall(b"late")
            client.shutdown(socket.SHUT_WR)
            assert eventually(lambda: forwarder.open_connections() == 1)
            forwarder.resume()
            assert client.recv(16) == b"LATE"
            assert client.recv(16) == b""
        assert eventually(lambda: forwarder.open_connections() == 0)
