"""The API as a planned run sees it: reads through the overlay, writes as dry runs.

The plan's API proxy hands every API request to `DryRunAPI` (the proxy's `Intercept`),
after it injected the owner into what a run creates. Nothing reaches the API server but
reads and requests carrying `dryRun=All` (`upstream.Upstream` adds it to every other
method), so nothing in the cluster changes. Per request:

* **GET** of an object: the overlay's copy when the plan wrote it (404 when the plan
  deleted it), else the cluster's.
* **LIST**: the cluster's list with the overlay merged in (`Overlay.merge_list`): written
  objects in their planned version, deleted ones left out, created ones added when the
  label and field selectors take them. Pagination is not passed on: one page has all.
* **WATCH**: the list as the plan has it, as `ADDED` events (from a resourceVersion: the
  plan's own changes of the kind, as `ADDED`, `MODIFIED`, `DELETED`), then the stream
  ends: nothing else will ever change a dry-run object.
* **create, update, patch, delete** of an object the plan has not written yet: sent as
  they are, with `dryRun=All`; the reply is the planned object, kept in the overlay
  with the cluster's object before it (read first, for the diff).
* **update, patch** of an object the plan already wrote: applied to the overlay's copy
  here (`patches.py`: the server would apply it to the cluster's object and lose the
  plan's earlier writes), then validated and defaulted by the server as a dry-run
  update (the object exists in the cluster) or create (it exists only in the plan).
  A status write keeps the rest of the planned object and the status of a main write is
  the planned one, as with the status subresource. A create into a namespace that only
  the plan creates cannot be validated by the server; it is kept as sent (listed in
  `unvalidated`).
* **delete** of an object the plan has: gone from the overlay (when finalizers hold it,
  it gets a `deletionTimestamp` instead); `deletecollection` does that for each object
  the same LIST would return. Garbage collection of what the deleted object owns is not
  previewed.
* a `proxy` request that is not a GET (a POST to a pod through the API) is refused as
  not previewable (listed in `refused`).

Conflicts: an update's resourceVersion is not checked against the planned object's;
the last write wins.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, cast

from aiohttp import web

from runner.k8s.client import KubeClient
from runner.k8s.discovery import APIResource
from runner.plan import patches
from runner.plan.answers import Answer, answer, status_answer
from runner.plan.overlay import Entry, Found, ObjectKey, Overlay, settled
from runner.plan.upstream import READS, Upstream
from runner.plan.writes import SERVER_SET, combined, decode, validated, with_metadata
from runner.proxy.filtering import filter_objects
from runner.proxy.forward import REQUEST_TIMEOUT_SECONDS, forward
from runner.proxy.requestinfo import RequestInfo
from runner.structs import bodies
from runner.structs.bodies import KubeObject

__all__ = ["BUILTIN_GROUPS", "DryRunAPI"]

log = logging.getLogger("ansible-operator.plan")

BUILTIN_GROUPS: Final = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
    }
)
"""Groups of Kubernetes' own kinds: they take strategic merge patches, custom resources
do not."""

_OBJECT_SUBRESOURCES: Final = frozenset({"", "status"})
_DROPPED_LIST_QUERY: Final = frozenset({"limit", "continue"})
_WATCH_QUERY: Final = frozenset(
    {
        "watch",
        "resourceVersion",
        "resourceVersionMatch",
        "timeoutSeconds",
        "allowWatchBookmarks",
        "sendInitialEvents",
        *_DROPPED_LIST_QUERY,
    }
)


class DryRunAPI:
    """The plan proxy's `Intercept`: answers with `overlay`, asks `client` (see the
    module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        overlay: Overlay,
        *,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self._client = client
        self.overlay = overlay
        self._timeout = request_timeout
        self.upstream = Upstream(client, request_timeout=request_timeout)
        self._lock = asyncio.Lock()
        self.refused: list[str] = []
        """Requests refused as not previewable (`METHOD path: why`)."""
        self.unvalidated: list[str] = []
        """Objects kept as the run sent them, the server unable to validate them."""

    async def __call__(
        self,
        request: web.Request,
        info: RequestInfo,
        resource: APIResource | None,
        body: bytes | None,
    ) -> web.StreamResponse:
        if not info.is_resource or resource is None:
            return await self._pass(request, info, body)
        if info.verb == "proxy" or info.subresource == "proxy":
            if request.method in READS:
                return await forward(
                    self._client, request, info, body, request_timeout=self._timeout
                )
            why = "a request through the API to a pod or service acts outside the API"
            self.refused.append(f"{request.method} {request.path}: {why}")
            return _status(403, "Forbidden", f"not previewable in a plan: {why}")
        # One write at a time: each reads the overlay, asks the server, then writes the
        # overlay (a run's requests are sequential anyway; the reconciler's are too).
        async with self._lock:
            return await self._dispatch(request, info, resource, body)

    async def _dispatch(
        self, request: web.Request, info: RequestInfo, resource: APIResource, body: bytes | None
    ) -> web.StreamResponse:
        verb = info.verb
        if verb == "get":
            return await self._get(request, info, resource, body)
        if verb == "list":
            return (await self._list(resource, info, request.query)).response()
        if verb == "watch":
            return await self._watch(request, info, resource)
        if verb == "create":
            return (await self._create(request, info, resource, body)).response()
        if verb in ("update", "patch"):
            return (await self._change(request, info, resource, body)).response()
        if verb == "delete":
            return (await self._delete(request, info, resource, body)).response()
        if verb == "deletecollection":
            return (await self._delete_collection(request, info, resource, body)).response()
        return await self._pass(request, info, body)

    # -- reads --------------------------------------------------------------------------

    async def _get(
        self, request: web.Request, info: RequestInfo, resource: APIResource, body: bytes | None
    ) -> web.StreamResponse:
        key = _key(info, resource)
        found, obj = self.overlay.lookup(key)
        if found is Found.ABSENT:
            return _not_found(info, resource).response()
        if found is Found.PRESENT and info.subresource in _OBJECT_SUBRESOURCES:
            return _json(200, obj)
        return await forward(self._client, request, info, body, request_timeout=self._timeout)

    async def _list(
        self, resource: APIResource, info: RequestInfo, query: Mapping[str, str]
    ) -> Answer:
        wanted = {k: v for k, v in query.items() if k not in _WATCH_QUERY}
        reply = await self.upstream.send(
            "GET", resource.path(namespace=info.namespace or None), list(wanted.items())
        )
        listing = reply.json()
        if not reply.ok or not isinstance(listing, dict):
            return reply
        labels = wanted.get("labelSelector", "")
        fields = wanted.get("fieldSelector", "")

        def selects(obj: Mapping[str, Any]) -> bool:
            try:
                found = filter_objects(
                    [cast(KubeObject, obj)],
                    namespace="",
                    label_selector=labels,
                    field_selector=fields,
                )
            except ValueError:
                return False
            return bool(found)

        items = listing.get("items")
        listing["items"] = self.overlay.merge_list(
            group=resource.group,
            resource=resource.plural,
            namespace=info.namespace if resource.namespaced else "",
            live_items=[item for item in items or [] if isinstance(item, Mapping)],
            selects=selects,
        )
        metadata = listing.get("metadata")
        if isinstance(metadata, dict):
            metadata.pop("continue", None)
            metadata.pop("remainingItemCount", None)
        return answer(200, listing)

    async def _watch(
        self, request: web.Request, info: RequestInfo, resource: APIResource
    ) -> web.StreamResponse:
        since = request.query.get("resourceVersion", "")
        events: list[dict[str, Any]] = []
        if since in ("", "0") or request.query.get("sendInitialEvents") == "true":
            listed = await self._list(resource, info, request.query)
            listing = listed.json()
            if not listed.ok or not isinstance(listing, dict):
                return listed.response()
            events = [{"type": "ADDED", "object": item} for item in listing["items"]]
        else:
            for entry in self.overlay.entries():
                if not _of(entry, resource, info.namespace if resource.namespaced else ""):
                    continue
                if entry.current is None and entry.live is not None:
                    events.append({"type": "DELETED", "object": entry.live})
                elif entry.current is not None:
                    kind = "ADDED" if entry.live is None else "MODIFIED"
                    events.append({"type": kind, "object": entry.current})
        stream = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await stream.prepare(request)
        for event in events:
            await stream.write(json.dumps(event).encode() + b"\n")
        await stream.write_eof()
        return stream

    # -- writes -------------------------------------------------------------------------

    async def _create(
        self, request: web.Request, info: RequestInfo, resource: APIResource, body: bytes | None
    ) -> Answer:
        obj = decode(body)
        query = list(request.query.items())
        if info.subresource or obj is None or "get" not in resource.verbs:
            # Reviews, tokens, evictions, bindings: nothing the plan keeps (an eviction's
            # pod is gone from the plan).
            reply = await self.upstream.send("POST", request.rel_url.raw_path, query, body=body)
            if reply.ok and info.subresource == "eviction":
                key = _key(info, resource)
                self.overlay.delete(key, live=await self.upstream.live(resource, key))
            return reply
        namespace = info.namespace if resource.namespaced else ""
        name = bodies.name(obj)
        if not name:  # generateName: the server picks one
            reply = await self.upstream.send("POST", request.rel_url.raw_path, query, body=body)
            created = reply.json()
            if reply.ok and isinstance(created, dict):
                key = ObjectKey(resource.group, resource.plural, namespace, bodies.name(created))
                self.overlay.write(key, created, live=None)
            return reply
        key = ObjectKey(resource.group, resource.plural, namespace, name)
        found, _ = self.overlay.lookup(key)
        if found is Found.PRESENT:
            return status_answer(
                409, "AlreadyExists", f'{resource.plural} "{name}" already exists', key
            )
        if found is Found.ABSENT:
            entry = self.overlay.entry(key)
            assert entry is not None
            return await self._keep(entry, resource, obj, subresource="", code=201)
        reply = await self.upstream.send("POST", request.rel_url.raw_path, query, body=body)
        created = reply.json()
        if reply.ok and isinstance(created, dict):
            self.overlay.write(key, created, live=None)
        elif reply.status == 404 and self._namespace_planned(namespace):
            kept = self._unvalidated(key, obj, resource)
            return answer(201, kept)
        return reply

    async def _change(
        self, request: web.Request, info: RequestInfo, resource: APIResource, body: bytes | None
    ) -> Answer:
        key = _key(info, resource)
        subresource = info.subresource
        method = request.method
        query = list(request.query.items())
        found, base = self.overlay.lookup(key)
        if found is Found.ABSENT:
            return _not_found(info, resource)
        if found is Found.UNKNOWN or subresource not in _OBJECT_SUBRESOURCES:
            live = await self.upstream.live(resource, key) if found is Found.UNKNOWN else base
            reply = await self.upstream.send(
                method,
                request.rel_url.raw_path,
                query,
                body=body,
                content_type=request.headers.get("Content-Type"),
            )
            result = reply.json()
            if not reply.ok or not isinstance(result, dict):
                return reply
            if subresource == "scale":
                self._scaled(key, live, result)
            elif subresource in _OBJECT_SUBRESOURCES:
                self.overlay.write(key, result, live=live, subresource=subresource)
            return reply
        assert base is not None
        entry = self.overlay.entry(key)
        assert entry is not None
        if info.verb == "update":
            sent = decode(body)
            if sent is None:
                return status_answer(400, "BadRequest", "the body is not a JSON object", key)
        else:
            try:
                sent = patches.apply_patch(
                    base,
                    request.headers.get("Content-Type", ""),
                    body or b"",
                    builtin=resource.group in BUILTIN_GROUPS,
                )
            except patches.PatchError as err:
                reason = {415: "UnsupportedMediaType", 400: "BadRequest"}.get(err.code, "Invalid")
                return status_answer(err.code, reason, str(err), key)
        return await self._keep(entry, resource, sent, subresource=subresource, code=200)

    async def _delete(
        self, request: web.Request, info: RequestInfo, resource: APIResource, body: bytes | None
    ) -> Answer:
        key = _key(info, resource)
        found, base = self.overlay.lookup(key)
        if found is Found.ABSENT:
            return _not_found(info, resource)
        if found is Found.PRESENT:
            assert base is not None
            return answer(200, self._deleted(key, base, live=None))
        live = await self.upstream.live(resource, key)
        reply = await self.upstream.send(
            "DELETE", request.rel_url.raw_path, list(request.query.items()), body=body
        )
        result = reply.json()
        if reply.ok and isinstance(result, dict):
            if result.get("kind") != "Status" and bodies.finalizers(result):
                self.overlay.write(key, result, live=live)
            else:
                self.overlay.delete(key, live=live)
        return reply

    async def _delete_collection(
        self, request: web.Request, info: RequestInfo, resource: APIResource, body: bytes | None
    ) -> Answer:
        listed = await self._list(resource, info, request.query)
        listing = listed.json()
        if not listed.ok or not isinstance(listing, dict):
            return listed
        reply = await self.upstream.send(
            "DELETE", request.rel_url.raw_path, list(request.query.items()), body=body
        )
        if not reply.ok:
            return reply
        namespace = info.namespace if resource.namespaced else ""
        for item in listing["items"]:
            key = ObjectKey(
                resource.group,
                resource.plural,
                bodies.namespace(item) or namespace,
                bodies.name(item),
            )
            found, _ = self.overlay.lookup(key)
            self._deleted(key, item, live=item if found is Found.UNKNOWN else None)
        return reply

    # -- the overlay's objects ------------------------------------------------------------

    async def _keep(
        self,
        entry: Entry,
        resource: APIResource,
        sent: dict[str, Any],
        *,
        subresource: str,
        code: int,
    ) -> Answer:
        """Validate `sent`, the new version of an object the plan wrote, with the server
        and keep it (see the module docstring)."""
        base = entry.current or {}
        has_status = "status" in resource.subresources
        new = combined(base, sent, subresource=subresource, has_status=has_status)
        if settled(copy.deepcopy(new)) is None:  # deleted, no finalizer left: gone
            self.overlay.delete(entry.key, live=entry.live)
            return answer(code, new)
        if entry.live is not None:
            body = with_metadata(new, resourceVersion=bodies.resource_version(entry.live))
            path = resource.path(
                namespace=entry.key.namespace or None,
                name=entry.key.name,
                subresource=subresource or None,
            )
            reply = await self.upstream.send("PUT", path, [], body=json.dumps(body).encode())
        elif subresource:
            reply = answer(code, new)  # a status the server cannot check without an object
        else:
            fresh = copy.deepcopy(new)
            meta = fresh.setdefault("metadata", {})
            for name in SERVER_SET:
                meta.pop(name, None)
            fresh.pop("status", None)
            path = resource.path(namespace=entry.key.namespace or None)
            reply = await self.upstream.send("POST", path, [], body=json.dumps(fresh).encode())
            if reply.status == 404 and self._namespace_planned(entry.key.namespace):
                return answer(code, self._unvalidated(entry.key, new, resource))
        result = reply.json()
        if not reply.ok or not isinstance(result, dict):
            return reply
        kept = self.overlay.write(
            entry.key,
            validated(new, result, subresource=subresource, has_status=has_status),
            live=entry.live,
            subresource=subresource,
        )
        return answer(code, kept if kept is not None else new)

    def _deleted(
        self, key: ObjectKey, obj: Mapping[str, Any], *, live: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Delete `obj` from the plan (or mark it deleting while finalizers hold it)."""
        if bodies.finalizers(obj):
            meta = dict(bodies.metadata(obj))
            meta.setdefault("deletionTimestamp", _now())
            meta.setdefault("deletionGracePeriodSeconds", 0)
            marked = {**obj, "metadata": meta}
            self.overlay.write(key, marked, live=live)
            return marked
        self.overlay.delete(key, live=live)
        return dict(obj)

    def _scaled(
        self, key: ObjectKey, live: Mapping[str, Any] | None, scale: Mapping[str, Any]
    ) -> None:
        found, base = self.overlay.lookup(key)
        target = base if found is Found.PRESENT else live
        replicas = (scale.get("spec") or {}).get("replicas")
        if target is None or not isinstance(replicas, int):
            return
        spec = dict(target.get("spec") or {})
        spec["replicas"] = replicas
        self.overlay.write(key, {**target, "spec": spec}, live=live, subresource="scale")

    def _namespace_planned(self, namespace: str) -> bool:
        """The plan created `namespace`, which the cluster does not have."""
        if not namespace:
            return False
        entry = self.overlay.entry(ObjectKey("", "namespaces", "", namespace))
        return entry is not None and entry.live is None and entry.current is not None

    def _unvalidated(
        self, key: ObjectKey, obj: Mapping[str, Any], resource: APIResource
    ) -> dict[str, Any]:
        """Keep `obj` as sent: its namespace exists only in the plan."""
        meta = dict(bodies.metadata(obj))
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        kept = {"apiVersion": resource.api_version, "kind": resource.kind, **obj, "metadata": meta}
        self.overlay.write(key, kept, live=None)
        label = key.describe()
        if label not in self.unvalidated:
            self.unvalidated.append(label)
        return kept

    # -- the API server -----------------------------------------------------------------

    async def _pass(
        self, request: web.Request, info: RequestInfo, body: bytes | None
    ) -> web.StreamResponse:
        if request.method in READS:
            return await forward(self._client, request, info, body, request_timeout=self._timeout)
        reply = await self.upstream.send(
            request.method,
            request.rel_url.raw_path,
            list(request.query.items()),
            body=body,
            content_type=request.headers.get("Content-Type"),
        )
        return reply.response()


# -- helpers --------------------------------------------------------------------------


def _key(info: RequestInfo, resource: APIResource) -> ObjectKey:
    key = info.key
    return ObjectKey(
        resource.group, resource.plural, key.namespace if resource.namespaced else "", key.name
    )


def _of(entry: Entry, resource: APIResource, namespace: str) -> bool:
    key = entry.key
    return (
        key.group == resource.group
        and key.resource == resource.plural
        and (not namespace or key.namespace == namespace)
    )


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(status: int, obj: Any) -> web.Response:
    return answer(status, obj).response()


def _status(code: int, reason: str, message: str) -> web.Response:
    return status_answer(code, reason, message, None).response()


def _not_found(info: RequestInfo, resource: APIResource) -> Answer:
    key = _key(info, resource)
    kind = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
    return status_answer(404, "NotFound", f'{kind} "{key.name}" not found', key)
