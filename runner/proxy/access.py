"""Who may use the API proxy: the Ansible runs of this operator process, nobody else.

The proxy forwards requests with the operator's own credentials, so reaching it is as good
as holding them. Two checks guard it, before anything else happens to a request:

* **A secret made when the process starts** (random, never written anywhere but the
  kubeconfigs generated for runs, which live in the process's private run directory). It
  travels as the password of the kubeconfig's Basic-auth user, where the Go operator writes
  `unused`: the username already names the owning CR, and the Python Kubernetes client
  sends one Authorization header only (a bearer token would replace the owner). Roles never
  see it: they use the kubeconfig they are given. A missing or wrong secret gets 401; the
  comparison takes the same time whatever the guess.
* **The Host header must be one of the proxy's own loopback names**, with its port
  (`127.0.0.1:<port>`, `localhost:<port>`, `[::1]:<port>`). A web page whose DNS name was
  rebound to 127.0.0.1 sends its own name as Host and is refused before the secret is even
  looked at.

Everything here is pure; `server.py` applies it.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Iterable
from typing import Final

from runner.proxy.owner import basic_credentials

__all__ = [
    "LOOPBACK_NAMES",
    "allowed_hosts",
    "basic_authorization",
    "host_allowed",
    "new_secret",
    "secret_matches",
]

LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")
"""How a client on this machine names the proxy (the Host header without the port)."""

_SECRET_BYTES: Final = 32


def new_secret() -> str:
    """A fresh random secret (256 bits, URL-safe text)."""
    return secrets.token_urlsafe(_SECRET_BYTES)


def basic_authorization(username: str, password: str) -> str:
    """The `Authorization` header value of HTTP Basic auth for these credentials."""
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def secret_matches(header: str | None, secret: str) -> bool:
    """The `Authorization` header carries `secret` as its Basic-auth password.

    Constant-time in the password's content (`hmac.compare_digest`), so that response
    times say nothing about how close a guess was."""
    credentials = basic_credentials(header)
    if credentials is None:
        return False
    _username, password = credentials
    return hmac.compare_digest(password.encode(), secret.encode())


def allowed_hosts(port: int, *, also: Iterable[str] = ()) -> frozenset[str]:
    """The Host header values that name the proxy listening on `port` (lower case).

    `also`: further host names it answers to (the address it was told to bind when that
    is not loopback); an IPv6 address is bracketed as in a URL."""
    names = list(LOOPBACK_NAMES)
    for host in also:
        names.append(f"[{host}]" if ":" in host and not host.startswith("[") else host)
    return frozenset(f"{name.lower()}:{port}" for name in names)


def host_allowed(header: str | None, allowed: frozenset[str]) -> bool:
    """`header` (a Host header value) is one of `allowed`; host names are case-blind."""
    return header is not None and header.strip().lower() in allowed
