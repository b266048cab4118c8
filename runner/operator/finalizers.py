"""Finalizers no watch handles any more, removed so that their CRs are not stuck.

A live reload that drops a watch, or changes its finalizer's name, leaves CRs carrying a
finalizer nobody will run: a CR being deleted would stay Terminating for ever. This
removes it, without running its role, with a merge patch that carries the
resourceVersion (a concurrent change is a conflict, re-read and retried, never a lost
finalizer of someone else's).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from runner.k8s.apierrors import APIError, Conflict, NotFound
from runner.k8s.client import KubeClient
from runner.structs import GVK, NamespacedName, bodies
from runner.structs.bodies import object_key

log = logging.getLogger("ansible-operator.manager")

__all__ = ["release_finalizer"]


async def release_finalizer(
    client: KubeClient,
    gvk: GVK,
    finalizer: str,
    *,
    namespaces: Sequence[str] | None,
    only_deleting: bool,
) -> list[NamespacedName]:
    """Remove `finalizer` from the CRs of `gvk` in `namespaces` (None: all); the keys of
    those it was removed from. `only_deleting`: CRs not being deleted keep it (their watch
    was removed and may come back)."""
    released: list[NamespacedName] = []
    scopes: Sequence[str | None] = namespaces or [None]
    for namespace in scopes:
        try:
            items, _ = await client.list(gvk, namespace=namespace or None)
        except APIError as err:
            log.error("cannot release finalizer %s of %s: %s", finalizer, gvk.kind, err)
            continue
        for obj in items:
            deleting = bool(bodies.deletion_timestamp(obj))
            wanted = (deleting or not only_deleting) and finalizer in bodies.finalizers(obj)
            if wanted and await _drop_finalizer(client, gvk, obj, finalizer):
                released.append(object_key(obj))
    if released:
        log.warning(
            "removed finalizer %s from %d %s%s, without running its role: no watch in "
            "watches.yaml handles it any more: %s",
            finalizer,
            len(released),
            gvk.kind,
            " being deleted" if only_deleting else "",
            ", ".join(str(key) for key in released),
        )
    return released


async def _drop_finalizer(
    client: KubeClient, gvk: GVK, obj: Mapping[str, Any], finalizer: str
) -> bool:
    key = object_key(obj)
    name, namespace = key.name, key.namespace or None
    for _ in range(5):
        finalizers = bodies.finalizers(obj)
        if finalizer not in finalizers:
            return False
        kept = [f for f in finalizers if f != finalizer]
        body = {"metadata": {"finalizers": kept, "resourceVersion": bodies.resource_version(obj)}}
        try:
            await client.patch(gvk, name=name, namespace=namespace, body=body)
            return True
        except NotFound:
            return False
        except Conflict:
            try:
                obj = await client.get(gvk, name=name, namespace=namespace)
            except NotFound:
                return False
        except APIError as err:
            log.error("cannot remove finalizer %s from %s %s: %s", finalizer, name, gvk, err)
            return False
    return False
