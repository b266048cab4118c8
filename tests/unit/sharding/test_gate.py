"""The sharder's gate in front of a controller's workers: keys being handed off are
skipped, and a key handed over keeps the schedule its old owner had for it."""

from __future__ import annotations

import time
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


def _cr(handoff: Handoff | None) -> dict[str, Any]:
    annotations = {handoff_annotation("r"): handoff.encode()} if handoff else {}
    meta = {"name": KEY.name, "namespace": KEY.namespace, "annotations": annotations}
    return {"metadata": {**meta, "labels": {"shard.sharding.ansible-operator/r": "b"}}}


async def test_the_controller_lists_only_its_share() -> None:
    _, controller = _attached()
    assert controller.informer.label_selector == "shard.sharding.ansible-operator/r=b"


async def test_a_key_handed_over_during_its_back_off_keeps_it() -> None:
    sharder, controller = _attached()
    handoff = Handoff(source="a", due=time.time() + 30, failures=3)
    sharder._on_own_event(cast(Any, controller), "ADDED", _cr(handoff), None)
    assert controller.admit(KEY) is False, "not run at once: its retry was 30 s away"
    assert 25 < (controller.queue.due_in(KEY) or 0) <= 30.5
    assert controller.queue.num_requeues(KEY) == 3
    assert controller.admit(KEY) is True, "runs when the timer fires"


async def test_a_key_handed_over_when_due_runs_at_once() -> None:
    sharder, controller = _attached()
    handoff = Handoff(source="a", due=time.time() - 1, failures=0)
    sharder._on_own_event(cast(Any, controller), "ADDED", _cr(handoff), None)
    assert controller.admit(KEY) is True
    assert controller.queue.due_in(KEY) is None


async def test_a_key_being_drained_is_skipped_until_it_comes_back() -> None:
    sharder, controller = _attached()
    sharder._draining[GVK_].add(KEY)
    assert controller.admit(KEY) is False
    sharder._on_own_event(cast(Any, controller), "ADDED", _cr(None), None)
    assert controller.admit(KEY) is True


async def test_a_leaving_replica_starts_no_run() -> None:
    sharder, controller = _attached()
    assert controller.admit(KEY) is True
    sharder._leaving = True
    assert controller.admit(KEY) is False
