"""A loopback TCP forwarder a test controls: pass bytes through, stall, or reset.

Put between a client and the API server (a kubeconfig whose server is the forwarder's
address), it lets a test break the connection the way networks break it:

- `stall()`: every connection stays open but no byte moves in either direction, and new
  connections are accepted and then left waiting — a hung API server or a black-holed
  network, which only timeouts notice;
- `resume()`: bytes flow again (what was held back is delivered);
- `reset()`: every open connection is closed with a TCP reset (new ones work).

TLS passes through untouched (the forwarder never looks at the bytes), so the API
server's certificate must be valid for 127.0.0.1, as the local cluster's is.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

_CHUNK = 65536


class StallingForwarder:
    """Forwards 127.0.0.1:`port` to `upstream` (host, port); stop with `close()`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, name="tcpstall-accept", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def open_connections(self) -> int:
        """Connections forwarded now (each has two sockets; a waiting one counts half)."""
        with self._lock:
            return len(self._sockets) // 2

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def reset(self) -> int:
        """Reset every open connection; return how many there were."""
        with self._lock:
            open_sockets = list(self._sockets)
            self._sockets.clear()
        for sock in open_sockets:
            with contextlib.suppress(OSError):
                # Linger 0: close() sends RST instead of FIN.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            with contextlib.suppress(OSError):
                # Wakes the pump blocked in recv() on it: until that returns, close() could
                # not release the socket and the peer would never hear of it.
                sock.shutdown(socket.SHUT_RD)
            with contextlib.suppress(OSError):
                sock.close()
        return len(open_sockets) // 2

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        self.reset()

    def __enter__(self) -> StallingForwarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(
                target=self._connect, args=(client,), name="tcpstall-connect", daemon=True
            ).start()

    def _connect(self, client: socket.socket) -> None:
        self._track(client)
        self._flowing.wait()  # a stalled forwarder leaves new connections waiting too
        try:
            server = socket.create_connection(self.upstream, timeout=10)
        except OSError:
            self._drop(client)
            return
        server.settimeout(None)
        self._track(server)
        self.connections += 1
        # Both pumps of a connection count down; the last to finish closes both sockets
        # (a connection closed cleanly on both sides must not stay counted, nor open).
        left = [2]
        for source, target in ((client, server), (server, client)):
            threading.Thread(
                target=self._pump,
                args=(source, target, left),
                name="tcpstall-pump",
                daemon=True,
            ).start()

    def _pump(self, source: socket.socket, target: socket.socket, left: list[int]) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    with contextlib.suppress(OSError):
                        target.shutdown(socket.SHUT_WR)
                    with self._lock:
                        left[0] -= 1
                        done = left[0] == 0
                    if done:
                        self._drop(source)
                        self._drop(target)
                    return
                self._flowing.wait()
                if self._closed.is_set():
                    return
                target.sendall(data)
        except OSError:
            self._drop(source)
            self._drop(target)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()


@contextlib.contextmanager
def forwarding(server_url: str) -> Iterator[StallingForwarder]:
    """A forwarder to the host and port of `server_url` (e.g. a kubeconfig's server)."""
    parts = urlsplit(server_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    with StallingForwarder((parts.hostname or "127.0.0.1", port)) as forwarder:
        yield forwarder


def kubeconfig_through(kubeconfig: dict[str, Any], forwarder: StallingForwarder) -> dict[str, Any]:
    """A copy of `kubeconfig` (parsed) whose clusters' servers are the forwarder."""
    copied: dict[str, Any] = {**kubeconfig, "clusters": []}
    for entry in kubeconfig.get("clusters") or []:
        cluster = dict(entry["cluster"])
        scheme = urlsplit(cluster["server"]).scheme or "https"
        cluster["server"] = f"{scheme}://{forwarder.address}"
        copied["clusters"].append({**entry, "cluster": cluster})
    return copied


@contextlib.contextmanager
def stalling_kubeconfig(
    kubeconfig: Path, directory: Path
) -> Iterator[tuple[StallingForwarder, Path]]:
    """A forwarder to the API server of `kubeconfig`, and a kubeconfig (written into
    `directory`) that goes through it; the forwarder is resumed and closed afterwards."""
    admin = yaml.safe_load(kubeconfig.read_text())
    with forwarding(admin["clusters"][0]["cluster"]["server"]) as forwarder:
        path = directory / "through-forwarder.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig_through(admin, forwarder)))
        try:
            yield forwarder, path
        finally:
            forwarder.resume()
