"""Dependent watches: a change to what a role created reconciles the CR that owns it.

When a run creates an object through the proxy (or, after a restart, reads one it owns
from the cache), the object's kind is watched from then on for that watch's primary kind.
Its events are mapped back to owners — by ownerReference (group and kind of the primary)
or by the `operator-sdk/primary-resource` annotations — and each owner is enqueued on its
controller through `enqueue`.

What triggers (as in the original): deletes always, updates only when something other
than status, resourceVersion and managedFields times changed, creates never (the run that
created the object is still going, and the initial list of a new informer must not
reconcile every owner again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from runner.k8s.informer import ADDED, DELETED, MODIFIED, EventHandler
from runner.proxy.cache import InformerCache
from runner.proxy.changes import dependent_update_matters
from runner.proxy.owner import owners_of
from runner.structs import GVK, NamespacedName, bodies
from runner.structs.bodies import KubeObject

log = logging.getLogger("ansible-operator.proxy.dependents")

Enqueue = Callable[[GVK, NamespacedName], None]
"""Put the key of a primary CR (of the given primary GVK) on its controller's queue."""


class DependentWatches:
    """Which dependent kinds are watched for which primary kinds, and their handlers."""

    def __init__(self, cache: InformerCache, *, enqueue: Enqueue) -> None:
        self._cache = cache
        self._enqueue = enqueue
        self._pairs: set[tuple[GVK, GVK]] = set()

    def watching(self, dependent: GVK, primary: GVK) -> bool:
        return (dependent, primary) in self._pairs

    def ensure(self, dependent: GVK, primary: GVK, *, primary_namespaced: bool) -> None:
        """Watch `dependent` for owners of kind `primary` (once; later calls do nothing)."""
        if (dependent, primary) in self._pairs:
            return
        self._pairs.add((dependent, primary))
        self._cache.add_handler(
            dependent, self._handler(primary, primary_namespaced=primary_namespaced)
        )
        log.info("watching %s as dependents of %s", dependent, primary)

    def _handler(self, primary: GVK, *, primary_namespaced: bool) -> EventHandler:
        def on_event(kind: str, new: KubeObject, old: KubeObject | None) -> None:
            if kind == ADDED:
                return
            if kind == MODIFIED and old is not None and not dependent_update_matters(old, new):
                return
            if kind not in (MODIFIED, DELETED):
                return
            for owner in owners_of(new, group=primary.group, kind=primary.kind):
                key = owner if primary_namespaced else NamespacedName(namespace="", name=owner.name)
                log.debug("%s: %s; requeue %s %s", _describe(new), kind, primary.kind, key)
                self._enqueue(primary, key)

        return on_event


def _describe(obj: Mapping[str, Any]) -> str:
    return f"{obj.get('kind', '?')} {bodies.namespace(obj)}/{bodies.name(obj)}"
