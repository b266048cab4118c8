"""Who may use the API proxy (`runner.proxy.access`): the secret and the Host names."""

from __future__ import annotations

import base64

import pytest

from runner.proxy.access import (
    allowed_hosts,
    basic_authorization,
    host_allowed,
    new_secret,
    secret_matches,
)
from runner.proxy.owner import Owner, encode_owner, owner_from_basic_auth

SECRET = "Zm9vYmFyLXNlY3JldC12YWx1ZQ"
OWNER = Owner(
    api_version="cache.example.com/v1", kind="Memcached", name="m", uid="u", namespace="n"
)


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_secrets_are_fresh_and_long() -> None:
    secrets = {new_secret() for _ in range(50)}
    assert len(secrets) == 50
    assert all(len(secret) >= 40 for secret in secrets)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param(basic_authorization(encode_owner(OWNER), SECRET), True, id="run-kubeconfig"),
        pytest.param(basic_authorization("", SECRET), True, id="no-owner"),
        pytest.param(f"basic {b64(':' + SECRET)}", True, id="scheme-case-insensitive"),
        pytest.param(None, False, id="no-header"),
        pytest.param("", False, id="empty-header"),
        pytest.param(basic_authorization(encode_owner(OWNER), "unused"), False, id="go-password"),
        pytest.param(basic_authorization("x", SECRET[:-1]), False, id="prefix-of-the-secret"),
        pytest.param(basic_authorization("x", SECRET + "x"), False, id="secret-and-more"),
        pytest.param(basic_authorization("x", ""), False, id="empty-password"),
        pytest.param(f"Basic {b64(SECRET)}", False, id="secret-as-username-without-colon"),
        pytest.param(f"Basic {b64(SECRET + ':')}", False, id="secret-as-username"),
        pytest.param(f"Bearer {SECRET}", False, id="bearer"),
        pytest.param("Basic !!!not-base64", False, id="garbage"),
        pytest.param(basic_authorization("x", SECRET.upper()), False, id="case-matters"),
    ],
)
def test_secret_matches(header: str | None, expected: bool) -> None:
    assert secret_matches(header, SECRET) is expected


def test_the_owner_still_travels_with_the_secret() -> None:
    header = basic_authorization(encode_owner(OWNER), SECRET)
    assert owner_from_basic_auth(header) == OWNER
    assert secret_matches(header, SECRET)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param("127.0.0.1:8888", True, id="ipv4"),
        pytest.param("localhost:8888", True, id="localhost"),
        pytest.param("LocalHost:8888", True, id="case-blind"),
        pytest.param("[::1]:8888", True, id="ipv6"),
        pytest.param(" localhost:8888 ", True, id="spaces"),
        pytest.param(None, False, id="no-host"),
        pytest.param("", False, id="empty"),
        pytest.param("localhost", False, id="no-port"),
        pytest.param("localhost:9999", False, id="other-port"),
        pytest.param("evil.example:8888", False, id="rebound-name"),
        pytest.param("localhost.evil.example:8888", False, id="suffix"),
        pytest.param("127.0.0.2:8888", False, id="other-loopback-address"),
        pytest.param("0.0.0.0:8888", False, id="any-address"),
        pytest.param("::1:8888", False, id="unbracketed-ipv6"),
    ],
)
def test_host_allowed(header: str | None, expected: bool) -> None:
    assert host_allowed(header, allowed_hosts(8888)) is expected


def test_a_bound_address_is_also_allowed() -> None:
    allowed = allowed_hosts(8888, also=("10.0.0.5", "fd00::5"))
    assert host_allowed("10.0.0.5:8888", allowed)
    assert host_allowed("[fd00::5]:8888", allowed)
    assert host_allowed("localhost:8888", allowed)
    assert not host_allowed("10.0.0.6:8888", allowed)
