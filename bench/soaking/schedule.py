"""The fault schedule: which faults happen when, drawn from a seed.

Pure: `draw` with the same seed and the same shape (chaos window, replicas, burst size)
gives the same faults, so `--seed N` replays a schedule. What a fault *does* to the
running system is not replayed exactly (the machine's timing decides which run a kill
cuts short), only what is injected and when.

Every kind appears at least once; the rest are drawn by weight. About a third of the
faults start while the one before is still going on, so that faults combine (an API
server restart during a stall, a kill during a burst).

Targets: `leader` (resolved when the fault happens: the replica holding the Lease; with
sharding, the replica owning most CRs) or a replica's name; cluster-wide faults have none.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

KILL9 = "kill9"
SIGTERM = "sigterm"
APISERVER = "apiserver-restart"
ETCD = "etcd-restart"
STALL = "tcp-stall"
BURST = "burst"
ZYGOTE = "zygote-kill"
DISKFULL = "disk-full"

KINDS = (KILL9, SIGTERM, APISERVER, ETCD, STALL, BURST, ZYGOTE, DISKFULL)
"""Every kind of fault, in the order the report lists them."""

_WEIGHTS = {
    KILL9: 3,
    SIGTERM: 2,
    APISERVER: 2,
    ETCD: 1,
    STALL: 3,
    BURST: 1,
    ZYGOTE: 2,
    DISKFULL: 1,
}
# Seconds a fault lasts (drawn uniformly): how long the component is down, the connection
# stalled, the disk full. Kills and bursts are instants (the burst's creates take a while).
_SECONDS = {
    APISERVER: (2.0, 10.0),
    ETCD: (2.0, 8.0),
    STALL: (3.0, 25.0),
    DISKFULL: (5.0, 20.0),
}
_TARGETED = (KILL9, SIGTERM, STALL, ZYGOTE, DISKFULL)
_CLUSTER_WIDE = (APISERVER, ETCD)


@dataclass(frozen=True)
class Fault:
    """One fault: `at` seconds after the chaos window opened."""

    at: float
    kind: str
    target: str = ""
    seconds: float = 0.0
    count: int = 0

    def describe(self) -> str:
        parts = [f"{self.at:7.1f} s  {self.kind}"]
        if self.target:
            parts.append(f"on {self.target}")
        if self.seconds:
            parts.append(f"for {self.seconds:.1f} s")
        if self.count:
            parts.append(f"{self.count} CRs")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def fault_count(window: float) -> int:
    """How many faults a chaos window of `window` seconds gets: one every 12 s on average,
    and at least one of each kind."""
    return max(len(KINDS), round(window / 12.0))


def draw(
    seed: int,
    *,
    window: float,
    replicas: Sequence[str],
    burst: int,
    count: int | None = None,
) -> list[Fault]:
    """The faults of a chaos window of `window` seconds, by start time. Every fault starts
    before the last tenth of the window (the window's end is for the faults to finish)."""
    if window <= 0:
        return []
    if not replicas:
        raise ValueError("a soak needs at least one replica")
    rng = random.Random(seed)
    total = count if count is not None else fault_count(window)
    kinds = list(KINDS)
    if total > len(kinds):
        weighted = [kind for kind in KINDS for _ in range(_WEIGHTS[kind])]
        kinds += [rng.choice(weighted) for _ in range(total - len(KINDS))]
    rng.shuffle(kinds)
    kinds = kinds[:total]
    latest = window * 0.9
    faults: list[Fault] = []
    for kind in kinds:
        if faults and rng.random() < 1 / 3:
            # Overlap the fault just drawn: start within its first seconds.
            previous = faults[-1]
            at = min(latest, previous.at + rng.uniform(0.0, max(1.0, previous.seconds)))
        else:
            at = rng.uniform(0.0, latest)
        faults.append(_fault(rng, kind, at, replicas=replicas, burst=burst))
    return sorted(faults, key=lambda fault: (fault.at, fault.kind))


def _fault(
    rng: random.Random,
    kind: str,
    at: float,
    *,
    replicas: Sequence[str],
    burst: int,
) -> Fault:
    target = ""
    if kind in _TARGETED:
        target = "leader" if rng.random() < 0.6 else rng.choice(list(replicas))
    seconds = 0.0
    if kind in _SECONDS:
        low, high = _SECONDS[kind]
        seconds = round(rng.uniform(low, high), 1)
    return Fault(
        at=round(at, 1),
        kind=kind,
        target=target,
        seconds=seconds,
        count=burst if kind == BURST else 0,
    )


def overlapping_pairs(faults: Sequence[Fault]) -> int:
    """How many pairs of faults are under way at the same time (a fault without a
    duration counts for one second)."""
    spans = [(f.at, f.at + max(1.0, f.seconds)) for f in faults]
    return sum(
        1
        for i, (start, end) in enumerate(spans)
        for other_start, other_end in spans[i + 1 :]
        if start < other_end and other_start < end
    )


def is_cluster_wide(kind: str) -> bool:
    return kind in _CLUSTER_WIDE


def render(faults: Sequence[Fault]) -> str:
    return "\n".join(fault.describe() for fault in faults)
