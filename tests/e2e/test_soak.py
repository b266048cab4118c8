"""The chaos soak, short (docs/soak.md): three replicas and 200 CRs on a private cluster,
created, changed and deleted while faults drawn from a seed hit them, then every
invariant checked. Once with a fixed seed (leader election), once with a random one
(sharding), its seed printed: a failure is replayed with

    .venv/bin/python bench/soak.py --seed N [--sharding] --crs 200 --chaos 90 ...

(the replay command is printed with the results, and in the failure message). The soak
runs on a cluster of its own, so restarting its API server and etcd disturbs no other
test. `make soak` runs the long one.
"""

from __future__ import annotations

import random

import pytest

from bench.soaking.run import QUIET, Soak, SoakConfig

FIXED_SEED = 20261128
CRS = 200
CHAOS = 90.0  # seconds of workload and faults; about 3 minutes of soak with the rest


def random_seed() -> int:
    return random.SystemRandom().randrange(1, 10**6)


@pytest.mark.timeout(1800)  # the cluster, 200 CRs to converge twice, on two loaded cores
@pytest.mark.parametrize(
    ("seed", "sharding"),
    [
        pytest.param(FIXED_SEED, False, id="fixed-seed-leader-election"),
        pytest.param(None, True, id="random-seed-sharding"),
    ],
)
def test_the_short_soak_keeps_every_invariant(seed: int | None, sharding: bool) -> None:
    seed = seed if seed is not None else random_seed()
    print(f"soak seed {seed} ({'sharding' if sharding else 'leader election'})")
    config = SoakConfig(
        seed=seed,
        crs=CRS,
        chaos=CHAOS,
        quiet=QUIET,
        sharding=sharding,
        burst=CRS,
        # A directory of its own (printed), kept when the soak fails: pytest's base
        # directories are removed by later pytest runs of the same user.
        work_dir=None,
    )
    outcome = Soak(config).run()
    failed = [f"{check.name}: {check.summary}" for check in outcome.checks if not check.passed]
    assert not failed, f"seed {seed}: replay with `{config.replay()}`; failed: " + "; ".join(failed)
