"""The reconciler's writes to its own CR: the status subresource and our finalizer.

Both are read-modify-write against a CR that others write too (the role through
`k8s_status`, users, other controllers), so each write carries the resourceVersion it
started from and a 409 Conflict is retried here, in place, from a fresh read: a requeue
would run the Ansible role again for a write that only lost a race. Writes that keep
conflicting end as a `ReconcileError`, chained from the server's last Conflict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from runner.errors import ReconcileError
from runner.k8s.apierrors import Conflict, NotFound
from runner.k8s.client import KubeClient
from runner.structs import GVK, NamespacedName, bodies
from runner.structs.bodies import KubeObject, object_key

log = logging.getLogger("ansible-operator.reconciler")

WRITE_ATTEMPTS = 5
"""Writes of one change in a row before it counts as kept changing."""

StatusUpdate = Callable[[Mapping[str, Any] | None], dict[str, Any]]
"""The new status from the latest one (None when the CR has none yet)."""


class CRWriter:
    """Writes the CRs of one kind (`gvk`); `manage_status` False: status writes do nothing."""

    def __init__(self, client: KubeClient, gvk: GVK, *, manage_status: bool) -> None:
        self._client = client
        self._gvk = gvk
        self._manage_status = manage_status

    async def set_finalizers(self, obj: Mapping[str, Any], names: list[str]) -> KubeObject:
        key = object_key(obj)
        # The resourceVersion makes the merge patch fail on a concurrent change instead of
        # silently dropping someone else's finalizer.
        return await self._client.patch(
            self._gvk,
            name=key.name,
            namespace=key.namespace or None,
            body={
                "metadata": {
                    "finalizers": names,
                    "resourceVersion": bodies.resource_version(obj) or None,
                }
            },
        )

    async def remove_finalizer(self, key: NamespacedName, name: str) -> None:
        """Remove our finalizer, re-reading the CR on a conflict: a requeue would run the
        finalizer's role again for a write that only lost a race."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                obj = await self.get(key)
                finalizers = bodies.finalizers(obj)
                if name not in finalizers:
                    return
                await self.set_finalizers(obj, [f for f in finalizers if f != name])
                log.info("removed finalizer %s from %s %s", name, self._gvk.kind, key)
                return
            except NotFound:
                return
            except Conflict as err:
                if attempt == WRITE_ATTEMPTS:
                    raise ReconcileError(
                        f"could not remove finalizer {name} from {self._gvk.kind} {key}: "
                        f"it kept changing under {attempt} writes in a row"
                    ) from err

    async def get(self, key: NamespacedName) -> KubeObject:
        return await self._client.get(self._gvk, name=key.name, namespace=key.namespace or None)

    async def write_status(
        self,
        key: NamespacedName,
        update: StatusUpdate,
        *,
        known: KubeObject | None = None,
    ) -> KubeObject | None:
        """`update_status`, returning the CR as written."""
        _, written = await self.update_status(key, update, known=known)
        return written

    async def update_status(
        self,
        key: NamespacedName,
        update: StatusUpdate,
        *,
        known: KubeObject | None = None,
    ) -> tuple[Mapping[str, Any] | None, KubeObject | None]:
        """Apply `update` to the latest status of the CR and PUT /status; retry conflicts.
        Returns the status it replaced and the CR as written (None: none, or it is gone).

        Starting from the latest CR keeps whatever the role wrote into the status itself.
        `known` is a copy that is probably the latest (the informer's, or what the API
        returned from our last write): it is tried first, and the resourceVersion in the
        PUT makes the API server refuse it if it was not; then the CR is read from the
        API. (A copy that would need no write is confirmed against the API first.)"""
        if not self._manage_status:
            return None, None
        conflict: Conflict | None = None
        for _ in range(WRITE_ATTEMPTS):
            from_api = known is None
            if known is None:
                try:
                    obj = await self.get(key)
                except NotFound:
                    return None, None
            else:
                obj, known = known.copy(), None
            status = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
            new_status = update(status)
            if new_status == obj.get("status"):
                if from_api:
                    return status, obj
                continue
            try:
                written = await self._client.replace_status(
                    self._gvk, obj={**obj, "status": new_status}
                )
            except NotFound:
                return None, None
            except Conflict as err:
                log.debug(
                    "status of %s %s: conflict (%s copy), reading it again",
                    self._gvk.kind,
                    key,
                    "the API's" if from_api else "a known",
                )
                conflict = err
                continue
            return status, written
        # Returning would report success with the conditions unwritten (the CR would
        # show its old state until the next period): the key is retried instead.
        raise ReconcileError(
            f"the status of {self._gvk.kind} {key} kept changing under "
            f"{WRITE_ATTEMPTS} writes in a row; the reconcile is retried"
        ) from conflict
