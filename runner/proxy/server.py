"""The API proxy: the Kubernetes endpoint every Ansible run talks to.

Each run's kubeconfig points at this loopback server with the owning CR encoded as the
basic-auth user name (`owner.py`) and this process's secret as the password. For every
request the proxy:

0. refuses (403) a Host header that is not one of its own loopback names and (401) a
   request without the secret (`access.py`);
1. answers GET/LIST of kinds it watches from the informer cache (`X-Cache: HIT`) when
   it safely can (`_cacheable`) and the kind's informer has listed it (a kind's first
   read starts the informer and goes to the API server rather than wait for the list);
2. otherwise forwards the request to the API server with the operator's own credentials
   (whatever Authorization the client sent is dropped), streaming watch responses;
   either way, a GET of an object the run's owner owns re-registers the dependent watch
   of its kind (which is how watches come back after an operator restart);
3. leaves `metadata.managedFields` out of every JSON answer (`forward.py`, which also
   holds the time limits and the streaming of step 2);
4. relays upgrade requests (`exec`, `attach`, `portforward`) on a connection of its own
   and splices the two byte streams once the API server switched protocols
   (`upgrade.py`), and streams `log` answers (`k8s_log` with `follow`) as they come;
5. on a create by a run, adds the owner reference (or the primary-resource annotations
   across namespaces) to the new object, and once the API server accepted it, starts
   the dependent watch of its kind for the owner's watch.

Given an `Intercept` (`ansible-operator plan`'s dry-run layer), steps 1, 2 and 5's watch
are its: every API request, with the owner injected into what a run creates, goes to it
and it answers; no cache is read and no dependent watch starts. With `upgrades=False`,
step 4 is refused (403) and the requests are listed in `refused_upgrades`.

It binds to loopback only unless told otherwise, and answers only requests carrying its
secret: anyone who could use it would act with the operator's credentials.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from runner.errors import ProxyError
from runner.k8s.apierrors import APIError
from runner.k8s.client import KubeClient
from runner.k8s.discovery import APIResource
from runner.proxy import access, upgrade
from runner.proxy.cache import InformerCache
from runner.proxy.dependents import DependentWatches
from runner.proxy.filtering import filter_objects, list_body
from runner.proxy.forward import REQUEST_TIMEOUT_SECONDS, forward, status_body
from runner.proxy.owner import (
    Injection,
    Owner,
    inject_owner,
    owner_from_basic_auth,
    owners_of,
    proxy_kubeconfig,
)
from runner.proxy.requestinfo import RequestInfo, parse_request
from runner.structs import GVK, NamespacedName, bodies
from runner.watches.model import Watch

log = logging.getLogger("ansible-operator.proxy")

_READABLE = frozenset(("get", "list", "watch"))
_CACHED_SUBRESOURCES = frozenset(("", "status"))


class Intercept(Protocol):
    """Answers every API request of the proxy's clients in its stead (see the module
    docstring); `body` is the request's, with the owner already injected into a create."""

    async def __call__(
        self,
        request: web.Request,
        info: RequestInfo,
        resource: APIResource | None,
        body: bytes | None,
    ) -> web.StreamResponse: ...


@dataclass
class ProxyStats:
    """Counters for benchmarks and logs."""

    requests: int = 0
    cache_hits: int = 0
    injected: int = 0
    refused: int = 0
    upgrades: int = 0


