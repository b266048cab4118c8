"""The ring's members as this replica sees them: the live Leases labelled with the ring.

Each replica holds a Lease of its own (`<ring>-<member>`), renewed like the leader
election's (`runner.engine.leader`, same conservative timing: a replica that cannot renew
by its renew deadline stops every run and exits, before anyone may count it dead). A
Lease is live while its holder is set and it changed within its duration, measured on
this replica's clock from when it was last seen changing, so clocks never need to agree.
A member stopping gracefully first marks its Lease as leaving (`LEAVING_ANNOTATION`): it
stays live, so nobody takes its keys while it may still run them, but it is no longer
assignable, so no key is handed to it; once it has handed its keys off it deletes its
Lease. A Lease released (no holder) is not live at once. Leases dead for longer than
another duration are deleted, so the ring does not collect them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from runner.engine.leader import LEASE, LeaderElector, LeaderSettings
from runner.k8s.apierrors import APIError
from runner.k8s.client import KubeClient
from runner.sharding.ring import LEAVING_ANNOTATION, RING_LABEL, lease_name
from runner.structs import bodies
from runner.structs.bodies import KubeObject

log = logging.getLogger("ansible-operator.sharding")


@dataclass(frozen=True)
class RingSettings:
    ring: str
    namespace: str
    member: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def member_lease(client: KubeClient, settings: RingSettings) -> LeaderElector:
    """This replica's own Lease in the ring: acquired at start (it is new, nobody else
    holds it), renewed until lost or released."""
    return LeaderElector(
        client,
        LeaderSettings(
            name=lease_name(settings.ring, settings.member),
            namespace=settings.namespace,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
            identity=settings.member,
            labels=((RING_LABEL, settings.ring),),
            member_of=settings.ring,
        ),
    )


class Members:
    """Lists the ring's Leases; `live` is the members whose Lease is live (ours always,
    while we run: losing it stops this process), `leaving` those of them that are
    handing their keys off (ours once `leave` was called)."""

    def __init__(self, client: KubeClient, settings: RingSettings) -> None:
        self._client = client
        self._s = settings
        self._seen: dict[str, tuple[tuple[str, str], float]] = {}  # lease -> (spec, when)
        self.live: frozenset[str] = frozenset({settings.member})
        self.leaving: frozenset[str] = frozenset()
        self._left = False
        self.leases: dict[str, KubeObject] = {}

    @property
    def assignable(self) -> frozenset[str]:
        """The members keys may be assigned to: live and not leaving."""
        return self.live - self.leaving

    def leave(self) -> None:
        """This replica is stopping: assign it nothing more."""
        self._left = True
        self.leaving |= {self._s.member}

    async def refresh(self) -> frozenset[str]:
        """List the Leases now and return the live members."""
        items, _ = await self._client.list(
            LEASE, namespace=self._s.namespace, label_selector=f"{RING_LABEL}={self._s.ring}"
        )
        now = asyncio.get_running_loop().time()
        live = {self._s.member}
        leaving = {self._s.member} if self._left else set()
        dead: list[KubeObject] = []
        names = set()
        for lease in items:
            name = bodies.name(lease)
            names.add(name)
            spec = lease.get("spec") or {}
            holder = str(spec.get("holderIdentity") or "")
            state = (holder, str(spec.get("renewTime") or ""))
            seen = self._seen.get(name)
            if seen is None or seen[0] != state:
                seen = self._seen[name] = (state, now)
            duration = float(spec.get("leaseDurationSeconds") or self._s.lease_duration)
            if holder and now - seen[1] < duration:
                live.add(holder)
                if bodies.annotations(lease).get(LEAVING_ANNOTATION) == "true":
                    leaving.add(holder)
            elif holder != self._s.member and now - seen[1] >= duration + self._s.lease_duration:
                dead.append(lease)
        for name in set(self._seen) - names:
            del self._seen[name]
        self.leases = {bodies.name(lease): lease for lease in items}
        for lease in dead:
            await self._delete(lease)
        self.live = frozenset(live)
        self.leaving = frozenset(leaving & live)
        return self.live

    async def _delete(self, lease: KubeObject) -> None:
        with contextlib.suppress(APIError):
            # The precondition: a Lease renewed since we read it is left alone.
            await self._client.delete(
                LEASE,
                name=bodies.name(lease),
                namespace=self._s.namespace,
                resource_version=bodies.resource_version(lease) or None,
            )
            log.info("removed the dead member's Lease %s", bodies.name(lease))
