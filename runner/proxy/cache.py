"""Informers shared by the proxy's cache and the dependent watches, started on demand.

A role reads the objects it manages again and again (`k8s` GETs before every apply,
`k8s_info` lists); once a kind is watched, those reads can be answered from memory. One
informer per kind serves both purposes: the dependent watches add their handlers to it,
and the proxy reads its store. The primary resources' informers (the controllers') are
adopted rather than duplicated.

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
from runner.k8s.informer import Informer
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
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    def adopt(self, informer: Informer) -> None:
        """Share an informer someone else runs (a controller's) instead of starting one."""
        self._informers.setdefault(informer.gvk, informer)

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
        self._informers[gvk] = informer
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
