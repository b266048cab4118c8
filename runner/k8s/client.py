"""A small async Kubernetes client speaking raw JSON dicts, over kubernetes-asyncio.

kubernetes-asyncio gives us kubeconfig and in-cluster loading, auth plugins and TLS; we use
only its `ApiClient.call_api` with `_preload_content=False` and decode the JSON ourselves, so
no generated model object is built per object or per watch event. Every failure leaves
this module as an `runner.k8s.apierrors.APIError`.

Paths come from discovery (`resource()`, read by `discovery.py`), cached per group/version
and refreshed on a miss, so kinds whose CRD is created after start-up are found.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import logging
import os
import ssl
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import Any, Literal, cast

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from runner.errors import ConfigError
from runner.k8s.apierrors import APIError, NotFound, Unavailable, from_response, from_status
from runner.k8s.discovery import APIResource, resources_of
from runner.k8s.kubeconfig import locate
from runner.k8s.pool import NewestFirstConnector
from runner.structs import GVK, bodies
from runner.structs.bodies import KubeObject, WatchEvent, object_key

log = logging.getLogger("ansible-operator.k8s")

PatchType = Literal["merge", "json", "strategic"]

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
_USER_AGENT = "ansible-operator-py"
# A request that is not a watch gets this long in total before it counts as unavailable.
_REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=60, connect=15)
# Errors of the HTTP layer that mean "no (complete) answer".
_TRANSPORT_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)

Query = list[tuple[str, str]]


# What `metadata_only` asks for: the objects as PartialObjectMetadata (metadata alone, no
# spec or status), so a cache that reads only names, labels and resourceVersions stays small.
_METADATA_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
_METADATA_OBJECT = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"


class KubeClient:
    """Raw-JSON access to one API server; create with `await KubeClient.connect()`."""

    def __init__(self, api: Any, *, refresher: asyncio.Task[None] | None = None) -> None:
        self._api = api
        self._api.user_agent = _USER_AGENT
        self._refresher = refresher
        self._discovery: dict[tuple[str, str], dict[str, APIResource]] = {}
        self._discovery_locks: dict[tuple[str, str], asyncio.Lock] = {}
        self._forwarding: aiohttp.ClientSession | None = None

    # -- connecting -------------------------------------------------------------------

    @classmethod
    async def connect(cls, *, kubeconfig: str | None = None) -> KubeClient:
        """Connect with `kubeconfig` (a path, or several joined by os.pathsep), else
        $KUBECONFIG, else ~/.kube/config when it exists, else the in-cluster service
        account. Raises ConfigError when none of them can be loaded."""
        configuration = k8s_client.Configuration()
        # Checked first: the library's own messages name neither the file nor the cure.
        source = locate(kubeconfig, os.environ)
        refresher: asyncio.Task[None] | None = None
        try:
            if source is None:
                k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
            else:
                loader = await k8s_config.load_kube_config(
                    config_file=kubeconfig or os.environ.get("KUBECONFIG") or source.path,
                    client_configuration=configuration,
                    persist_config=False,
                )
                # Exec plugins and auth providers hand out short-lived tokens; the
                # library's refresher returns at once for every other kind of user.
                refresher = asyncio.create_task(
                    k8s_config.refresh_token(loader, configuration), name="kube-token-refresh"
                )
        except (k8s_config.ConfigException, OSError, ValueError, KeyError, TypeError) as err:
            where = f"{source.origin}: " if source else ""
            raise ConfigError(
                f"{where}cannot load the Kubernetes client configuration: {err}"
            ) from err
        # Each informer holds one connection for its watch, and an operator has one per
        # watched kind and namespace (and dependent kind): with the library's default
        # pool of 100, more watches than that left no connection for any other request,
        # which then failed with a connect timeout. (client-go multiplexes them all on
        # one HTTP/2 connection.)
        configuration.connection_pool_maxsize = 0  # aiohttp: no limit
        api = k8s_client.ApiClient(configuration=configuration)
        if not _environment_applies(str(configuration.host)):
            # The library's pool asks the environment for a proxy and ~/.netrc for
            # credentials on every request, each from a thread of its own: two thread
            # hops per request that can change nothing for this server.
            library_pool = api.rest_client.pool_manager
            api.rest_client.pool_manager = _session(configuration, trust_env=False)
            await library_pool.close()
        return cls(api, refresher=refresher)

    async def close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._refresher
            self._refresher = None
        if self._forwarding is not None:
            await self._forwarding.close()
            self._forwarding = None
        await self._api.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- credentials, for modules that forward requests (the proxy) -------------------

    @property
    def configuration(self) -> Any:
        """The kubernetes_asyncio `Configuration` in use (host, TLS files, tokens)."""
        return self._api.configuration

    @property
    def server(self) -> str:
        """The API server's base URL, e.g. https://127.0.0.1:6443."""
        return str(self._api.configuration.host).rstrip("/")

    @property
    def tls_server_name(self) -> str | None:
        """The name to verify the server certificate against when it is not the host's."""
        name = getattr(self._api.configuration, "tls_server_name", None)
        return str(name) if name else None

    def ssl_context(self) -> ssl.SSLContext:
        """An SSL context with the same CA, client certificate and verification settings
        as this client's own connections (for aiohttp's `ssl=`)."""
        return _ssl_context(self._api.configuration)

    async def auth_headers(self) -> dict[str, str]:
        """The headers that authenticate a request now (a bearer or basic token; empty
        for client-certificate auth). Ask again per request: tokens can be refreshed."""
        headers: dict[str, str] = {}
        settings = await self._api.configuration.auth_settings()
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        return headers

    async def forward(
        self,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, str]] = (),
        headers: Mapping[str, str] | None = None,
        data: bytes | None = None,
        timeout: aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        """Send a request as-is on this client's connection pool with its credentials
        and return the unread response, whatever its status (the caller releases it).
        Raises `Unavailable` only when there is no answer."""
        conf = self._api.configuration
        sent = dict(headers or {})
        sent.update(await self.auth_headers())
        kwargs: dict[str, Any] = {}
        if self.tls_server_name:
            kwargs["server_hostname"] = self.tls_server_name
        if getattr(conf, "proxy", None):
            kwargs["proxy"] = conf.proxy
        if getattr(conf, "proxy_headers", None):
            kwargs["proxy_headers"] = conf.proxy_headers
        try:
            response: aiohttp.ClientResponse = await self._forwarding_session().request(
                method,
                self.server + path,
                params=list(query),
                headers=sent,
                data=data,
                timeout=timeout or aiohttp.ClientTimeout(),
                **kwargs,
            )
        except _TRANSPORT_ERRORS as err:
            raise _unavailable(err) from err
        return response

    def _forwarding_session(self) -> aiohttp.ClientSession:
        """The connection pool `forward` sends on: our own, made like the library's own
        pool (same TLS settings, connection limit, environment proxies and read buffer)
        but not reached through its private attributes. Made on first use, inside the
        running event loop."""
        if self._forwarding is None or self._forwarding.closed:
            conf = self._api.configuration
            self._forwarding = _session(conf, trust_env=_environment_applies(self.server))
        return self._forwarding

    # -- discovery --------------------------------------------------------------------

    async def resource(self, gvk: GVK) -> APIResource:
        """The discovery entry of `gvk`; raises NotFound when the server does not serve
        it (after one fresh look, so newly created CRDs are found)."""
        key = (gvk.group, gvk.version)
        cached = self._discovery.get(key)
        if cached is not None and gvk.kind in cached:
            return cached[gvk.kind]
        lock = self._discovery_locks.setdefault(key, asyncio.Lock())
        async with lock:
            cached = self._discovery.get(key)
            if cached is None or gvk.kind not in cached:
                cached = await self._discover(gvk.group, gvk.version)
                self._discovery[key] = cached
        if gvk.kind not in cached:
            raise NotFound(
                404,
                "NotFound",
                f"the server does not serve kind {gvk.kind} in {gvk.api_version}",
                {},
            )
        return cached[gvk.kind]

    async def resource_for_plural(self, group: str, version: str, plural: str) -> APIResource:
        """The discovery entry whose URL name is `plural` (what a request path carries);
        NotFound when the server does not serve it, after one fresh look."""
        key = (group, version)
        for fresh in (False, True):
            cached = self._discovery.get(key)
            if cached is None or fresh:
                lock = self._discovery_locks.setdefault(key, asyncio.Lock())
                async with lock:
                    cached = await self._discover(group, version)
                    self._discovery[key] = cached
            for resource in cached.values():
                if resource.plural == plural:
                    return resource
        api_version = f"{group}/{version}" if group else version
        raise NotFound(404, "NotFound", f"the server does not serve {plural} in {api_version}", {})

    async def _discover(self, group: str, version: str) -> dict[str, APIResource]:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = await self._json("GET", path)
        except NotFound:
            return {}
        return resources_of(listing, group=group, version=version)

    # -- reading ----------------------------------------------------------------------

    async def get(self, gvk: GVK, *, name: str, namespace: str | None) -> KubeObject:
        res = await self.resource(gvk)
        return await self._object("GET", res.path(namespace=namespace, name=name))

    async def list(
        self,
        gvk: GVK,
        *,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = 500,
        metadata_only: bool = False,
    ) -> tuple[list[KubeObject], str]:
        """All objects of `gvk` in `namespace` (None: all namespaces), fetched in pages
        of `limit`, each with apiVersion and kind filled in; and the list's
        resourceVersion to watch from. Raises Gone when a continue token expires.
        `metadata_only`: each object is its metadata alone."""
        res = await self.resource(gvk)
        path = res.path(namespace=namespace)
        accept = _METADATA_LIST if metadata_only else "application/json"
        items: list[KubeObject] = []
        token = ""
        resource_version = ""
        while True:
            query: Query = [("limit", str(limit))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if token:
                query.append(("continue", token))
            page = await self._json("GET", path, query=query, accept=accept)
            for item in page.get("items") or []:
                if metadata_only:  # replace PartialObjectMetadata's with the kind's
                    item["apiVersion"], item["kind"] = res.api_version, res.kind
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
                items.append(item)
            resource_version = bodies.resource_version(page) or resource_version
            token = str(bodies.metadata(page).get("continue") or "")
            if not token:
                return items, resource_version

    async def watch(
        self,
        gvk: GVK,
        *,
        namespace: str | None,
        resource_version: str | None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        metadata_only: bool = False,
    ) -> AsyncGenerator[tuple[str, KubeObject], None]:
        """Yield (type, object) for each event after `resource_version`: ADDED, MODIFIED,
        DELETED and BOOKMARK. Ends when the server closes the watch (after about
        `timeout_seconds`); raises Gone when the resourceVersion is too old and the other
        APIErrors on failures. Close the iterator (`contextlib.aclosing`) when leaving
        early, to free the connection. `metadata_only`: each object is its metadata
        alone, with the kind's apiVersion and kind."""
        res = await self.resource(gvk)
        query: Query = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if label_selector:
            query.append(("labelSelector", label_selector))
        # The server ends the watch after timeout_seconds; the read timeout only catches
        # a connection that silently died.
        timeout = aiohttp.ClientTimeout(connect=15, sock_read=timeout_seconds + 30)
        accept = _METADATA_OBJECT if metadata_only else "application/json"
        response = await self._send(
            "GET", res.path(namespace=namespace), query, timeout=timeout, accept=accept
        )
        try:
            if response.status >= 400:
                raise from_response(response.status, await _read(response))
            while True:
                try:
                    line = await response.content.readline()
                except TimeoutError:
                    return  # nothing for too long: the caller watches again
                except _TRANSPORT_ERRORS as err:
                    raise _unavailable(err) from err
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    event: WatchEvent = json.loads(line)
                except ValueError as err:
                    raise APIError(
                        0, "BadWatchEvent", line[:200].decode(errors="replace"), {}
                    ) from err
                kind = str(event.get("type", ""))
                obj = event.get("object")
                if not isinstance(obj, dict):
                    continue
                if kind == "ERROR":
                    status: Mapping[str, Any] = obj  # a Status
                    raise from_status(int(status.get("code") or 500), status)
                if metadata_only:
                    obj["apiVersion"], obj["kind"] = res.api_version, res.kind
                yield kind, obj
        finally:
            if response.content.at_eof():
                response.release()
            else:
                response.close()

    # -- writing ----------------------------------------------------------------------

    async def create(
        self, gvk: GVK, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> KubeObject:
        """POST `body`; `namespace` defaults to the body's own metadata.namespace."""
        res = await self.resource(gvk)
        ns = namespace or bodies.namespace(body)
        return await self._object("POST", res.path(namespace=ns), body=body)

    async def replace(self, gvk: GVK, *, obj: Mapping[str, Any]) -> KubeObject:
        """PUT `obj` (with its metadata.resourceVersion: Conflict when stale)."""
        res = await self.resource(gvk)
        key = object_key(obj)
        path = res.path(namespace=key.namespace, name=key.name)
        return await self._object("PUT", path, body=obj)

    async def replace_status(self, gvk: GVK, *, obj: Mapping[str, Any]) -> KubeObject:
        """PUT `obj` to the status subresource; its metadata.resourceVersion makes a
        stale write fail with Conflict instead of overwriting a newer status."""
        res = await self.resource(gvk)
        key = object_key(obj)
        path = res.path(namespace=key.namespace, name=key.name, subresource="status")
        return await self._object("PUT", path, body=obj)

    async def patch(
        self,
        gvk: GVK,
        *,
        name: str,
        namespace: str | None,
        body: Mapping[str, Any] | builtins.list[Any],
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> KubeObject:
        """PATCH one object (or its `subresource`, e.g. "status"); `body` is a list of
        operations for `patch_type="json"`."""
        res = await self.resource(gvk)
        path = res.path(namespace=namespace, name=name, subresource=subresource)
        content_type = _PATCH_CONTENT_TYPES[patch_type]
        return await self._object("PATCH", path, body=body, content_type=content_type)

    async def delete(
        self,
        gvk: GVK,
        *,
        name: str,
        namespace: str | None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        resource_version: str | None = None,
    ) -> KubeObject:
        """DELETE one object; returns what the server answers (the object while
        finalizers hold it, else a Status). `resource_version` is a precondition."""
        res = await self.resource(gvk)
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if resource_version:
            options["preconditions"] = {"resourceVersion": resource_version}
        return await self._object("DELETE", res.path(namespace=namespace, name=name), body=options)

    # -- transport --------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        path: str,
        query: Query,
        *,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: aiohttp.ClientTimeout = _REQUEST_TIMEOUT,
    ) -> aiohttp.ClientResponse:
        try:
            response: aiohttp.ClientResponse = await self._api.call_api(
                path,
                method,
                query_params=query,
                header_params={"Accept": accept, "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except _TRANSPORT_ERRORS as err:
            raise _unavailable(err) from err
        return response

    async def _object(
        self, method: str, path: str, *, body: Any = None, content_type: str = "application/json"
    ) -> KubeObject:
        """`_json` for an answer that is an object (or, from a delete, a Status)."""
        return cast(
            KubeObject, await self._json(method, path, body=body, content_type=content_type)
        )

    async def _json(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> dict[str, Any]:
        response = await self._send(
            method, path, query or [], body=body, content_type=content_type, accept=accept
        )
        data = await _read(response)
        if response.status >= 400:
            raise from_response(response.status, data)
        try:
            decoded = json.loads(data) if data else {}
        except ValueError as err:
            raise APIError(
                response.status, "BadResponse", f"{method} {path}: not JSON", {}
            ) from err
        if not isinstance(decoded, dict):
            raise APIError(response.status, "BadResponse", f"{method} {path}: not an object", {})
        return decoded


def _ssl_context(conf: Any) -> ssl.SSLContext:
    """What the library's pool makes from the configuration: its CA, client certificate
    and verification settings."""
    context = ssl.create_default_context(cafile=conf.ssl_ca_cert)
    if conf.cert_file:
        context.load_cert_chain(conf.cert_file, keyfile=conf.key_file)
    if not conf.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(conf, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _session(conf: Any, *, trust_env: bool) -> aiohttp.ClientSession:
    """A connection pool as the library makes its own (TLS settings, connection limit,
    read buffer), asking the environment for proxies and credentials only with
    `trust_env`, reusing the newest idle connection first (`pool.py`). Made inside the
    running event loop."""
    return aiohttp.ClientSession(
        connector=NewestFirstConnector(limit=conf.connection_pool_maxsize, ssl=_ssl_context(conf)),
        trust_env=trust_env,
        # Watch events of large objects exceed aiohttp's default read buffer (etcd allows
        # requests up to 1.5 MiB).
        read_bufsize=2**21,
    )


def _environment_applies(server: str) -> bool:
    """Whether aiohttp's `trust_env` changes a request to `server`: the environment names
    a proxy for it (HTTPS_PROXY and NO_PROXY as aiohttp reads them), or ~/.netrc (NETRC)
    holds credentials for its host. Read once, when a pool is made: the operator's
    environment and home do not change while it runs."""
    from aiohttp import helpers
    from yarl import URL

    url = URL(server)
    with contextlib.suppress(LookupError):
        helpers.get_env_proxy_for_url(url)
        return True
    if url.host is None:
        return False
    with contextlib.suppress(LookupError):
        helpers.basicauth_from_netrc(helpers.netrc_from_env(), url.host)
        return True
    return False


async def _read(response: aiohttp.ClientResponse) -> bytes:
    try:
        async with response:
            return await response.read()
    except _TRANSPORT_ERRORS as err:
        raise _unavailable(err) from err


def _unavailable(err: BaseException) -> Unavailable:
    return Unavailable(0, "ConnectionError", str(err) or type(err).__name__, {})


__all__ = ["KubeClient", "PatchType"]
