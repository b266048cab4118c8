"""Who the members are, from the ring's Leases as listed: live ones, and those of them
that are leaving (live, so nobody takes their keys; not assignable, so none is handed
to them)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from runner.sharding.membership import Members, RingSettings
from runner.sharding.ring import LEAVING_ANNOTATION


def _lease(holder: str, *, renewed: str = "t1", leaving: bool = False) -> dict[str, Any]:
    annotations = {LEAVING_ANNOTATION: "true"} if leaving else {}
    return {
        "metadata": {"name": f"r-{holder or 'x'}", "annotations": annotations},
        "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": 15},
    }


class Listing:
    """A client whose `list` answers the Leases it is given (no API server needed)."""

    def __init__(self, leases: list[dict[str, Any]]) -> None:
        self.leases = leases

    async def list(self, *_args: Any, **_kwargs: Any) -> tuple[list[dict[str, Any]], str]:
        return self.leases, "1"


def _members(leases: list[dict[str, Any]]) -> Members:
    settings = RingSettings(ring="r", namespace="ns", member="a")
    return Members(cast(Any, Listing(leases)), settings)


@pytest.mark.parametrize(
    ("leases", "live", "assignable"),
    [
        pytest.param([_lease("a"), _lease("b")], {"a", "b"}, {"a", "b"}, id="both-live"),
        pytest.param([_lease("a"), _lease("b", leaving=True)], {"a", "b"}, {"a"}, id="b-leaving"),
        pytest.param([_lease("a"), _lease("")], {"a"}, {"a"}, id="released"),
    ],
)
async def test_live_and_assignable_members(
    leases: list[dict[str, Any]], live: set[str], assignable: set[str]
) -> None:
    members = _members(leases)
    assert await members.refresh() == live
    assert members.assignable == assignable


async def test_leaving_takes_this_replica_out_of_the_assignable_at_once() -> None:
    members = _members([_lease("a"), _lease("b")])
    await members.refresh()
    members.leave()
    assert members.assignable == {"b"}
    await members.refresh()  # its own Lease not yet marked: it still knows
    assert members.live == {"a", "b"} and members.assignable == {"b"}
