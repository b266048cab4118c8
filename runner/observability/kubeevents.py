"""Kubernetes Events about CRs: what `kubectl describe` shows ops teams first.

The Go operator emits none. We emit a Warning when a reconcile fails (with the failed
tasks' message) and a Normal event when one succeeds after a failure or changed something.
Repeats are folded into one Event whose `count` and `lastTimestamp` move (as kubelet and
client-go's recorder do), so a CR failing in a loop costs one PATCH per retry — which the
work queue's backoff already spaces out — and never a new object per attempt.

Recording never raises: an Event that cannot be written is logged and dropped.
"""

from __future__ import annotations

import logging
import secrets
import socket
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from runner.k8s.apierrors import APIError, NotFound
from runner.k8s.client import KubeClient
from runner.structs import GVK, bodies
from runner.util.redact import redact_message

log = logging.getLogger("ansible-operator.events")

EVENT = GVK("", "v1", "Event")
COMPONENT = "ansible-operator"
_MESSAGE_LIMIT = 1024
_REMEMBERED = 4096


class EventRecorder:
    """Writes core/v1 Events, folding repeats of (object, type, reason, message)."""

    def __init__(self, client: KubeClient, *, component: str = COMPONENT) -> None:
        self._client = client
        self._component = component
        self._instance = socket.gethostname()
        # (uid, type, reason, message) -> (namespace, event name, count), oldest first.
        self._seen: OrderedDict[tuple[str, str, str, str], tuple[str, str, int]] = OrderedDict()

    async def record(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        meta = bodies.metadata(obj)
        message = redact_message(message, _MESSAGE_LIMIT)
        key = (str(meta.get("uid") or ""), type, reason, message)
        now = _now()
        try:
            seen = self._seen.get(key)
            if seen is not None:
                namespace, name, count = seen
                try:
                    await self._client.patch(
                        EVENT,
                        name=name,
                        namespace=namespace,
                        body={"count": count + 1, "lastTimestamp": now},
                    )
                    self._remember(key, (namespace, name, count + 1))
                    return
                except NotFound:
                    pass  # expired (Events live an hour): start a new one
            namespace = str(meta.get("namespace") or "default")
            created = await self._client.create(
                EVENT, self._event(obj, namespace, type, reason, message, now)
            )
            self._remember(key, (namespace, str(created["metadata"]["name"]), 1))
        except APIError as err:
            log.warning("could not record %s event %s on %s: %s", type, reason, _name(meta), err)

    def _remember(self, key: tuple[str, str, str, str], value: tuple[str, str, int]) -> None:
        self._seen[key] = value
        self._seen.move_to_end(key)
        while len(self._seen) > _REMEMBERED:
            self._seen.popitem(last=False)

    def _event(
        self,
        obj: Mapping[str, Any],
        namespace: str,
        type: str,
        reason: str,
        message: str,
        now: str,
    ) -> dict[str, Any]:
        meta = bodies.metadata(obj)
        involved = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        }
        if meta.get("namespace"):
            involved["namespace"] = meta["namespace"]
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta.get('name')}.{secrets.token_hex(8)}",
                "namespace": namespace,
            },
            "involvedObject": involved,
            "type": type,
            "reason": reason,
            "message": message,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
        }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _name(meta: Mapping[str, Any]) -> str:
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))
