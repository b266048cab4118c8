"""bench/soaking/schedule.py: a seed gives one schedule, every kind of fault is in it,
faults overlap, and every fault starts inside the chaos window."""

from __future__ import annotations

import pytest

from bench.soaking import schedule

REPLICAS = ["a", "b", "c"]


def test_the_same_seed_gives_the_same_schedule() -> None:
    first = schedule.draw(7, window=180, replicas=REPLICAS, burst=200)
    again = schedule.draw(7, window=180, replicas=REPLICAS, burst=200)
    other = schedule.draw(8, window=180, replicas=REPLICAS, burst=200)
    assert first == again
    assert first != other


@pytest.mark.parametrize("seed", range(20))
def test_every_kind_once_at_least_and_inside_the_window(seed: int) -> None:
    faults = schedule.draw(seed, window=120, replicas=REPLICAS, burst=50)
    assert {fault.kind for fault in faults} == set(schedule.KINDS)
    assert all(0 <= fault.at <= 120 * 0.9 for fault in faults)
    assert faults == sorted(faults, key=lambda fault: (fault.at, fault.kind))
    for fault in faults:
        if schedule.is_cluster_wide(fault.kind) or fault.kind == schedule.BURST:
            assert fault.target == ""
        else:
            assert fault.target in ("leader", *REPLICAS)
        assert (fault.count == 50) == (fault.kind == schedule.BURST)


def test_a_long_window_gets_more_faults_and_they_overlap() -> None:
    faults = schedule.draw(3, window=1800, replicas=REPLICAS, burst=200)
    assert len(faults) == schedule.fault_count(1800) == 150
    assert schedule.overlapping_pairs(faults) > 10


@pytest.mark.parametrize(
    ("spans", "pairs"),
    [
        pytest.param([(0, 5), (10, 5)], 0, id="apart"),
        pytest.param([(0, 5), (4, 5)], 1, id="overlapping"),
        pytest.param([(0, 20), (4, 0), (8, 0)], 2, id="two-inside-one"),
        pytest.param([(0, 0), (0.5, 0)], 1, id="instants-count-one-second"),
    ],
)
def test_overlapping_pairs(spans: list[tuple[float, float]], pairs: int) -> None:
    faults = [schedule.Fault(at=at, kind=schedule.STALL, seconds=s) for at, s in spans]
    assert schedule.overlapping_pairs(faults) == pairs


def test_no_window_no_faults_and_no_replicas_is_an_error() -> None:
    assert schedule.draw(1, window=0, replicas=REPLICAS, burst=1) == []
    with pytest.raises(ValueError, match="at least one replica"):
        schedule.draw(1, window=60, replicas=[], burst=1)
