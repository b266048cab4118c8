"""The leader-election flags of `run` reach the elector's settings as given."""

from __future__ import annotations

import argparse

from runner.cli.runflags import add_run_arguments
from runner.cli.runsettings import leader_settings
from runner.engine.leader import LeaderSettings


def test_the_lease_timing_flags_become_the_electors_settings() -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    args = parser.parse_args(
        [
            "--leader-elect",
            "--leader-election-id=observe-lock",
            "--leader-election-namespace=ops",
            "--leader-elect-lease-duration=4s",
            "--leader-elect-renew-deadline=3s",
            "--leader-elect-retry-period=500ms",
        ]
    )
    assert leader_settings(args, {}, None) == LeaderSettings(
        name="observe-lock", namespace="ops", lease_duration=4, renew_deadline=3, retry_period=0.5
    )


def test_without_leader_elect_there_is_no_election() -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    assert leader_settings(parser.parse_args([]), {}, None) is None
