"""Informers shared by the proxy's cache and the dependent watches, started on demand.

A role reads the objects it manages again and again (`k8s` GETs before every apply,
`k8s_info` lists); once a kind is watched, those reads can be answered from memory. One
informer per kind serves both purposes: the dependent watches add their handlers to it,
and the proxy reads its store. The primary resources' informers (the controllers') are
adopted rather than duplicated; when a live reload stops or restarts a controller, its
informer is released or replaced, and the handlers move to the kind's next informer.

A kind is watched in the operator's namespaces (`WATCH_NAMESPACE`), or cluster-wide when
it is cluster-scoped. Until an informer's first list is in, requests for its kind go to
the API server: a role's first request for a kind does not wait for a list of all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from runner.k8s.client import KubeClient
from runner.k8s.informer import EventHandler, Informer
from runner.structs import GVK

log = logging.getLogger("ansible-operator.proxy.cache")


class InformerCache:
    """One running informer per GVK, created the first time a GVK is asked for."""

    def __init__(
        self,
        client: KubeClient,
        *,
        namespaces: Sequence[str] | None,
        label_selector: str | None = None,
    ) -> None:
        self._client = client
        self._namespaces = namespaces
        self._selector = label_selector  # sharding: only this replica's share
        self._informers: dict[GVK, Informer] = {}
        self._started: dict[GVK, Informer] = {}  # the ones this cache runs itself
        self._handlers: dict[GVK, list[EventHandler]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    def adopt(self, informer: Informer) -> None:
        """Serve `informer`'s kind from it, run by someone else (a controller), instead of
        starting one. It replaces the kind's informer so far (a stopped controller's, or
        one this cache started, which stops) and gets the handlers of `add_handler`."""
        gvk = informer.gvk
        if self._informers.get(gvk) is informer:
            return
        self._informers[gvk] = informer
        for handler in self._handlers.get(gvk, ()):
            informer.add_handler(handler)
        own = self._started.pop(gvk, None)
        if own is not None:
            own.stop()

    def release(self, informer: Informer) -> None:
        """Its owner stopped `informer` (a controller removed or restarted by a live
        reload): its store is no longer read. The kind is watched again on the next
        request for it, or at once when handlers wait for its events."""
        gvk = informer.gvk
        if self._informers.get(gvk) is not informer:
            return
        del self._informers[gvk]
        if self._handlers.get(gvk) and not self._closed:
            self.informer(gvk)

    def add_handler(self, gvk: GVK, handler: EventHandler) -> None:
        """Call `handler` for every later event of `gvk`, also from the informers that
        replace its current one."""
        informer = self.informer(gvk)
        self._handlers.setdefault(gvk, []).append(handler)
        informer.add_handler(handler)

    def informer(self, gvk: GVK) -> Informer:
        """The informer of `gvk`, started now if there was none."""
        existing = self._informers.get(gvk)
        if existing is not None:
            return existing
        if self._closed:
            raise RuntimeError("the informer cache is closed")
        informer = Informer(
            self._client, gvk, namespaces=self._namespaces, label_selector=self._selector
        )
        for handler in self._handlers.get(gvk, ()):
            informer.add_handler(handler)
        self._informers[gvk] = self._started[gvk] = informer
        self._tasks.append(asyncio.create_task(informer.run(), name=f"cache-{gvk}"))
        log.info("started watching %s", gvk)
        return informer

    def ready(self, gvk: GVK) -> Informer | None:
        """The informer of `gvk` if its first list is in; else None, and it is started (the
        request that asked goes to the API server rather than wait for the list)."""
        informer = self.informer(gvk)
        return informer if informer.synced.is_set() else None

    def watched(self) -> list[GVK]:
        return list(self._informers)

    async def close(self) -> None:
        """Stop the informers this cache started (adopted ones belong to their owners)."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
