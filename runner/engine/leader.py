"""Leader election with a `coordination.k8s.io/v1` Lease, as client-go does it.

Several replicas of an operator may run; only the holder of the Lease reconciles. The
holder renews the Lease every `retry_period`; when it cannot renew for `renew_deadline`
it stops leading at once. A candidate takes the Lease over when its holder has not
renewed it for `lease_duration` — measured on the candidate's own clock from when it
last saw the Lease change, so clocks of different machines never need to agree. On a
graceful exit the holder releases the Lease (empty holder, one-second duration) so a
standby takes over at its next retry instead of after a full lease duration.

A sharding ring's member holds a Lease of its own the same way (`member_of` names the
ring): nobody competes for it, its logs speak of membership rather than leadership, it
can carry annotations (a member that is leaving says so), and a graceful exit deletes it.

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
from typing import TypedDict, cast

from runner.k8s.apierrors import APIError, Conflict, NotFound
from runner.k8s.client import KubeClient
from runner.structs import GVK
from runner.structs.bodies import KubeObject, ObjectMeta

log = logging.getLogger("ansible-operator.leader")

LEASE = GVK("coordination.k8s.io", "v1", "Lease")


class LeaseSpec(TypedDict, total=False):
    """A Lease's `spec` (`holderIdentity` null: released)."""

    holderIdentity: str | None
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


class Lease(TypedDict, total=False):
    """A `coordination.k8s.io/v1` Lease as read from the API server."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: LeaseSpec


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
    member_of: str = ""
    """The sharding ring this Lease makes its holder a member of ("" for an election)."""


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
        self._lease: KubeObject | None = None  # as we last wrote it
        self._renewed_at = 0.0  # loop time the last successful attempt started
        self.holder = ""  # the holder the Lease named when we last read it
        self._annotations: dict[str, str] = {}  # kept on the Lease by every write
        self._writing = asyncio.Lock()  # one read-and-write of the Lease at a time
        ring, where = settings.member_of, f"{settings.namespace}/{settings.name}"
        self._what = f"member Lease {where}" if ring else f"lease {where}"

    @property
    def member_of(self) -> str:
        """The sharding ring this Lease makes us a member of ("" for an election)."""
        return self._s.member_of

    async def acquire(self) -> None:
        """Return once this process holds the Lease."""
        ring = self._s.member_of
        if ring:
            log.info("joining the ring %s as member %s (%s)", ring, self.identity, self._what)
        else:
            log.info("waiting for the %s (identity %s)", self._what, self.identity)
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            if await self._try(deadline=started + self._s.renew_deadline):
                break
            await asyncio.sleep(self._s.retry_period)
        self._renewed_at = started
        self.is_leader = True
        if ring:
            log.info(
                "joined the ring %s as member %s (%s, renewed every %g s)",
                ring,
                self.identity,
                self._what,
                self._s.retry_period,
            )
        else:
            log.info("became the leader (%s)", self._what)

    async def hold(self, on_lost: Callable[[], None]) -> None:
        """Renew until the lease is lost, then call `on_lost` (by the renew deadline).

        Cancelling `hold` (a graceful stop) does not call `on_lost`."""
        try:
            await self._renew_until_lost()
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not leave us leading with nobody renewing
            log.exception("%s: renewing failed", self._what)
        self.is_leader = False
        if self._s.member_of:
            log.error(
                "lost the membership of ring %s (%s); stopping", self._s.member_of, self._what
            )
        else:
            log.error("lost the %s; stopping", self._what)
        on_lost()

    async def _renew_until_lost(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            deadline = self._renewed_at + self._s.renew_deadline
            await asyncio.sleep(max(0.0, min(self._s.retry_period, deadline - loop.time())))
            started = loop.time()
            if started >= deadline:
                log.error(
                    "%s: not renewed for %.1f s (renew deadline)",
                    self._what,
                    started - self._renewed_at,
                )
                return
            if await self._try(deadline=deadline):
                self._renewed_at = started
                log.debug("renewed the %s", self._what)
            elif self.holder and self.holder != self.identity:
                log.error("%s is held by %s now", self._what, self.holder)
                return

    async def annotate(self, annotations: dict[str, str]) -> bool:
        """Write `annotations` on the Lease now (with a renewal) and keep them on it;
        True once written. Only while we hold it."""
        self._annotations.update(annotations)
        if not self.is_leader:
            return False
        loop = asyncio.get_running_loop()
        return await self._try(deadline=loop.time() + self._s.renew_deadline)

    async def release(self) -> None:
        """Give the Lease up now (graceful exit), if we hold it: a member's is deleted,
        an election's released (no holder, one-second duration)."""
        if not self.is_leader or self._lease is None:
            return
        self.is_leader = False
        try:
            async with asyncio.timeout(self._s.renew_deadline), self._writing:
                # Read it again: a renewal cut short may have changed it after our copy.
                lease = await self._read()
                spec = dict(lease.get("spec") or {})
                if spec.get("holderIdentity") != self.identity:
                    return
                if self._s.member_of:
                    await self._client.delete(
                        LEASE,
                        name=self._s.name,
                        namespace=self._s.namespace,
                        resource_version=str(lease["metadata"]["resourceVersion"]),
                    )
                    log.info("left the ring %s: deleted the %s", self._s.member_of, self._what)
                    return
                spec.update(holderIdentity=None, leaseDurationSeconds=1, renewTime=_now())
                await self._client.replace(LEASE, obj={**lease, "spec": spec})
            log.info("released the %s", self._what)
        except TimeoutError:
            log.warning("could not release the %s: no answer from the API server", self._what)
        except APIError as err:
            log.warning("could not release the %s: %s", self._what, err)

    async def _try(self, *, deadline: float) -> bool:
        """One attempt to acquire or renew, given up at `deadline` (loop time); True when
        we hold the Lease afterwards. Never raises but for cancellation."""
        try:
            async with asyncio.timeout_at(deadline), self._writing:
                held = await self._attempt()
        except Conflict:
            held = False  # someone else wrote it between our read and write
        except TimeoutError:
            log.warning("%s: no answer before the renew deadline", self._what)
            self.healthy = False
            return False
        except Exception as err:
            log.warning("%s: %s", self._what, err)
            self.healthy = False
            return False
        self.healthy = True
        return held

    async def _attempt(self) -> bool:
        loop = asyncio.get_running_loop()
        now = _now()
        try:
            lease = await self._read()
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
                        **({"annotations": dict(self._annotations)} if self._annotations else {}),
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
        meta = lease.get("metadata") or {}
        if self._annotations:
            meta = {**meta, "annotations": {**(meta.get("annotations") or {}), **self._annotations}}
        self._lease = await self._client.replace(
            LEASE, obj={**lease, "metadata": meta, "spec": self._spec(now, transitions, acquired)}
        )
        return True

    async def _read(self) -> Lease:
        lease = await self._client.get(LEASE, name=self._s.name, namespace=self._s.namespace)
        return cast(Lease, lease)

    def _spec(self, now: str, transitions: int, acquired: str) -> LeaseSpec:
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
