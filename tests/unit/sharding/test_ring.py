"""The ring's arithmetic: who owns a key, how many keys move, labels and selectors."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from runner.sharding.ring import (
    LEAVING_ANNOTATION,
    Handoff,
    check_ring_name,
    handoff_annotation,
    handoff_of,
    key_of,
    new_member,
    owner_of,
    unowned_selector,
)
from runner.sharding.ringstatus import member_rows
from runner.structs import GVK, NamespacedName

GVK_ = GVK("cache.example.com", "v1alpha1", "Memcached")
KEYS = [key_of(GVK_, NamespacedName("ns", f"cr-{i}")) for i in range(3000)]


def test_every_key_has_one_owner_and_the_shares_are_even() -> None:
    members = ["a-1", "b-2", "c-3"]
    shares = Counter(owner_of(key, members) for key in KEYS)
    assert set(shares) == set(members)
    assert all(800 < count < 1200 for count in shares.values()), shares


def test_the_owner_does_not_depend_on_the_members_order() -> None:
    assert all(owner_of(k, ["a", "b", "c"]) == owner_of(k, ["c", "a", "b"]) for k in KEYS)


def test_a_joining_member_takes_about_a_third_and_nothing_else_moves() -> None:
    before = {key: owner_of(key, ["a", "b"]) for key in KEYS}
    after = {key: owner_of(key, ["a", "b", "c"]) for key in KEYS}
    moved = [key for key in KEYS if before[key] != after[key]]
    assert all(after[key] == "c" for key in moved)
    assert 800 < len(moved) < 1200


def test_a_leaving_member_moves_only_its_own_keys() -> None:
    before = {key: owner_of(key, ["a", "b", "c"]) for key in KEYS}
    after = {key: owner_of(key, ["a", "b"]) for key in KEYS}
    assert all(before[key] == "c" for key in KEYS if before[key] != after[key])


def test_no_members_no_owner() -> None:
    assert owner_of("x", []) is None


def test_unowned_selector() -> None:
    label = "shard.sharding.ansible-operator/r"
    assert unowned_selector("r", ["b", "a"]) == f"{label} notin (a,b)"
    assert unowned_selector("r", []) == f"!{label}"


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        pytest.param("memcached-operator", True, id="dns-label"),
        pytest.param("Memcached", False, id="upper-case"),
        pytest.param("a" * 51, False, id="too-long"),
        pytest.param("-x", False, id="leading-dash"),
    ],
)
def test_ring_names(name: str, ok: bool) -> None:
    assert (check_ring_name(name) is None) is ok


def test_member_names_are_label_values_and_unique() -> None:
    first, second = new_member("My_Pod.example"), new_member("My_Pod.example")
    assert first != second
    assert first.startswith("my-pod-example-") and len(first) <= 63


def test_a_handoff_round_trips_and_garbage_is_ignored() -> None:
    for handoff in (
        Handoff(source="a", due=1234.5, failures=3),
        Handoff(source="a", due=1234.5, failures=3, generation=7),
    ):
        obj = {"metadata": {"annotations": {handoff_annotation("r"): handoff.encode()}}}
        assert handoff_of(obj, "r") == handoff
    broken = {"metadata": {"annotations": {handoff_annotation("r"): "{not json"}}}
    assert handoff_of(broken, "r") is None
    assert handoff_of({"metadata": {}}, "r") is None


def test_status_rows_name_live_leaving_expired_released_and_gone_members() -> None:
    now = datetime(2026, 1, 1, 12, 0, 10, tzinfo=UTC)

    def lease(holder: str, renewed: str, *, leaving: bool = False) -> dict[str, object]:
        spec = {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": 5}
        annotations = {LEAVING_ANNOTATION: "true"} if leaving else {}
        return {
            "metadata": {"name": f"r-{holder or 'x'}", "annotations": annotations},
            "spec": spec,
        }

    rows = member_rows(
        [
            lease("a", "2026-01-01T12:00:09.000000Z"),
            lease("b", "2026-01-01T12:00:00.000000Z"),
            lease("", "2026-01-01T12:00:09.000000Z"),
            lease("d", "2026-01-01T12:00:09.000000Z", leaving=True),
        ],
        Counter({"a": 3, "b": 2, "c": 1, "d": 5, "": 4}),
        now=now,
    )
    assert [(r.member, r.state, r.keys) for r in rows] == [
        ("a", "live", 3),
        ("b", "expired", 2),
        ("r-x", "released", 0),
        ("d", "leaving", 5),
        ("c", "gone", 1),
    ]
