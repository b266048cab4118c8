"""A claim labels an unowned CR with this member and drops the hand-off annotation an
earlier move left on it: the dead member's plans for the key died with it. (Found by the
chaos soak, docs/soak.md: a CR whose run was cut short by its replica's death kept a
schedule handed off before that run, and its new owner waited 10 h to run it again.)"""

from __future__ import annotations

from typing import Any, cast

from runner.sharding.membership import RingSettings
from runner.sharding.ring import Handoff, handoff_annotation, shard_label
from runner.sharding.sharder import Sharder
from runner.structs import GVK, NamespacedName

GVK_ = GVK("cache.example.com", "v1alpha1", "Memcached")
KEY = NamespacedName("ns", "one")


class RecordingClient:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch(self, gvk: GVK, *, name: str, namespace: str | None, body: Any) -> Any:
        self.patches.append(body)
        return {}


def _unowned(**annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": KEY.name,
            "namespace": KEY.namespace,
            "resourceVersion": "7",
            "labels": {shard_label("r"): "dead-member"},
            "annotations": annotations,
        }
    }


async def test_a_claim_drops_a_stale_handoff_and_keeps_other_annotations_alone() -> None:
    client = RecordingClient()
    sharder = Sharder(
        client=cast(Any, client),
        settings=RingSettings(ring="r", namespace="ns", member="b"),
        namespaces=None,
    )
    stale = Handoff(source="a", due=4e9, failures=0, generation=2).encode()
    await sharder._claim_one(GVK_, KEY, _unowned(**{handoff_annotation("r"): stale}))
    await sharder._claim_one(GVK_, KEY, _unowned(other="kept"))
    with_handoff, without = (patch["metadata"] for patch in client.patches)
    assert with_handoff == {
        "resourceVersion": "7",
        "labels": {shard_label("r"): "b"},
        "annotations": {handoff_annotation("r"): None},
    }
    assert "annotations" not in without
    assert sharder.claims == 2
