"""Kubernetes modules made cheap to run in process, without changing what they do.

The zygote calls `install()` and `warm()` once, before it forks runs (`inprocess` runs
the modules). A module's code is compiled once per version of its file (the collection
loader compiles from source at every import), and `kubernetes` parses kubeconfigs with
libyaml's parser instead of PyYAML's pure-Python one (the same objects, for every
client a module makes). And one thing is shared on purpose: `kubernetes.core` keeps
the API discovery it did in a file named after the server URL, which the operator's
proxy makes unique per CR (the owner is in its user info); `install()` leaves the user
info out of that name, so all CRs of an operator share one discovery instead of each
doing its own.

`discover()` fills those discovery caches at warm-up for the kinds a role is likely to
touch, through the operator's proxy, so that no run pays for it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import socket
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["discover", "install", "warm", "without_userinfo"]

_DISCOVERY_TIMEOUT = 10.0
"""Seconds a discovery request at warm-up may take (a stuck API must not stall it)."""


def install() -> None:
    """Set this process up for in-process modules: module code compiled once (per file
    version), kubeconfigs parsed by libyaml, and discovery shared by the CRs."""
    _remember_compiled_code()
    _fast_kubeconfig_yaml()
    _share_discovery()


def warm(module_fqns: Sequence[str]) -> None:
    """Compile these modules' code now (the zygote's warm-up; runs find it compiled)."""
    for fqn in module_fqns:
        try:
            spec: Any = importlib.util.find_spec(fqn)
            if spec is not None and spec.loader is not None:
                spec.loader.get_code(fqn)
        except Exception:  # best effort: a run compiles it
            continue


def discover(url: str, kinds: Sequence[tuple[str, str]], *, authorization: str = "") -> list[str]:
    """Look up `kinds` ((apiVersion, kind)) at the API `url` the way `kubernetes.core` and
    `operator_sdk.util` modules do, filling the discovery caches they read (see the
    docstring); returns what went wrong (best effort). `authorization` is sent as the
    Authorization header (what the proxy requires). No connection is left open."""
    from kubernetes import client

    errors: list[str] = []
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(_DISCOVERY_TIMEOUT)
    try:
        for name, resolver in (
            ("kubernetes.core", _core_resolver),
            ("operator_sdk.util", _util_resolver),
        ):
            configuration: Any = client.Configuration()
            configuration.host = url
            if authorization:
                configuration.api_key = {"authorization": authorization}
            api: Any = client.ApiClient(configuration)
            try:
                resolve = resolver(api, url)
                for api_version, kind in kinds:
                    try:
                        resolve(api_version, kind)
                    except Exception as exc:
                        errors.append(f"discovering {api_version} {kind} for {name}: {exc}")
            except Exception as exc:
                errors.append(f"discovering the API at {url} for {name}: {exc}")
            finally:
                api.close()
    finally:
        socket.setdefaulttimeout(previous)
    return errors


def _core_resolver(api: Any, url: str) -> Callable[[str, str], object]:
    k8s = importlib.import_module(
        "ansible_collections.kubernetes.core.plugins.module_utils.k8s.client"
    )
    dynamic = importlib.import_module(
        "ansible_collections.kubernetes.core.plugins.module_utils.k8sdynamicclient"
    )
    discovery = importlib.import_module(
        "ansible_collections.kubernetes.core.plugins.module_utils.client.discovery"
    )
    found = k8s.K8SClient(
        configuration=api.configuration,
        client=dynamic.K8SDynamicClient(api, discoverer=discovery.LazyDiscoverer),
    )
    return lambda api_version, kind: found.resource(kind, api_version)


def _util_resolver(api: Any, url: str) -> Callable[[str, str], object]:
    from kubernetes import dynamic

    kube = importlib.import_module(
        "ansible_collections.operator_sdk.util.plugins.module_utils.osdk_kube"
    )
    dynamic_client: Any = dynamic.DynamicClient
    dyn = dynamic_client(api, cache_file=kube.discovery_cache_file(url))
    return lambda api_version, kind: kube.find_resource(dyn, kind, api_version)


def _remember_compiled_code() -> None:
    """The collection loader compiles a module from source at every import (it writes no
    bytecode); modules run in process are imported for every task. Keep the code of each
    file, checked against the file's size, modification time and inode."""
    from ansible.utils.collection_loader import _collection_finder

    loader: Any = _collection_finder._AnsibleCollectionPkgLoaderBase
    real = loader.get_code
    if getattr(real, "_runner_remembered", False):
        return
    compiled: dict[str, tuple[tuple[int, int, int], Any]] = {}

    def get_code(self: Any, fullname: str) -> Any:
        filename = self.get_filename(fullname)
        try:
            info = os.stat(filename)
        except (OSError, TypeError, ValueError):
            return real(self, fullname)
        version = (info.st_size, info.st_mtime_ns, info.st_ino)
        known = compiled.get(filename)
        if known is not None and known[0] == version:
            self._compiled_code = known[1]
            return known[1]
        code = real(self, fullname)
        if code is not None:
            compiled[filename] = (version, code)
        return code

    get_code._runner_remembered = True  # type: ignore[attr-defined]
    loader.get_code = get_code


def _fast_kubeconfig_yaml() -> None:
    """`kubernetes` reads a kubeconfig with PyYAML's pure-Python `safe_load` for every
    client; give its kubeconfig loader libyaml's parser, which builds the same objects."""
    import yaml

    if not getattr(yaml, "__with_libyaml__", False):
        return
    kube_config: Any = importlib.import_module("kubernetes.config.kube_config")
    if isinstance(kube_config.yaml, _LibyamlSafeLoad):
        return
    kube_config.yaml = _LibyamlSafeLoad(yaml)


class _LibyamlSafeLoad:
    """The `yaml` module as one user of it sees it, with `safe_load` done by libyaml."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def safe_load(self, stream: Any) -> Any:
        return self._module.load(stream, Loader=self._module.CSafeLoader)


def _share_discovery() -> None:
    """Share `kubernetes.core`'s discovery cache between the CRs (see the docstring)."""
    try:
        discovery = importlib.import_module(
            "ansible_collections.kubernetes.core.plugins.module_utils.client.discovery"
        )
    except ImportError:
        return
    discoverer: Any = getattr(discovery, "Discoverer", None)
    real = getattr(discoverer, "_Discoverer__get_default_cache_id", None)
    if real is None or getattr(real, "_runner_shared", False):
        return

    def cache_id(self: Any) -> bytes:
        key: bytes = real(self)
        host = str(self.client.configuration.host)
        plain = without_userinfo(host)
        return key.replace(host.encode(), plain.encode(), 1) if plain != host else key

    cache_id._runner_shared = True  # type: ignore[attr-defined]
    discoverer._Discoverer__get_default_cache_id = cache_id


def without_userinfo(url: str) -> str:
    """`url` without a `user:password@` part."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
