"""Kubernetes API access shared by the operator_sdk.util modules.

The modules run in the role's Ansible process. Under the operator, the reconciler exports
`K8S_AUTH_KUBECONFIG` pointing at its loopback API proxy, so every call made here goes
through that proxy (owner references, dependent watches, cache). Outside an operator the
same modules work like `kubernetes.core` ones: explicit parameters first, then
`K8S_AUTH_*` environment variables, then the in-cluster service account, then the
default kubeconfig.

Everything Kubernetes-specific is imported lazily so that a missing `kubernetes` package
becomes a clean task failure instead of an import traceback.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import tempfile
import urllib.parse
from collections.abc import Mapping
from typing import Any

# The authentication options of kubernetes.core (and of the upstream collection), all
# optional. Each can also come from `K8S_AUTH_<NAME>` (or `K8S_AUTH_<ALIAS>`).
AUTH_ARG_SPEC: dict[str, dict[str, Any]] = {
    "kubeconfig": {"type": "raw"},
    "context": {"type": "str"},
    "host": {"type": "str"},
    "api_key": {"type": "str", "no_log": True},
    "username": {"type": "str"},
    "password": {"type": "str", "no_log": True},
    "validate_certs": {"type": "bool", "aliases": ["verify_ssl"]},
    "ca_cert": {"type": "path", "aliases": ["ssl_ca_cert"]},
    "client_cert": {"type": "path", "aliases": ["cert_file"]},
    "client_key": {"type": "path", "aliases": ["key_file"], "no_log": False},
    "proxy": {"type": "str"},
    "persist_config": {"type": "bool"},
}

# Which object a module acts on.
NAME_ARG_SPEC: dict[str, dict[str, Any]] = {
    "api_version": {"type": "str", "default": "v1", "aliases": ["api", "version"]},
    "kind": {"type": "str", "required": True},
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str"},
}

# Ansible option -> attribute of kubernetes.client.Configuration.
_CONFIGURATION_ATTRIBUTES = {
    "host": "host",
    "username": "username",
    "password": "password",
    "validate_certs": "verify_ssl",
    "ca_cert": "ssl_ca_cert",
    "client_cert": "cert_file",
    "client_key": "key_file",
    "proxy": "proxy",
}

_FALSE_WORDS = frozenset({"0", "false", "no", "n", "off", "f"})


_clients: dict[tuple[str, ...], Any] = {}
"""Clients made in this process, by configuration: a module run in the fast backend's
process (several per run) reuses the client, its discovery and its connections."""


class KubeClientError(Exception):
    """The client could not be configured or the API could not be reached."""


def kubernetes_import_error() -> str | None:
    """None when the `kubernetes` package imports, else the reason it does not."""
    try:
        import kubernetes.dynamic  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def auth_settings(
    params: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The authentication settings in effect: module parameters win over `K8S_AUTH_*`."""
    env = os.environ if environ is None else environ
    settings: dict[str, Any] = {}
    for name, spec in AUTH_ARG_SPEC.items():
        value = params.get(name)
        if value is None:
            value = _from_environment(env, name, spec)
        if value is not None:
            settings[name] = value
    return settings


def _from_environment(env: Mapping[str, str], name: str, spec: Mapping[str, Any]) -> Any:
    for candidate in (name, *spec.get("aliases", ())):
        raw = env.get(f"K8S_AUTH_{candidate.upper()}")
        if raw:
            if spec.get("type") == "bool":
                return raw.strip().lower() not in _FALSE_WORDS
            return raw
    return None


def dynamic_client(params: Mapping[str, Any]) -> Any:
    """A `kubernetes.dynamic.DynamicClient` configured from the module's auth options."""
    import kubernetes.config
    from kubernetes import client
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.dynamic import DynamicClient

    # The client's functions are untyped; hold them as Any for strict type checking.
    config: Any = kubernetes.config
    dynamic_client_class: Any = DynamicClient

    auth = auth_settings(params)
    configuration = client.Configuration()
    direct = bool(auth.get("host")) and (
        bool(auth.get("api_key")) or bool(auth.get("username") and auth.get("password"))
    )
    try:
        if direct:
            pass  # enough to talk to the API without any kubeconfig
        elif auth.get("kubeconfig") is not None or auth.get("context"):
            _load_kubeconfig(config, auth, configuration)
        else:
            try:
                config.load_incluster_config(client_configuration=configuration)
            except ConfigException:
                _load_kubeconfig(config, auth, configuration)
    except Exception as exc:
        raise KubeClientError(f"could not load the Kubernetes client configuration: {exc}") from exc

    for option, attribute in _CONFIGURATION_ATTRIBUTES.items():
        if auth.get(option) is not None:
            setattr(configuration, attribute, auth[option])
    if auth.get("api_key"):
        configuration.api_key = {"authorization": f"Bearer {auth['api_key']}"}

    key = _client_key(configuration)
    cached = _clients.get(key)
    if cached is not None:
        return cached
    try:
        dyn = dynamic_client_class(
            client.ApiClient(configuration), cache_file=discovery_cache_file(configuration.host)
        )
    except Exception as exc:
        raise KubeClientError(
            f"could not reach the Kubernetes API at {configuration.host}: {exc}"
        ) from exc
    _clients[key] = dyn
    return dyn


