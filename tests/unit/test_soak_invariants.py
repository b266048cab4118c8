"""bench/soaking: the run log read back, the operator log's facts, and each invariant the
soak checks, on made-up records (no cluster)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.soaking import invariants, oplog, runlog
from bench.soaking.invariants import CR, Deleted, Life, Resources

NS = "soak"


def record(ev: str, run: str, *, at: float, **fields: Any) -> str:
    base = {
        "ev": ev,
        "run": run,
        "phase": "reconcile",
        "key": f"{NS}/s-1",
        "uid": "u1",
        "gen": 1,
        "shard": "",
        "inc": run.split(":")[0],
        "pid": 100,
        "wall": at,
        "mono": at,
    }
    return json.dumps({**base, **fields})


def runs(*lines: str) -> runlog.RunLog:
    return runlog.parse(lines)


def life(ident: str, **fields: Any) -> Life:
    defaults: dict[str, Any] = {
        "replica": ident[0],
        "started": 0.0,
        "exited": None,
        "gone": None,
        "identity": ident,
        "holding_from": 1.0,
    }
    return Life(id=ident, **{**defaults, **fields})


# -- the run log ------------------------------------------------------------------------


def test_runs_pair_by_id_and_a_killed_run_has_no_end() -> None:
    log = runs(
        record("start", "a1:10:5", at=10),
        record("start", "a1:10:5", at=10.5),  # templated twice: counted once
        record("end", "a1:10:5", at=12, failed=False),
        record("start", "a1:11:6", at=13),
        "half a li",
        record("end", "b1:9:9", at=14),  # an end without a start
    )
    assert [(r.run, r.started, r.ended) for r in log.runs] == [
        ("a1:10:5", 10, 12),
        ("a1:11:6", 13, None),
    ]
    assert log.runs[0].completed and not log.runs[1].completed
    assert log.unreadable == 2


# -- the operator's log -----------------------------------------------------------------


def entry(ts: str, msg: str) -> str:
    return json.dumps({"ts": f"2026-01-01T00:00:{ts}+00:00", "level": "info", "msg": msg})


def test_the_operator_log_says_who_held_the_lease_when() -> None:
    found = oplog.parse(
        [
            entry("01", "waiting for the lease soak-system/soak (identity host_abc)"),
            entry("03", "became the leader (lease soak-system/soak)"),
            entry("04", "reconcile Soak soak/s-1: running Ansible"),
            entry("05", "reconcile Soak soak/s-1: succeeded in 1.00 s (ok=3 changed=0)"),
            entry("07", "removed finalizer soak.test.example.com/cleanup from Soak soak/s-1"),
            entry("09", "lost the lease soak-system/soak; stopping"),
            "Traceback (most recent call last):",
        ]
    )
    assert found.identity == "host_abc"
    assert found.holding_from is not None and found.lost_at is not None
    assert found.lost_at - found.holding_from == 6
    assert found.end_after("soak/s-1", found.holding_from) == found.run_ends["soak/s-1"][0]
    assert list(found.finalizer_removed) == ["soak/s-1"]
    assert len(found.tracebacks) == 1


def test_a_ring_member_is_named_by_its_log() -> None:
    found = oplog.parse(
        [
            entry("01", "joining the ring soak as member soak-a-x1 (member Lease s/soak-a)"),
            entry("02", "joined the ring soak as member soak-a-x1 (member Lease s/soak-a, ...)"),
        ]
    )
    assert (found.identity, found.member) == ("soak-a-x1", "soak-a-x1")
    assert found.holding_from is not None


# -- the CRs ----------------------------------------------------------------------------


def test_an_existing_cr_must_be_successful_at_its_latest_generation() -> None:
    log = runs(
        record("start", "a1:1:1", at=1, gen=1),
        record("end", "a1:1:1", at=2),
        record("start", "a1:2:2", at=3, gen=2),
        record("end", "a1:2:2", at=4, failed=True),
    )
    crs = [CR("s-1", "u1", generation=2, successful=True, deleting=False)]
    check = invariants.existing_successful(crs, log, namespace=NS, now=10)
    assert not check.passed
    assert "saw generation 1, it is at 2" in check.violations[0].text
    fixed = runs(record("start", "a1:3:3", at=5, gen=2), record("end", "a1:3:3", at=6))
    log.runs.extend(fixed.runs)
    assert invariants.existing_successful(crs, log, namespace=NS, now=10).passed


@pytest.mark.parametrize(
    ("finalizer_runs", "passed"),
    [
        pytest.param([("a1", True, False)], True, id="once"),
        pytest.param([("a1", False, False), ("b1", True, False)], True, id="killed-then-done"),
        pytest.param([("a1", True, True), ("a1", True, False)], True, id="failed-then-done"),
        pytest.param([("a1", False, False)], False, id="never-completed"),
        pytest.param([("a1", True, False), ("a1", True, False)], False, id="twice-same-process"),
        pytest.param([("r1", True, False), ("b1", True, False)], False, id="twice-though-removed"),
        pytest.param(
            [("x1", True, False), ("b1", True, False)], True, id="again-after-a-lost-removal"
        ),
        pytest.param(
            [("h1", True, False), ("b1", True, False)], False, id="again-while-still-holding"
        ),
        pytest.param(
            [("e1", True, False), ("e1", True, False)], True, id="again-after-an-error-end"
        ),
        pytest.param(
            [("l1", True, False), ("l1", True, False)], False, id="removed-only-after-again"
        ),
    ],
)
def test_a_deleted_cr_is_finalized_exactly_once(
    finalizer_runs: list[tuple[str, bool, bool]], passed: bool
) -> None:
    """Runs at 10, 12, 14 ... s, each a second long. a1 and b1 hold their Lease all along;
    r1 removed the finalizer after its run; x1 did not and lost its Lease at 11.5 s;
    h1 did not either but held its Lease until 30 s; e1's operator logged the first run's
    end as an error (a disk-full run directory: the role ran, its result was lost); l1
    removed the finalizer only after its second run."""
    lives = {
        "a1": life("a1"),
        "b1": life("b1"),
        "r1": life("r1", finalizer_removed={f"{NS}/s-1": [11.2]}, lost_at=11.5),
        "x1": life("x1", lost_at=11.5, exited=11.6, gone=11.7),
        "h1": life("h1", lost_at=30.0),
        "e1": life("e1", run_errors={f"{NS}/s-1": [11.1]}, finalizer_removed={f"{NS}/s-1": [13.2]}),
        "l1": life("l1", finalizer_removed={f"{NS}/s-1": [13.2]}),
    }
    lines = []
    for index, (incarnation, ended, failed) in enumerate(finalizer_runs):
        run = f"{incarnation}:{index}"
        lines.append(record("start", run, at=10 + 2 * index, phase="finalize"))
        if ended:
            lines.append(record("end", run, at=11 + 2 * index, phase="finalize", failed=failed))
    check = invariants.deleted_finalized_once(
        [Deleted("s-1", "u1", at=9)], [], runs(*lines), lives, namespace=NS, now=20
    )
    assert check.passed is passed, check.violations


def test_a_deleted_cr_still_there_fails() -> None:
    log = runs(
        record("start", "a1:1:1", at=1, phase="finalize"),
        record("end", "a1:1:1", at=2, phase="finalize"),
    )
    still = [CR("s-1", "u1", generation=1, successful=True, deleting=True)]
    check = invariants.deleted_finalized_once(
        [Deleted("s-1", "u1", at=0)], still, log, {"a1": life("a1")}, namespace=NS, now=5
    )
    assert [v.text for v in check.violations] == ["deleted, but still there"]


# -- runs in time -----------------------------------------------------------------------


def test_runs_of_one_cr_on_two_replicas_must_not_overlap() -> None:
    log = runs(
        record("start", "a1:1:1", at=10),
        record("end", "a1:1:1", at=20),
        record("start", "b1:1:1", at=19),
        record("end", "b1:1:1", at=25),
    )
    lives = {"a1": life("a1"), "b1": life("b1")}
    check = invariants.no_overlaps(log, lives, [])
    assert not check.passed
    assert "started 1.00 s before the reconcile run on a1 ended" in check.violations[0].text


def test_a_killed_run_ends_when_its_operators_last_process_was_gone() -> None:
    killed = runs(
        record("start", "a1:1:1", at=10),
        record("start", "b1:1:1", at=31),
        record("end", "b1:1:1", at=33),
    )
    cut_at_30 = {"a1": life("a1", exited=29, gone=30), "b1": life("b1")}
    assert invariants.no_overlaps(killed, cut_at_30, []).passed
    cut_at_32 = {"a1": life("a1", exited=29, gone=32), "b1": life("b1")}
    assert not invariants.no_overlaps(killed, cut_at_32, []).passed


def test_a_run_cut_off_by_a_lost_lease_ends_when_its_manager_stopped() -> None:
    # Seed 255796: the replica lost its ring Lease in a TCP stall, its manager cut the
    # run off (killed and reaped) at 24; the process exited only when the stall ended.
    log = runs(
        record("start", "a1:1:1", at=10),
        record("start", "b1:1:1", at=31),
        record("end", "b1:1:1", at=33),
    )
    stopped = {"a1": life("a1", stopped=[24.0], exited=40, gone=40), "b1": life("b1")}
    assert invariants.no_overlaps(log, stopped, []).passed
    not_yet = {"a1": life("a1", stopped=[32.0], exited=40, gone=40), "b1": life("b1")}
    assert not invariants.no_overlaps(log, not_yet, []).passed
    before_the_run = {"a1": life("a1", stopped=[5.0], exited=40, gone=40), "b1": life("b1")}
    assert not invariants.no_overlaps(log, before_the_run, []).passed


def test_the_managers_stop_is_read_from_its_log() -> None:
    line = json.dumps(
        {"ts": "2026-01-01T00:00:09+00:00", "logger": "ansible-operator.manager", "msg": "stopped"}
    )
    other = json.dumps({"ts": "2026-01-01T00:00:08+00:00", "logger": "x.proxy", "msg": "stopped"})
    found = oplog.parse([other, line])
    assert len(found.stopped) == 1


def test_a_run_cut_short_ends_with_its_reconcile_or_its_zygote() -> None:
    log = runs(record("start", "a1:1:1", at=10), record("start", "a1:2:2", at=15))
    logged = {"a1": life("a1", run_ends={f"{NS}/s-1": [14.0]})}
    assert invariants.no_overlaps(log, logged, []).passed is False  # the second never ended
    log = runs(
        record("start", "a1:1:1", at=10),
        record("start", "a1:2:2", at=15),
        record("end", "a1:2:2", at=16),
    )
    assert invariants.no_overlaps(log, logged, []).passed
    assert invariants.no_overlaps(log, {"a1": life("a1")}, [("a1", 12.0)]).passed


def test_a_run_that_never_ended_while_its_operator_runs_fails() -> None:
    check = invariants.no_overlaps(runs(record("start", "a1:1:1", at=10)), {"a1": life("a1")}, [])
    assert "never ended" in check.violations[0].text


@pytest.mark.parametrize(
    ("start", "lease_seen", "passed"),
    [
        pytest.param(5.0, [], True, id="while-holding"),
        pytest.param(0.5, [], False, id="before-holding"),
        pytest.param(25.0, [], False, id="after-losing"),
        pytest.param(5.0, [(2.0, 2.1, "a1")], True, id="seen-held-by-itself"),
        pytest.param(5.0, [(2.0, 2.1, "b1")], False, id="seen-held-by-another-before"),
        pytest.param(5.0, [(4.9, 5.1, "b1")], True, id="seen-by-another-only-after"),
    ],
)
def test_runs_start_only_while_holding_the_lease(
    start: float, lease_seen: list[tuple[float, float, str]], passed: bool
) -> None:
    log = runs(record("start", "a1:1:1", at=start), record("end", "a1:1:1", at=start + 1))
    lives = {"a1": life("a1", lost_at=20.0, exited=21.0, gone=21.0)}
    check = invariants.runs_while_holding(log, lives, sharding=False, lease_seen=lease_seen)
    assert check.passed is passed


def test_a_sharded_run_must_be_of_its_replicas_shard() -> None:
    mine = runs(record("start", "a1:1:1", at=5, shard="a1"), record("end", "a1:1:1", at=6))
    other = runs(record("start", "a1:1:1", at=5, shard="b1"), record("end", "a1:1:1", at=6))
    lives = {"a1": life("a1")}
    assert invariants.runs_while_holding(mine, lives, sharding=True).passed
    assert not invariants.runs_while_holding(other, lives, sharding=True).passed


# -- the replicas' resources ------------------------------------------------------------


def resources(**fields: Any) -> Resources:
    defaults: dict[str, Any] = {
        "replica": "a",
        "incarnation": "a1",
        "holding": True,
        "rss_mib": 100.0,
        "fds": 20,
        "others": [],
        "zygotes": 1,
        "process_dirs": 1,
        "stale_data_dirs": [],
        "unfinished_runs": [],
        "leftovers": [],
    }
    return Resources(**{**defaults, **fields})


@pytest.mark.parametrize(
    ("end", "problem"),
    [
        pytest.param({}, "", id="as-before"),
        pytest.param({"fds": 30}, "", id="fds-within-slack"),
        pytest.param({"fds": 31}, "31 fds", id="fds-leaked"),
        pytest.param({"others": ["42 ansible-playbook"]}, "process 42", id="a-process-at-rest"),
        pytest.param({"zygotes": 3}, "3 zygotes", id="zygotes"),
        pytest.param({"process_dirs": 2}, "2 process run directories", id="run-dirs"),
        pytest.param({"stale_data_dirs": ["soak/s-9"]}, "a deleted CR", id="stale-data"),
        pytest.param({"leftovers": ["a1: 7 python"]}, "earlier process", id="leftover"),
        pytest.param({"incarnation": ""}, "not running", id="down"),
    ],
)
def test_leaks(end: dict[str, Any], problem: str) -> None:
    check = invariants.no_leaks({"a": resources()}, {"a": resources(**end)}, now=1)
    assert check.passed is (not problem)
    if problem:
        assert problem in check.violations[0].text


@pytest.mark.parametrize(
    ("baseline", "end", "passed"),
    [
        pytest.param({"a": 100.0}, 110.0, True, id="ten-percent"),
        pytest.param({"a": 100.0}, 111.0, False, id="more"),
        pytest.param({"a": 100.0}, 60.0, True, id="less-is-no-leak"),
    ],
)
def test_rss_within_ten_percent(baseline: dict[str, float], end: float, passed: bool) -> None:
    check = invariants.rss_bounded(
        {name: resources(rss_mib=rss) for name, rss in baseline.items()},
        {"a": resources(rss_mib=end)},
        now=1,
    )
    assert check.passed is passed


def test_rss_is_compared_with_a_replica_of_the_same_role() -> None:
    # b stood by at first and leads at the end: compared with a, the leader then.
    baseline = {
        "a": resources(replica="a", rss_mib=120.0, holding=True),
        "b": resources(replica="b", rss_mib=60.0, holding=False),
    }
    end = {"b": resources(replica="b", incarnation="b3", rss_mib=125.0, holding=True)}
    check = invariants.rss_bounded(baseline, end, now=1)
    assert check.passed, check.violations
    assert "120->125" in check.summary


def test_tracebacks_fail() -> None:
    check = invariants.no_tracebacks([life("a1", tracebacks=["Traceback (most recent ...)"])])
    assert not check.passed
