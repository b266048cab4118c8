"""A seeded chaos soak: operator replicas on a private local cluster, CRs created, changed
and deleted all along, faults drawn from a seed (kill -9 and SIGTERM of a replica, API
server and etcd restarts, a TCP stall between a replica and the API server, a burst of
creates, a zygote killed, a replica's run directory full), overlapping; then a quiet
period and the invariants, printed as a table (docs/soak.md).

    .venv/bin/python bench/soak.py [--seed N] [--crs 200] [--chaos 120] [--sharding] ...

`--seed N` replays the schedule of an earlier soak (printed at its start, with the
command that replays it). Exit status 0 when every invariant held, 1 otherwise.
`--summarize soak.json` prints an earlier soak's results as markdown (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import random
import signal
import sys
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]
# Run as a script, bench/ comes first on the path, and its queue.py would shadow the
# standard library's: the repository instead, whose `bench` package this is.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
sys.path.insert(0, str(REPO))

from bench.soaking.replicas import ReplicaOptions  # noqa: E402
from bench.soaking.run import QUIET, Soak, SoakConfig  # noqa: E402


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="the schedule's seed (default: a random one)")
    parser.add_argument("--crs", type=int, default=200, help="CRs created first, and kept about")
    parser.add_argument("--chaos", type=float, default=120.0, help="seconds of workload and faults")
    parser.add_argument(
        "--quiet",
        type=float,
        default=QUIET,
        help="seconds of each quiet period (more than an idle API connection can live: 31 s)",
    )
    parser.add_argument("--replicas", type=int, default=3, choices=(2, 3))
    parser.add_argument(
        "--sharding", action="store_true", help="replicas share the CRs (--sharding)"
    )
    parser.add_argument("--burst", type=int, default=200, help="CRs of a burst fault")
    parser.add_argument("--rate", type=float, default=2.0, help="workload operations per second")
    parser.add_argument("--faults", type=int, help="how many faults (default: one per 12 s)")
    parser.add_argument(
        "--converge-timeout", type=float, default=600.0, help="seconds allowed to converge"
    )
    parser.add_argument("--lease-duration", type=float, default=15.0)
    parser.add_argument("--renew-deadline", type=float, default=10.0)
    parser.add_argument("--work-dir", type=Path, help="kept afterwards (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--results", type=Path, help="the JSON results (default: in the work dir)")
    parser.add_argument("--chart", type=Path, help="draw CPU and RSS over time (SVG) here")
    parser.add_argument(
        "--summarize",
        type=Path,
        metavar="JSON",
        help="print an earlier soak's results (its JSON) as markdown, and run nothing",
    )
    return parser


def _interrupted(signum: int, _frame: object) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.summarize is not None:
        import json

        from bench.soaking import report

        print(report.summary(json.loads(args.summarize.read_text(encoding="utf-8"))))
        return 0
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    config = SoakConfig(
        seed=seed,
        crs=args.crs,
        chaos=args.chaos,
        quiet=args.quiet,
        replicas=args.replicas,
        sharding=args.sharding,
        burst=args.burst,
        rate=args.rate,
        faults=args.faults,
        converge_timeout=args.converge_timeout,
        work_dir=args.work_dir,
        keep=args.keep,
        results=args.results,
        chart=args.chart,
        replica_options=ReplicaOptions(
            sharding=args.sharding,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
        ),
    )
    # SIGTERM as Ctrl-C: the replicas and the private cluster are stopped on the way out.
    signal.signal(signal.SIGTERM, _interrupted)
    outcome = Soak(config, say=lambda text: print(text, flush=True)).run()
    print(f"\nseed {seed}: {'PASSED' if outcome.passed else 'FAILED'}; replay: {config.replay()}")
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    sys.exit(main())
