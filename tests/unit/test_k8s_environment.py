"""The API client asks the environment for proxies and ~/.netrc for credentials once,
when it connects, instead of on every request (aiohttp's `trust_env` does both per
request, each in a thread): only when the answer is "nothing for this server" are its
pools made without `trust_env`, so requests go exactly where they went before."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from runner.k8s.client import KubeClient, _environment_applies

SERVER = "https://127.0.0.1:6443"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "NETRC",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_nothing_in_the_environment(clean_env: Path) -> None:
    assert not _environment_applies(SERVER)


def test_a_proxy_for_the_server(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert _environment_applies(SERVER)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert not _environment_applies(SERVER)


def test_netrc_credentials_for_the_host(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = clean_env / ".netrc"
    netrc.write_text("machine 127.0.0.1 login user password secret\n")
    netrc.chmod(0o600)
    assert _environment_applies(SERVER)
    monkeypatch.setenv("NETRC", str(clean_env / "elsewhere"))
    assert not _environment_applies(SERVER)


def _kubeconfig(path: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": SERVER, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("proxy", [False, True])
def test_the_pools_trust_the_environment_only_when_it_applies(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, proxy: bool
) -> None:
    if proxy:
        monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    kubeconfig = _kubeconfig(clean_env / "kubeconfig")

    async def pools() -> tuple[bool, bool]:
        client = await KubeClient.connect(kubeconfig=str(kubeconfig))
        try:
            library = client._api.rest_client.pool_manager.trust_env
            forwarding = client._forwarding_session().trust_env
            return library, forwarding
        finally:
            await client.close()

    assert asyncio.run(pools()) == (proxy, proxy)