def _client_key(configuration: Any) -> tuple[str, ...]:
    """What makes two configurations talk to the same API as the same user."""
    return tuple(
        repr(getattr(configuration, attribute, None))
        for attribute in (
            "host",
            "username",
            "password",
            "api_key",
            "api_key_prefix",
            "verify_ssl",
            "ssl_ca_cert",
            "cert_file",
            "key_file",
            "proxy",
            "proxy_headers",
            "assert_hostname",
            "tls_server_name",
        )
    )


def discovery_cache_file(host: str) -> str:
    """The discovery cache of an API server, shared by all users of the same URL.

    The `kubernetes` client keys its file by the server URL, user info included; the
    operator's API proxy puts the owning CR there, so each CR would discover the API
    anew into a file of its own. What the API offers does not depend on that.
    """
    parts = urllib.parse.urlsplit(host)
    netloc = parts.netloc.rpartition("@")[2]
    plain = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    user = str(os.getuid()) if hasattr(os, "getuid") else ""
    digest = hashlib.sha256(f"{plain}-{user}".encode()).hexdigest()
    return os.path.join(tempfile.gettempdir(), f"osrcp-{digest}.json")


def _load_kubeconfig(config: Any, auth: Mapping[str, Any], configuration: Any) -> None:
    source = auth.get("kubeconfig")
    context = auth.get("context")
    persist = bool(auth.get("persist_config", False))
    if isinstance(source, Mapping):
        config.load_kube_config_from_dict(
            config_dict=dict(source),
            context=context,
            client_configuration=configuration,
            persist_config=persist,
        )
        return
    path = os.path.expanduser(str(source)) if source else None
    if path is not None and not os.path.isfile(path):
        raise KubeClientError(f"the kubeconfig file {path} does not exist")
    config.load_kube_config(
        config_file=path,
        context=context,
        client_configuration=configuration,
        persist_config=persist,
    )


def find_resource(dyn: Any, kind: str, api_version: str) -> Any:
    """The API resource for `kind` (or its plural, singular or short name), or None."""
    from kubernetes.dynamic.exceptions import ResourceNotFoundError, ResourceNotUniqueError

    for attribute in ("kind", "name", "singular_name"):
        try:
            return dyn.resources.get(api_version=api_version, **{attribute: kind})
        except (ResourceNotFoundError, ResourceNotUniqueError):
            continue
    try:
        return dyn.resources.get(api_version=api_version, short_names=[kind])
    except (ResourceNotFoundError, ResourceNotUniqueError):
        return None


def api_error(exc: Exception) -> dict[str, Any]:
    """The parts of a `kubernetes` API error worth showing: status, reason, message, body."""
    status = getattr(exc, "status", None)
    reason = getattr(exc, "reason", None)
    body: Any = getattr(exc, "body", None)
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    message = str(exc)
    if isinstance(body, str):
        with contextlib.suppress(ValueError):
            body = json.loads(body)
    if isinstance(body, Mapping) and body.get("message"):
        message = str(body["message"])
    return {"status": status, "reason": reason, "message": message, "body": body}


def describe_api_error(exc: Exception) -> str:
    """One line for a task failure: `409 Conflict: the object has been modified ...`."""
    details = api_error(exc)
    head = " ".join(str(part) for part in (details["status"], details["reason"]) if part)
    return f"{head}: {details['message']}" if head else details["message"]


def is_api_error(exc: BaseException, status: int | None = None) -> bool:
    """True for an API error of the dynamic client (with that HTTP status, if given)."""
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic.exceptions import DynamicApiError

    if not isinstance(exc, DynamicApiError | ApiException):
        return False
    return status is None or getattr(exc, "status", None) == status


def now_rfc3339() -> str:
    """The current UTC time as Kubernetes writes timestamps: `2025-01-31T12:00:00Z`."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
