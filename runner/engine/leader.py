"""Leader election with a `coordination.k8s.io/v1` Lease, as client-go does it.

Several replicas of an operator may run; only the holder of the Lease reconciles. The
holder renews the Lease every `retry_period`; when it cannot renew for `renew_deadline`
it stops leading at once. A candidate takes the Lease over when its holder has not
renewed it for `lease_duration` — measured on the candidate's own clock from when it
last saw the Lease change, so clocks of different machines never need to agree. On a
graceful exit the holder releases the Lease (empty holder, one-second duration) so a
standby takes over at its next retry instead of after a full lease duration.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runner.k8s.client import KubeClient
from runner.k8s.errors import APIError, Conflict, NotFound
from runner.structs import GVK

log = logging.getLogger("ansible-operator.leader")

LEASE = GVK("coordination.k8s.io", "v1", "Lease")


@dataclass(frozen=True)
class LeaderSettings:
    name: str
    namespace: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = ""


def new_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    """Acquire, hold and release one Lease; `run` returns when leadership is lost."""

    def __init__(self, client: KubeClient, settings: LeaderSettings) -> None:
        self._client = client
        self._s = settings
        self.identity = settings.identity or new_identity()
        self.is_leader = False
        self.healthy = False  # the API server answered our last attempt
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None

    async def acquire(self) -> None:
        """Return once this process holds the Lease."""
        log.info(
            "waiting for the lease %s/%s (identity %s)",
            self._s.namespace,
            self._s.name,
            self.identity,
        )
        while not await self._try():
            await asyncio.sleep(self._s.retry_period)
        self.is_leader = True
        log.info("became the leader (lease %s/%s)", self._s.namespace, self._s.name)

    async def hold(self, on_lost: Callable[[], None]) -> None:
        """Renew until a renewal has failed for `renew_deadline`; then call `on_lost`."""
        loop = asyncio.get_running_loop()
        last_renewed = loop.time()
        while True:
            await asyncio.sleep(self._s.retry_period)
            if await self._try():
                last_renewed = loop.time()
                continue
            if loop.time() - last_renewed >= self._s.renew_deadline:
                self.is_leader = False
                log.error("lost the lease %s/%s; stopping", self._s.namespace, self._s.name)
                on_lost()
                return

    async def release(self) -> None:
        """Give the Lease up now (graceful exit), if we hold it."""
        if not self.is_leader or self._lease is None:
            return
        self.is_leader = False
        spec = dict(self._lease.get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            return
        spec.update(holderIdentity=None, leaseDurationSeconds=1, renewTime=_now())
        try:
            await self._client.replace(LEASE, obj={**self._lease, "spec": spec})
            log.info("released the lease %s/%s", self._s.namespace, self._s.name)
        except APIError as err:
            log.warning("could not release the lease: %s", err)

    async def _try(self) -> bool:
        """One attempt to acquire or renew; True when we hold the Lease afterwards."""
        try:
            held = await self._attempt()
        except Conflict:
            held = False  # someone else wrote it between our read and write
        except APIError as err:
            log.warning("lease %s/%s: %s", self._s.namespace, self._s.name, err)
            self.healthy = False
            return False
        self.healthy = True
        return held

    async def _attempt(self) -> bool:
        loop = asyncio.get_running_loop()
        now = _now()
        try:
            lease = await self._client.get(LEASE, name=self._s.name, namespace=self._s.namespace)
        except NotFound:
            self._lease = await self._client.create(
                LEASE,
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self._s.name, "namespace": self._s.namespace},
                    "spec": self._spec(now, transitions=0, acquired=now),
                },
            )
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        seen = (holder, str(spec.get("renewTime") or ""))
        if seen != self._observed:
            self._observed, self._observed_at = seen, loop.time()
        duration = float(spec.get("leaseDurationSeconds") or self._s.lease_duration)
        if holder and holder != self.identity and loop.time() - self._observed_at < duration:
            return False  # somebody else holds a live lease
        transitions = int(spec.get("leaseTransitions") or 0)
        acquired = spec.get("acquireTime") or now
        if holder != self.identity:
            transitions += 1
            acquired = now
        self._lease = await self._client.replace(
            LEASE, obj={**lease, "spec": self._spec(now, transitions, acquired)}
        )
        return True

    def _spec(self, now: str, transitions: int, acquired: str) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, int(self._s.lease_duration)),
            "acquireTime": acquired,
            "renewTime": now,
            "leaseTransitions": transitions,
        }


def _now() -> str:
    # MicroTime: RFC 3339 with microseconds.
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