class ProxyServer:
    """Serves the Kubernetes API to Ansible runs on `host:port` (port 0: a free one).

    `secret` is what runs must send as their Basic-auth password (`access.py`); a new
    random one by default. Runs get it through `kubeconfig()`."""

    def __init__(
        self,
        client: KubeClient,
        *,
        watches: Sequence[Watch],
        namespaces: Sequence[str] | None,
        cache: InformerCache,
        dependents: DependentWatches,
        inject_owner_ref: bool = True,
        host: str = "127.0.0.1",
        port: int = 8888,
        allow_remote: bool = False,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
        secret: str | None = None,
        shard_label: tuple[str, str] | None = None,
        intercept: Intercept | None = None,
        upgrades: bool = True,
    ) -> None:
        if not allow_remote and not _is_loopback(host):
            raise ProxyError(
                f"the API proxy acts with the operator's credentials: refusing to listen on "
                f"{host!r}; use a loopback address (127.0.0.1, ::1, localhost)"
            )
        self._client = client
        self._watches = {watch.gvk: watch for watch in watches}
        self._namespaces = None if not namespaces or "" in namespaces else frozenset(namespaces)
        self._cache = cache
        self._dependents = dependents
        self._inject = inject_owner_ref
        # Sharding: the cache holds only this replica's share, so a LIST from it would
        # miss the others'; and what a run creates is labelled with the shard, so the
        # dependent watches (narrowed to that label) see it.
        self._shard_label = shard_label
        self._request_timeout = request_timeout
        self._host = host
        self._requested_port = port
        self.secret = secret or access.new_secret()
        self._allowed_hosts: frozenset[str] = frozenset()
        self._upstream_tls: ssl.SSLContext | None = None
        self._sessions: set[asyncio.Task[Any]] = set()
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.stats = ProxyStats()
        self._all_blacklisted = frozenset(gvk for watch in watches for gvk in watch.blacklist)
        self._intercept = intercept
        self._upgrades = upgrades
        self.refused_upgrades: list[str] = []
        """`METHOD path` of each upgrade request refused (`upgrades=False`)."""

    def set_watches(self, watches: Sequence[Watch]) -> None:
        """Use a reloaded watches.yaml from the next request on."""
        self._watches = {watch.gvk: watch for watch in watches}
        self._all_blacklisted = frozenset(gvk for watch in watches for gvk in watch.blacklist)

    async def start(self) -> int:
        """Listen; return the port actually bound."""
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._requested_port, reuse_address=True)
        try:
            await site.start()
        except OSError as err:
            await runner.cleanup()
            raise ProxyError(
                f"the API proxy cannot listen on {self._host}:{self._requested_port}: {err} "
                "(choose another with --proxy-port; 0 picks a free port)"
            ) from err
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        bound = () if _is_loopback(self._host) else (self._host,)
        self._allowed_hosts = access.allowed_hosts(self.port, also=bound)
        log.info("API proxy listening on %s:%d", self._host, self.port)
        return self.port

    def kubeconfig(self, owner: Owner) -> dict[str, Any]:
        """The kubeconfig of a run for `owner`: this proxy, its secret, the owner."""
        return proxy_kubeconfig(owner, port=self.port, password=self.secret)

    def authorization(self) -> str:
        """An Authorization header value the proxy accepts, naming no owner (for the
        operator's own requests through it, e.g. the discovery at warm-up)."""
        return access.basic_authorization("", self.secret)

    async def stop(self) -> None:
        # Upgraded sessions (exec, port-forward) last as long as their client wants: end
        # them rather than wait for them.
        for session in list(self._sessions):
            session.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        log.info(
            "API proxy stopped: %d requests, %d answered from the cache, %d owners injected",
            self.stats.requests,
            self.stats.cache_hits,
            self.stats.injected,
        )

    # -- one request ------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.stats.requests += 1
        refusal = self._refusal(request)
        if refusal is not None:
            self.stats.refused += 1
            return refusal
        if upgrade.is_upgrade(request.headers):
            if not self._upgrades:
                self.refused_upgrades.append(f"{request.method} {request.path}")
                message = (
                    "exec, attach and port-forward are not previewable in a plan: "
                    "they act inside containers (allow them with --allow-side-effects)"
                )
                return web.json_response(status_body(403, message), status=403)
            self.stats.upgrades += 1
            sessions = {task} if (task := asyncio.current_task()) is not None else set()
            self._sessions |= sessions
            try:
                return await upgrade.relay(request, await self._upstream())
            finally:
                self._sessions -= sessions
        owner = owner_from_basic_auth(request.headers.get("Authorization"))
        info = parse_request(request.method, request.path, dict(request.query))
        resource = await self._resource(info)
        if self._intercept is not None:
            return await self._intercepted(self._intercept, request, info, resource, owner)
        if resource is not None and self._cacheable(info, resource, owner):
            cached = await self._from_cache(info, resource, owner, request.query)
            if cached is not None:
                self.stats.cache_hits += 1
                log.debug("proxy %s %s: cache hit", request.method, request.path_qs)
                return cached
        body = await request.read() if request.body_exists else None
        injection = None
        if body and owner is not None and resource is not None and self._injectable(info, resource):
            body, injection = self._with_owner(body, owner, info, resource)
        response = await forward(
            self._client, request, info, body, request_timeout=self._request_timeout
        )
        if owner is not None and resource is not None and info.verb == "get":
            self._reregister_answer(resource, owner, response)
        log.debug(
            "proxy %s %s: %d%s",
            request.method,
            request.path_qs,
            response.status,
            f" ({injection.value} injected)" if injection is not None else "",
        )
        if injection is not None and resource is not None and response.status < 300:
            self.stats.injected += 1
            self._register(resource, owner, injection, namespace=info.namespace)
        return response

    async def _intercepted(
        self,
        intercept: Intercept,
        request: web.Request,
        info: RequestInfo,
        resource: APIResource | None,
        owner: Owner | None,
    ) -> web.StreamResponse:
        body = await request.read() if request.body_exists else None
        if body and owner is not None and resource is not None and self._injectable(info, resource):
            body, injection = self._with_owner(body, owner, info, resource)
            if injection is not None:
                self.stats.injected += 1
        response = await intercept(request, info, resource, body)
        log.debug("proxy %s %s: %d (intercepted)", request.method, request.path_qs, response.status)
        return response

    def _refusal(self, request: web.Request) -> web.Response | None:
        """The answer to a request that may not use the proxy, or None when it may."""
        host = request.headers.get("Host")
        if not access.host_allowed(host, self._allowed_hosts):
            log.warning("API proxy: refused a request for host %r (not a loopback name)", host)
            message = f"the API proxy answers only to its loopback names, not host {host!r}"
            return web.json_response(status_body(403, message), status=403)
        if not access.secret_matches(request.headers.get("Authorization"), self.secret):
            log.warning(
                "API proxy: refused %s %s without the run credential", request.method, request.path
            )
            message = "the API proxy serves only the operator's Ansible runs (use their kubeconfig)"
            return web.json_response(
                status_body(401, message),
                status=401,
                headers={"WWW-Authenticate": 'Basic realm="ansible-operator API proxy"'},
            )
        return None

    async def _upstream(self) -> upgrade.Upstream:
        """The API server as an upgrade request reaches it (TLS context made once)."""
        server = self._client.server
        if server.startswith("https:") and self._upstream_tls is None:
            self._upstream_tls = self._client.ssl_context()
        return upgrade.Upstream(
            server=server,
            ssl_context=self._upstream_tls,
            server_hostname=self._client.tls_server_name,
            auth=await self._client.auth_headers(),
        )

    async def _resource(self, info: RequestInfo) -> APIResource | None:
        if not info.is_resource or not info.resource:
            return None
        try:
            return await self._client.resource_for_plural(info.group, info.version, info.resource)
        except APIError:
            return None

    # -- the cache ----------------------------------------------------------------------

    def _cacheable(self, info: RequestInfo, resource: APIResource, owner: Owner | None) -> bool:
        if info.verb not in ("get", "list") or info.subresource not in _CACHED_SUBRESOURCES:
            return False
        if info.verb == "list" and self._shard_label is not None:
            return False
        if not resource.verbs >= _READABLE:
            return False
        if _gvk(resource) in self._blacklist(owner):
            return False
        if resource.namespaced and self._namespaces is not None:
            return info.namespace in self._namespaces
        return True

    def _blacklist(self, owner: Owner | None) -> frozenset[GVK]:
        watch = self._watch_of(owner)
        return frozenset(watch.blacklist) if watch is not None else self._all_blacklisted

    async def _from_cache(
        self,
        info: RequestInfo,
        resource: APIResource,
        owner: Owner | None,
        query: Mapping[str, str],
    ) -> web.Response | None:
        gvk = _gvk(resource)
        informer = self._cache.ready(gvk)
        if informer is None:
            return None
        namespace = info.namespace if resource.namespaced else ""
        if info.verb == "get":
            obj = informer.get(NamespacedName(namespace=namespace, name=info.name))
            if obj is None:
                return None  # maybe created a moment ago: ask the API server
            if owner is not None:
                self._reregister(resource, owner, obj)
            return _cache_hit(obj)
        try:
            items = filter_objects(
                informer.list(),
                namespace=namespace,
                label_selector=query.get("labelSelector", ""),
                field_selector=query.get("fieldSelector", ""),
            )
        except ValueError:
            return None  # a selector we cannot evaluate: the API server can
        return _cache_hit(
            list_body(
                items,
                api_version=gvk.api_version,
                kind=resource.kind,
                resource_version=informer.resource_version,
            )
        )

    # -- owners and dependent watches ---------------------------------------------------

    def _injectable(self, info: RequestInfo, resource: APIResource) -> bool:
        return (
            self._inject
            and info.verb == "create"
            and not info.subresource
            and resource.verbs >= _READABLE
        )

    def _with_owner(
        self, body: bytes, owner: Owner, info: RequestInfo, resource: APIResource
    ) -> tuple[bytes, Injection | None]:
        try:
            obj = json.loads(body)
        except ValueError:
            return body, None  # YAML or protobuf bodies are passed on untouched
        if not isinstance(obj, dict):
            return body, None
        namespace = info.namespace if resource.namespaced else ""
        new, injection = inject_owner(obj, owner, namespace=namespace)
        if self._shard_label is not None and isinstance(new.get("metadata"), dict):
            key, value = self._shard_label
            labels = new["metadata"].get("labels")
            new["metadata"]["labels"] = {**(labels if isinstance(labels, dict) else {}), key: value}
        return json.dumps(new).encode(), injection

    def _reregister_answer(
        self, resource: APIResource, owner: Owner, response: web.StreamResponse
    ) -> None:
        """`_reregister` for an object the API server returned (not yet in the cache)."""
        watch = self._watch_of(owner)
        if watch is None or self._dependents.watching(_gvk(resource), watch.gvk):
            return
        if not isinstance(response, web.Response) or response.status != 200:
            return
        try:
            obj = json.loads(response.body) if isinstance(response.body, bytes) else None
        except ValueError:
            return
        if isinstance(obj, dict):
            self._reregister(resource, owner, obj)

    def _reregister(self, resource: APIResource, owner: Owner, obj: Mapping[str, Any]) -> None:
        owner_key = NamespacedName(namespace=owner.namespace, name=owner.name)
        found = owners_of(obj, group=owner.group, kind=owner.kind)
        if not any(key.name == owner_key.name for key in found):
            return
        references = bodies.owner_references(obj)
        by_reference = any(ref.get("uid") == owner.uid for ref in references)
        injection = Injection.REFERENCE if by_reference else Injection.ANNOTATIONS
        self._register(resource, owner, injection, namespace=bodies.namespace(obj))

    def _register(
        self,
        resource: APIResource,
        owner: Owner | None,
        injection: Injection,
        *,
        namespace: str,
    ) -> None:
        watch = self._watch_of(owner)
        if owner is None or watch is None or not watch.watch_dependent_resources:
            return
        dependent = _gvk(resource)
        if not self._inject or dependent in watch.blacklist:
            return
        if self._namespaces is not None and namespace not in self._namespaces:
            return
        if (
            injection is Injection.ANNOTATIONS
            and not resource.namespaced
            and not watch.watch_cluster_scoped_resources
        ):
            return
        self._dependents.ensure(dependent, watch.gvk, primary_namespaced=not owner.cluster_scoped)

    def _watch_of(self, owner: Owner | None) -> Watch | None:
        if owner is None:
            return None
        return self._watches.get(GVK.from_api_version(owner.api_version, owner.kind))


def _gvk(resource: APIResource) -> GVK:
    return GVK(group=resource.group, version=resource.version, kind=resource.kind)


def _cache_hit(body: Mapping[str, Any]) -> web.Response:
    return web.Response(
        text=json.dumps(body, indent=2),
        content_type="application/json",
        headers={"X-Cache": "HIT"},
    )


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
