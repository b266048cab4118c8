"""Keeps this replica's share of the ring: claims keys, hands keys off, gates the workers.

Every replica is its own sharder; none holds more than its own CRs and the unowned ones:

- **Own keys.** Each controller's informer lists and watches only the CRs labelled with
  this member (a server-side label selector), so memory follows the share.
- **Claims.** Per watched kind, an informer of the CRs no live member owns (unlabelled,
  or labelled with a member whose Lease is dead). Each is claimed by the member that
  rendezvous hashing picks among the live members, with the resourceVersion as a
  precondition (two claimers: one wins). A label naming a member that is not live counts
  only after a Lease list made *after* the object was seen: a member that has just joined
  (and was handed keys) always has its Lease before its first key.
- **Hand-offs.** When the members change, each key whose owner is now another member is
  drained: new runs of it are skipped, a run in flight finishes, and only then does this
  replica relabel the CR to its new owner — the acknowledgement is the relabel itself,
  made by the only replica that could still be running it. The key's schedule goes with
  it (an annotation: when its next run was due and its back-off), so `requeue_after`,
  `reconcilePeriod` and retries continue on the new owner.
- **Leaving.** A replica told to stop (SIGTERM: a rolling update, a scale-down) marks its
  Lease as leaving: it stays live, so nobody takes its keys while it may still run them,
  but no key is assigned to it any more. It starts no new run and hands every key off as
  above — at once when no run of the key is in flight, else as soon as the run ends —
  then deletes its Lease. Its keys move within about one reconcile, not a Lease duration.
- **Dead members.** A replica that cannot renew its Lease stops its runs by its renew
  deadline and exits; the others treat its keys as unowned once its Lease has not changed
  for a whole duration on their own clocks, which is later.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Sequence
from typing import Any

from runner.engine.controller import Controller
from runner.engine.leader import LeaderElector
from runner.k8s.apierrors import APIError, Conflict, NotFound
from runner.k8s.client import KubeClient
from runner.k8s.informer import ADDED, DELETED, Informer
from runner.proxy.cache import InformerCache
from runner.proxy.owner import owners_of
from runner.sharding.membership import Members, RingSettings
from runner.sharding.ring import (
    LEAVING_ANNOTATION,
    Handoff,
    handoff_annotation,
    handoff_of,
    key_of,
    own_selector,
    owner_of,
    shard_label,
    shard_of,
    unowned_selector,
)
from runner.sharding.ringmetrics import ShardMetrics
from runner.structs import GVK, NamespacedName, bodies
from runner.structs.bodies import KubeObject, object_key

log = logging.getLogger("ansible-operator.sharding")

_CLAIMS_AT_ONCE = 16
_DRAIN_POLL = 0.05


class Sharder:
    """This replica's side of the ring. `attach` every controller before it starts; `run`
    while the replica's Lease is held; `leave` to hand every key off before stopping."""

    def __init__(
        self,
        *,
        client: KubeClient,
        settings: RingSettings,
        namespaces: Sequence[str] | None,
        metrics: ShardMetrics | None = None,
        cache: InformerCache | None = None,
        lease: LeaderElector | None = None,
    ) -> None:
        self._client = client
        self._lease = lease  # this member's own Lease: marked when leaving
        self._cache = cache  # the proxy's informers: the dependents move with their owner
        self._writes = asyncio.Semaphore(_CLAIMS_AT_ONCE)
        self._s = settings
        self.member = settings.member
        self._namespaces = namespaces
        self._metrics = metrics
        self.members = Members(client, settings)
        self.live: frozenset[str] = frozenset({settings.member})
        self.assignable: frozenset[str] = self.live
        self._leaving = False
        self._announced = False
        self._left = asyncio.Event()
        self._label = shard_label(settings.ring)
        self._controllers: dict[GVK, Controller] = {}
        self._unowned: dict[GVK, tuple[Informer, asyncio.Task[None], str]] = {}
        self._draining: dict[GVK, set[NamespacedName]] = {}
        self._arrivals: dict[tuple[GVK, NamespacedName], Handoff] = {}
        self._handoffs: dict[tuple[GVK, NamespacedName], asyncio.Task[None]] = {}
        self._candidates: set[tuple[GVK, NamespacedName]] = set()
        self._wake = asyncio.Event()
        self.moves = 0
        self.claims = 0

    # -- the controllers' side --------------------------------------------------------

    @property
    def selector(self) -> str:
        """The label selector of the CRs (and dependents) this replica owns."""
        return own_selector(self._s.ring, self.member)

    def attach(self, controller: Controller) -> None:
        """Narrow `controller` to this shard (before it starts) and gate its workers."""
        gvk = controller.gvk
        controller.informer.label_selector = self.selector
        controller.admit = functools.partial(self._admit, controller)
        controller.informer.add_handler(functools.partial(self._on_own_event, controller))
        self._controllers[gvk] = controller
        self._draining.setdefault(gvk, set())
        self._wake.set()

    def detach(self, controller: Controller) -> None:
        """`controller` stopped (live reload): its keys are no longer handed off or claimed."""
        gvk = controller.gvk
        if self._controllers.get(gvk) is controller:
            del self._controllers[gvk]
            self._wake.set()

    def owned(self) -> dict[GVK, int]:
        return {gvk: len(c.informer) for gvk, c in self._controllers.items()}

    def _admit(self, controller: Controller, key: NamespacedName) -> bool:
        gvk = controller.gvk
        if self._leaving:
            return False  # stopping: the key's new owner runs it
        if key in self._draining.get(gvk, ()):
            return False  # being handed off: the new owner runs it
        handoff = self._arrivals.pop((gvk, key), None)
        if handoff is not None:
            # The CR as it is now: deleted or changed since it arrived (the key waited in
            # the queue meanwhile), it needs its run now, whatever the old owner planned.
            current = controller.informer.get(key)
            wait = handoff.due - time.time()
            if wait > 0 and current is not None and handoff.applies_to(current):
                # Handed over while waiting for a requeue or a retry: keep its schedule.
                controller.queue.set_requeues(key, handoff.failures)
                controller.queue.add_after(key, wait)
                return False
        return True

    def _on_own_event(
        self, controller: Controller, event: str, new: KubeObject, old: KubeObject | None
    ) -> None:
        gvk = controller.gvk
        key = object_key(new)
        if event == DELETED:  # gone, or relabelled to another member
            self._draining.get(gvk, set()).discard(key)
            self._arrivals.pop((gvk, key), None)
        elif event == ADDED:
            self._draining.get(gvk, set()).discard(key)
            handoff = handoff_of(new, self._s.ring)
            if (
                handoff is not None
                and handoff.source != self.member
                and handoff.due > time.time()
                and handoff.applies_to(new)
            ):
                self._arrivals[(gvk, key)] = handoff
        if self._metrics is not None:
            self._metrics.keys.labels(GVK=str(gvk)).set(len(controller.informer))
        if self._leaving and event == DELETED:
            self._wake.set()  # maybe the last key handed off

    # -- the loop ---------------------------------------------------------------------

    async def run(self) -> None:
        """Refresh the members every retry period (or when woken); claim and hand off.
        Returns once this replica has left the ring (see `leave`)."""
        try:
            while not self._left.is_set():
                await self._pass()
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._s.retry_period):
                        await self._wake.wait()
        finally:
            await self._close()

    async def leave(self, timeout: float) -> None:
        """Hand every key off to the other members, for up to `timeout` seconds: start no
        new run, mark our Lease as leaving, move each key once no run of it is in flight.
        Returns when no key is left to hand to anyone (or at the timeout)."""
        if not self._leaving:
            log.info("ring %s: leaving; handing every key off", self._s.ring)
        self._leaving = True
        self.members.leave()
        self._wake.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._left.wait()
        left = sum(self.owned().values())
        if left and not self.assignable:
            log.info(
                "ring %s: no other member to hand %d keys to; whoever joins next claims them",
                self._s.ring,
                left,
            )
        elif left:
            log.warning(
                "ring %s: %d keys not handed off within %.0f s; the others claim them once "
                "this member's Lease is gone",
                self._s.ring,
                left,
                timeout,
            )

    async def _pass(self) -> None:
        batch, self._candidates = self._candidates, set()
        if self._leaving and not self._announced:
            # Announced before the first key moves: a receiver that sees the key also
            # sees, at its next member list, not to hand it back.
            self._announced = self._lease is None or await self._lease.annotate(
                {LEAVING_ANNOTATION: "true"}
            )
            if not self._announced:
                return
        try:
            live = await self.members.refresh()
        except APIError as err:
            log.warning("ring %s: cannot list its members: %s", self._s.ring, err)
            self._candidates |= batch
            return
        assignable = self.members.assignable
        if live != self.live:
            log.info(
                "ring %s: members %s (were %s)",
                self._s.ring,
                ", ".join(sorted(live)),
                ", ".join(sorted(self.live)),
            )
        if assignable != self.assignable and live - assignable:
            log.info("ring %s: leaving: %s", self._s.ring, ", ".join(sorted(live - assignable)))
        self.live, self.assignable = live, assignable
        if self._metrics is not None:
            self._metrics.members.set(len(live))
        self._sync_unowned()
        self._rebalance()
        if self._leaving:
            if not self._handoffs and (not assignable or not any(self.owned().values())):
                self._left.set()
            return
        await self._claim(batch)

    def _sync_unowned(self) -> None:
        """One informer of unowned CRs per controller, its selector following the members."""
        selector = unowned_selector(self._s.ring, self.live)
        for gvk in list(self._unowned):
            informer, task, was = self._unowned[gvk]
            if gvk not in self._controllers or was != selector or self._leaving:
                informer.stop()
                task.cancel()
                del self._unowned[gvk]
        for gvk in self._controllers:
            if gvk in self._unowned or self._leaving:
                continue  # a leaving member claims nothing
            informer = Informer(
                self._client,
                gvk,
                namespaces=self._namespaces,
                label_selector=selector,
                on_event=functools.partial(self._on_unowned, gvk),
                # Claiming reads labels and the resourceVersion only; whole objects
                # would make every replica hold all CRs while none is claimed yet.
                metadata_only=True,
            )
            task = asyncio.create_task(informer.run(), name=f"unowned-{gvk.kind}")
            self._unowned[gvk] = (informer, task, selector)

    def _on_unowned(self, gvk: GVK, event: str, new: KubeObject, old: KubeObject | None) -> None:
        if event != DELETED:
            self._candidates.add((gvk, object_key(new)))
            self._wake.set()

    async def _claim(self, batch: set[tuple[GVK, NamespacedName]]) -> None:
        """Claim the candidates this member wins. `batch` was seen before the Lease list
        this pass made, so a label naming a member not live now names a dead one."""
        mine = []
        for gvk, key in batch:
            entry = self._unowned.get(gvk)
            obj = entry[0].get(key) if entry else None
            if obj is None or gvk not in self._controllers:
                continue
            if shard_of(obj, self._s.ring) in self.live:
                continue
            if owner_of(key_of(gvk, key), self.assignable) == self.member:
                mine.append((gvk, key, obj))
        if not mine:
            return
        await asyncio.gather(*(self._claim_one(*item) for item in mine))

    async def _claim_one(self, gvk: GVK, key: NamespacedName, obj: KubeObject) -> None:
        """Label the CR with this member. A hand-off annotation it still carries is
        dropped: it was written by an earlier move, and the dead member's own plans for
        the key died with it (it may have been cut short mid-run), so the claim runs it
        at once, as after a restart."""
        meta: dict[str, Any] = {
            "resourceVersion": bodies.resource_version(obj),
            "labels": {self._label: self.member},
        }
        stale = handoff_annotation(self._s.ring)
        if stale in bodies.annotations(obj):
            meta["annotations"] = {stale: None}
        body = {"metadata": meta}
        try:
            async with self._writes:
                namespace = key.namespace or None
                await self._client.patch(gvk, name=key.name, namespace=namespace, body=body)
        except (Conflict, NotFound):
            return  # changed meanwhile: a later event says what it is now
        except APIError as err:
            log.warning("cannot claim %s %s: %s", gvk.kind, key, err)
            self._candidates.add((gvk, key))
            return
        self.claims += 1
        previous = shard_of(obj, self._s.ring)
        if previous:
            log.info("took over %s %s from %s (its Lease is gone)", gvk.kind, key, previous)
        if self._metrics is not None:
            self._metrics.moves.labels(GVK=str(gvk), direction="claim").inc()

    def _rebalance(self) -> None:
        """Start a hand-off for every own key that another live member now wins."""
        for gvk, controller in self._controllers.items():
            for key in controller.informer:
                if (gvk, key) in self._handoffs:
                    continue
                target = owner_of(key_of(gvk, key), self.assignable)
                if target is not None and target != self.member:
                    task = asyncio.create_task(self._hand_off(controller, key))
                    self._handoffs[(gvk, key)] = task
                    task.add_done_callback(
                        functools.partial(_forget_task, self._handoffs, (gvk, key))
                    )

    async def _hand_off(self, controller: Controller, key: NamespacedName) -> None:
        gvk = controller.gvk
        draining = self._draining.setdefault(gvk, set())
        draining.add(key)
        started = time.monotonic()
        moved = False
        try:
            if controller.queue.in_flight(key):
                log.info("draining %s %s: waiting for its run to finish", gvk.kind, key)
            while controller.queue.in_flight(key):
                await asyncio.sleep(_DRAIN_POLL)
            target = owner_of(key_of(gvk, key), self.assignable)
            if target is None or target == self.member:
                return  # the members changed back meanwhile
            moved = await self._relabel(controller, key, target)
        except APIError as err:
            log.warning("cannot hand %s %s off: %s", gvk.kind, key, err)
        finally:
            if not moved:
                draining.discard(key)
                # Events skipped while draining must not be lost.
                controller.queue.add(key)
        if moved:
            controller.queue.forget(key)
            seconds = time.monotonic() - started
            self.moves += 1
            log.info("handed %s %s off to %s after %.2f s", gvk.kind, key, target, seconds)
            if self._metrics is not None:
                self._metrics.moves.labels(GVK=str(gvk), direction="handoff").inc()
                self._metrics.handoff.observe(seconds)

    async def _relabel(self, controller: Controller, key: NamespacedName, target: str) -> bool:
        """Write the new owner on the CR (with the key's schedule); False when the CR is
        gone or no longer ours."""
        gvk = controller.gvk
        obj = controller.informer.get(key)
        due = controller.queue.due_in(key)
        handoff = Handoff(
            source=self.member,
            due=time.time() + due if due is not None else 0.0,
            failures=controller.queue.num_requeues(key),
            generation=bodies.generation(obj),
        )
        for _ in range(5):
            if obj is None or shard_of(obj, self._s.ring) != self.member:
                return False
            body = {
                "metadata": {
                    "resourceVersion": bodies.resource_version(obj),
                    "labels": {self._label: target},
                    "annotations": {handoff_annotation(self._s.ring): handoff.encode()},
                }
            }
            namespace = key.namespace or None
            try:
                async with self._writes:
                    await self._move_dependents(gvk, key, target)
                    await self._client.patch(gvk, name=key.name, namespace=namespace, body=body)
                return True
            except NotFound:
                return False
            except Conflict:
                try:
                    obj = await self._client.get(gvk, name=key.name, namespace=namespace)
                except NotFound:
                    return False
        return False

    async def _move_dependents(self, gvk: GVK, key: NamespacedName, target: str) -> None:
        """Relabel what the runs of `key` created (the proxy's cache holds this shard's),
        before the key itself: the new owner's dependent watches then see them."""
        if self._cache is None:
            return
        for kind in self._cache.watched():
            if kind in self._controllers:
                continue
            for obj in self._cache.informer(kind).list():
                owners = owners_of(obj, group=gvk.group, kind=gvk.kind)
                if not any(
                    o.name == key.name and (not key.namespace or o.namespace == key.namespace)
                    for o in owners
                ):
                    continue
                with contextlib.suppress(NotFound):
                    await self._client.patch(
                        kind,
                        name=bodies.name(obj),
                        namespace=bodies.namespace(obj) or None,
                        body={"metadata": {"labels": {self._label: target}}},
                    )

    async def _close(self) -> None:
        tasks = [task for _, task, _ in self._unowned.values()] + list(self._handoffs.values())
        for informer, _, _ in self._unowned.values():
            informer.stop()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._unowned.clear()


def _forget_task(
    tasks: dict[tuple[GVK, NamespacedName], asyncio.Task[None]],
    key: tuple[GVK, NamespacedName],
    _task: asyncio.Task[None],
) -> None:
    tasks.pop(key, None)
