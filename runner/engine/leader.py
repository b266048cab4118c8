"""Leader election with a `coordination.k8s.io/v1` Lease, as client-go does it.

Several replicas of an operator may run; only the holder of the Lease reconciles. The
holder renews the Lease every `retry_period`; when it cannot renew for `renew_deadline`
it stops leading at once. A candidate takes the Lease over when its holder has not
renewed it for `lease_duration` — measured on the candidate's own clock from when it
last saw the Lease change, so clocks of different machines never need to agree. On a
graceful exit the holder releases the Lease (empty holder, one-second duration) so a
standby takes over at its next retry instead of after a full lease duration.

Two leaders must never reconcile at once, so the holder measures its lease
conservatively: a renewal counts from when its attempt *started* (the API server wrote
the new renewTime no earlier, so no candidate can see the Lease expire before that plus
`lease_duration`), every attempt is cut off when the renew deadline comes, and any
failure — an error of any kind, a hung request, the Lease found in another's hands —
counts as not renewed. The holder is told it lost the lease by the renew deadline at the
latest, which leaves `lease_duration - renew_deadline` to stop every run before a
standby may take over.
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
    labels: tuple[tuple[str, str], ...] = ()
    """Put on the Lease when it is created (a sharding ring finds its members by them)."""


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
        self._renewed_at = 0.0  # loop time the last successful attempt started
        self.holder = ""  # the holder the Lease named when we last read it

    async def acquire(self) -> None:
        """Return once this process holds the Lease."""
        log.info(
            "waiting for the lease %s/%s (identity %s)",
            self._s.namespace,
            self._s.name,
            self.identity,
        )
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            if await self._try(deadline=started + self._s.renew_deadline):
                break
            await asyncio.sleep(self._s.retry_period)
        self._renewed_at = started
        self.is_leader = True
        log.info("became the leader (lease %s/%s)", self._s.namespace, self._s.name)

    async def hold(self, on_lost: Callable[[], None]) -> None:
        """Renew until the lease is lost, then call `on_lost` (by the renew deadline).

        Cancelling `hold` (a graceful stop) does not call `on_lost`."""
        try:
            await self._renew_until_lost()
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not leave us leading with nobody renewing
            log.exception("lease %s/%s: renewing failed", self._s.namespace, self._s.name)
        self.is_leader = False
        log.error("lost the lease %s/%s; stopping", self._s.namespace, self._s.name)
        on_lost()

    async def _renew_until_lost(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            deadline = self._renewed_at + self._s.renew_deadline
            await asyncio.sleep(max(0.0, min(self._s.retry_period, deadline - loop.time())))
            started = loop.time()
            if started >= deadline:
                log.error(
                    "lease %s/%s: not renewed for %.1f s (renew deadline)",
                    self._s.namespace,
                    self._s.name,
                    started - self._renewed_at,
                )
                return
            if await self._try(deadline=deadline):
                self._renewed_at = started
            elif self.holder and self.holder != self.identity:
                log.error(
                    "lease %s/%s is held by %s now",
                    self._s.namespace,
                    self._s.name,
                    self.holder,
                )
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
            async with asyncio.timeout(self._s.renew_deadline):
                await self._client.replace(LEASE, obj={**self._lease, "spec": spec})
            log.info("released the lease %s/%s", self._s.namespace, self._s.name)
        except TimeoutError:
            log.warning("could not release the lease: no answer from the API server")
        except APIError as err:
            log.warning("could not release the lease: %s", err)

    async def _try(self, *, deadline: float) -> bool:
        """One attempt to acquire or renew, given up at `deadline` (loop time); True when
        we hold the Lease afterwards. Never raises but for cancellation."""
        try:
            async with asyncio.timeout_at(deadline):
                held = await self._attempt()
        except Conflict:
            held = False  # someone else wrote it between our read and write
        except TimeoutError:
            log.warning(
                "lease %s/%s: no answer before the renew deadline", self._s.namespace, self._s.name
            )
            self.healthy = False
            return False
        except Exception as err:
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
                    "metadata": {
                        "name": self._s.name,
                        "namespace": self._s.namespace,
                        **({"labels": dict(self._s.labels)} if self._s.labels else {}),
                    },
                    "spec": self._spec(now, transitions=0, acquired=now),
                },
            )
            return True
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        self.holder = holder
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
