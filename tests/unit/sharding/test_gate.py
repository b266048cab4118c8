"""The sharder's gate in front of a controller's workers: keys being handed off are
skipped, and a key handed over keeps the schedule its old owner had for it."""

from __future__ import annotations

import time
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, cast

from runner.engine.queue import WorkQueue
from runner.k8s.informer import Informer
from runner.sharding.membership import RingSettings
from runner.sharding.ring import Handoff, handoff_annotation
from runner.sharding.sharder import Sharder
from runner.structs import GVK, NamespacedName

GVK_ = GVK("cache.example.com", "v1alpha1", "Memcached")
KEY = NamespacedName("ns", "one")


def _attached() -> tuple[Sharder, Any]:
    sharder = Sharder(
        client=cast(Any, None),
        settings=RingSettings(ring="r", namespace="ns", member="b"),
        namespaces=None,
    )
    controller = SimpleNamespace(
        gvk=GVK_,
        informer=Informer(cast(Any, None), GVK_),
        queue=WorkQueue[NamespacedName](),
        admit=None,
    )
    sharder.attach(cast(Any, controller))
    return sharder, controller


def _cr(handoff: Handoff | None, **metadata: Any) -> dict[str, Any]:
    annotations = {handoff_annotation("r"): handoff.encode()} if handoff else {}
    meta = {"name": KEY.name, "namespace": KEY.namespace, "annotations": annotations}
    labels = {"shard.sharding.ansible-operator/r": "b"}
    return {"metadata": {**meta, "labels": labels, **metadata}}


async def test_the_controller_lists_only_its_share() -> None:
    _, controller = _attached()
    assert controller.informer.label_selector == "shard.sharding.ansible-operator/r=b"


async def test_a_key_handed_over_during_its_back_off_keeps_it() -> None:
    _, controller = _attached()
    handoff = Handoff(source="a", due=time.time() + 30, failures=3)
    controller.informer._apply("ADDED", _cr(handoff))
    assert controller.admit(KEY) is False, "not run at once: its retry was 30 s away"
    assert 25 < (controller.queue.due_in(KEY) or 0) <= 30.5
    assert controller.queue.num_requeues(KEY) == 3
    assert controller.admit(KEY) is True, "runs when the timer fires"


async def test_a_key_handed_over_keeps_its_schedule_only_while_unchanged() -> None:
    """The schedule is the old owner's plan for the CR as it was: a CR being deleted, or
    changed since, needs its run now. (Found by the chaos soak, docs/soak.md: CRs taken
    over from a dead replica while being deleted waited for the reconcile period, 10 h,
    with a handed-off schedule from before their deletion.)"""
    handoff = Handoff(source="a", due=time.time() + 36000, failures=0, generation=2)
    for arriving, deferred in (
        (_cr(handoff, generation=2), True),
        (_cr(handoff, generation=3), False),
        (_cr(handoff, generation=3, deletionTimestamp="2026-01-01T00:00:00Z"), False),
        (_cr(replace(handoff, generation=None), generation=5), True),
    ):
        _, controller = _attached()
        controller.informer._apply("ADDED", arriving)
        assert controller.admit(KEY) is (not deferred), arriving["metadata"]


async def test_a_key_deleted_after_it_arrived_runs_at_once() -> None:
    """Deleted while its key waited in the queue after it arrived: its deletion is run,
    not deferred to the old owner's next run. (Found by the chaos soak: CRs handed off
    by a stopping replica, then deleted before their new owner reached them, stayed
    Terminating for the reconcile period, 10 h.)"""
    _, controller = _attached()
    handoff = Handoff(source="a", due=time.time() + 36000, failures=0, generation=1)
    controller.informer._apply("ADDED", _cr(handoff, generation=1, resourceVersion="1"))
    deleting = _cr(
        handoff, generation=2, resourceVersion="2", deletionTimestamp="2026-01-01T00:00:00Z"
    )
    controller.informer._apply("MODIFIED", deleting)
    assert controller.admit(KEY) is True
    assert controller.queue.due_in(KEY) is None


async def test_a_key_handed_over_when_due_runs_at_once() -> None:
    _, controller = _attached()
    handoff = Handoff(source="a", due=time.time() - 1, failures=0)
    controller.informer._apply("ADDED", _cr(handoff))
    assert controller.admit(KEY) is True
    assert controller.queue.due_in(KEY) is None


async def test_a_key_being_drained_is_skipped_until_it_comes_back() -> None:
    sharder, controller = _attached()
    sharder._draining[GVK_].add(KEY)
    assert controller.admit(KEY) is False
    controller.informer._apply("ADDED", _cr(None))
    assert controller.admit(KEY) is True


async def test_a_leaving_replica_starts_no_run() -> None:
    sharder, controller = _attached()
    assert controller.admit(KEY) is True
    sharder._leaving = True
    assert controller.admit(KEY) is False
