"""A cache of one kind's objects kept current by LIST + WATCH, with change callbacks.

The reconcile loop is level-based: it needs the latest object of a key and a nudge when
something changed. The informer gives both: a store keyed by NamespacedName (objects
stripped of `metadata.managedFields`, which nobody here reads and which dominate their size)
and `on_event(type, new, old)` calls for ADDED, MODIFIED and DELETED. It lives at the API
edge because two layers read it: the engine (primary resources) and the proxy (its cache
and the dependent watches, which add their own handlers to a shared informer).

Each namespace (or the whole cluster) is one stream: a paginated LIST compared with the
store — so the first list emits ADDED for everything and a relist after 410 Gone emits only
what really changed while we were not watching — then a WATCH with bookmarks from the list's
resourceVersion, restarted from the last resourceVersion seen whenever the server ends it.
Errors never end a stream: it retries with capped exponential backoff and keeps its store.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import random
from collections.abc import Callable, Iterator, Sequence

from runner.k8s.apierrors import APIError, Gone
from runner.k8s.client import KubeClient
from runner.structs import GVK, NamespacedName, bodies
from runner.structs.bodies import KubeObject, object_key

log = logging.getLogger("ansible-operator.informer")

EventHandler = Callable[[str, KubeObject, KubeObject | None], None]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"

# A stream of the whole cluster (or of a cluster-scoped kind) has no namespace.
_ALL: str | None = None


def strip(obj: KubeObject) -> KubeObject:
    """`obj` without metadata.managedFields (a shallow copy when there were some)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = meta.copy()
        del meta["managedFields"]
        return {**obj, "metadata": meta}
    return obj


class Informer:
    """Lists and watches `gvk` in `namespaces` (None: all) and keeps a store of it.

    Objects in the store and passed to `on_event` are shared: treat them as read-only.
    With `metadata_only` each is the object's metadata alone (with apiVersion and kind):
    for callers that read no spec or status, at a fraction of the memory.
    """

    def __init__(
        self,
        client: KubeClient,
        gvk: GVK,
        *,
        namespaces: Sequence[str] | None = None,
        label_selector: str | None = None,
        on_event: EventHandler | None = None,
        page_size: int = 500,
        watch_timeout: float = 300.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        metadata_only: bool = False,
    ) -> None:
        self.gvk = gvk
        self._metadata_only = metadata_only
        self._client = client
        # "" (the Go operator's "all namespaces") anywhere in the list means all.
        self._namespaces: tuple[str, ...] | None = (
            None if namespaces is None or "" in namespaces else tuple(dict.fromkeys(namespaces))
        )
        self._selector = label_selector
        self._handlers: list[EventHandler] = [on_event] if on_event is not None else []
        self._page_size = page_size
        self._watch_timeout = watch_timeout
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._store: dict[NamespacedName, KubeObject] = {}
        # Where each stream resumes: None means "list first".
        self._resume: dict[str | None, str | None] = {}
        self._stop = asyncio.Event()
        self.synced = asyncio.Event()

    def add_handler(self, handler: EventHandler) -> None:
        """Also call `handler` for every later event (objects already stored are not
        replayed: callers that need them read the store)."""
        self._handlers.append(handler)

    @property
    def label_selector(self) -> str | None:
        return self._selector

    @label_selector.setter
    def label_selector(self, selector: str | None) -> None:
        """Set before `run` (sharding narrows a controller's informer to its shard)."""
        self._selector = selector

    # -- reading ----------------------------------------------------------------------

    def get(self, key: NamespacedName) -> KubeObject | None:
        return self._store.get(key)

    def list(self) -> list[KubeObject]:
        return list(self._store.values())

    @property
    def resource_version(self) -> str:
        """Where a watch of everything in the store would start: the newest resourceVersion
        any stream has seen ("" before the first list)."""
        versions = [rv for rv in self._resume.values() if rv]
        return max(versions, key=lambda rv: (len(rv), rv)) if versions else ""

    def keys(self) -> builtins.list[NamespacedName]:
        return list(self._store)

    def __iter__(self) -> Iterator[NamespacedName]:
        """The keys in the store (a snapshot: safe while events keep arriving)."""
        return iter(list(self._store))

    def __len__(self) -> int:
        return len(self._store)

    # -- running ----------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until `stop()` (or cancellation). Never raises for API errors.

        Running again after a stop resumes each stream where it was, with the store kept."""
        try:
            await self._run()
        finally:
            self._stop.clear()  # that stop request is served; a later run() runs again

    async def _run(self) -> None:
        streams = await self._streams()
        if streams is None:
            return  # stopped before the kind could be resolved
        for namespace in streams:
            self._resume.setdefault(namespace, None)
        unsynced = {ns for ns in streams if self._resume[ns] is None}
        if not unsynced:
            self.synced.set()
        tasks = [
            asyncio.create_task(self._stream(ns, unsynced), name=f"informer-{self.gvk.kind}-{ns}")
            for ns in streams
        ]
        stopper = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (stopper, *tasks):
                task.cancel()
            await asyncio.gather(stopper, *tasks, return_exceptions=True)
        for task in tasks:  # a stream only ends on its own through a bug: surface it
            error = None if task.cancelled() else task.exception()
            if error is not None:
                raise error

    def stop(self) -> None:
        """Make the running `run()` (or, if none runs, the next one) return soon; the
        store is kept."""
        self._stop.set()

    async def relist(self) -> None:
        """List every stream now and emit the differences with the store (what a 410
        Gone triggers); the running watches carry on."""
        for namespace in await self._streams() or ():
            self._resume[namespace] = await self._relist(namespace)

    # -- streams ----------------------------------------------------------------------

    async def _streams(self) -> builtins.list[str | None] | None:
        """One stream per namespace, or one for all; a cluster-scoped kind is always one
        stream. Waits (retrying) until discovery knows the kind; None when stopped."""
        if self._namespaces is None:
            return [_ALL]
        failures = 0
        while not self._stop.is_set():
            try:
                resource = await self._client.resource(self.gvk)
            except APIError as err:
                await self._pause(failures, f"cannot resolve {self.gvk}: {err}")
                failures += 1
                continue
            return list(self._namespaces) if resource.namespaced else [_ALL]
        return None

    async def _stream(self, namespace: str | None, unsynced: set[str | None]) -> None:
        failures = 0
        where = namespace or "all namespaces"
        while not self._stop.is_set():
            try:
                if self._resume.get(namespace) is None:
                    self._resume[namespace] = await self._relist(namespace)
                    unsynced.discard(namespace)
                    if not unsynced and not self.synced.is_set():
                        log.debug("%s synced: %d objects", self.gvk.kind, len(self._store))
                        self.synced.set()
                started = asyncio.get_running_loop().time()
                got_events = await self._watch(namespace)
                if got_events or asyncio.get_running_loop().time() - started > 1.0:
                    failures = 0
                else:
                    # Watches that end at once with nothing must not spin.
                    await self._pause(failures, f"watch of {self.gvk.kind} in {where} ended")
                    failures += 1
            except Gone as err:
                log.info("%s in %s: %s; relisting", self.gvk.kind, where, err)
                self._resume[namespace] = None
                if failures:
                    await self._pause(failures, "relist again")
                failures += 1
            except APIError as err:
                await self._pause(failures, f"list/watch {self.gvk.kind} in {where}: {err}")
                failures += 1
            except Exception:
                log.exception("informer for %s in %s failed; retrying", self.gvk.kind, where)
                await self._pause(failures, "")
                failures += 1

    async def _pause(self, failures: int, why: str) -> None:
        delay = min(self._backoff_base * 2.0**failures, self._backoff_max)
        delay *= random.uniform(0.8, 1.2)
        if why:
            log.warning("%s; retrying in %.1f s", why, delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=delay)

    async def _relist(self, namespace: str | None) -> str:
        """LIST and emit what differs from the store's objects of this stream; return
        the list's resourceVersion."""
        items, resource_version = await self._client.list(
            self.gvk,
            namespace=namespace,
            label_selector=self._selector,
            limit=self._page_size,
            metadata_only=self._metadata_only,
        )
        seen: set[NamespacedName] = set()
        for item in items:
            # LIST items carry no apiVersion/kind; watch events do. Readers (the proxy
            # cache) hand objects out as the API would, so fill them in.
            obj: KubeObject = {
                "apiVersion": self.gvk.api_version,
                "kind": self.gvk.kind,
                **strip(item),
            }
            key = object_key(obj)
            seen.add(key)
            old = self._store.get(key)
            if old is not None and bodies.resource_version(old) == bodies.resource_version(obj):
                continue
            self._store[key] = obj
            self._emit(ADDED if old is None else MODIFIED, obj, old)
        for key in [k for k in self._store if self._in_stream(k, namespace) and k not in seen]:
            old = self._store.pop(key)
            self._emit(DELETED, old, old)
        return resource_version

    def _in_stream(self, key: NamespacedName, namespace: str | None) -> bool:
        return namespace is None or key.namespace == namespace

    async def _watch(self, namespace: str | None) -> bool:
        """Watch from the stream's resume point until the server ends the watch; keep
        the resume point current. True when any event (bookmarks too) arrived."""
        timeout = int(self._watch_timeout * random.uniform(1.0, 2.0)) or 1
        events = 0
        stream = self._client.watch(
            self.gvk,
            namespace=namespace,
            resource_version=self._resume.get(namespace),
            label_selector=self._selector,
            timeout_seconds=timeout,
            metadata_only=self._metadata_only,
        )
        async with contextlib.aclosing(stream) as watch:
            async for kind, obj in watch:
                events += 1
                self._apply(kind, obj)
                resource_version = bodies.resource_version(obj)
                if resource_version:
                    self._resume[namespace] = resource_version
        return events > 0

    def _apply(self, kind: str, raw: KubeObject) -> None:
        if kind == BOOKMARK:
            return
        obj = strip(raw)
        key = object_key(obj)
        if kind == DELETED:
            old = self._store.pop(key, None)
            self._emit(DELETED, obj, old)
            return
        if kind not in (ADDED, MODIFIED):
            log.debug("ignoring %s event for %s %s", kind, self.gvk.kind, key)
            return
        old = self._store.get(key)
        if old is not None and bodies.resource_version(old) == bodies.resource_version(obj):
            return
        self._store[key] = obj
        self._emit(ADDED if old is None else MODIFIED, obj, old)

    def _emit(self, kind: str, new: KubeObject, old: KubeObject | None) -> None:
        for handler in self._handlers:
            try:
                handler(kind, new, old)
            except Exception:
                log.exception(
                    "event handler failed on %s %s %s", kind, self.gvk.kind, object_key(new)
                )


__all__ = ["Informer", "strip"]
