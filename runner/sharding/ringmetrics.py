"""Per-replica sharding metrics, in the operator's registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_HANDOFF_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, float("inf"))


class ShardMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.members = Gauge(
            "ansible_operator_shard_members",
            "Live members of the sharding ring as this replica sees them",
            registry=registry,
        )
        self.keys = Gauge(
            "ansible_operator_shard_keys",
            "Custom resources this replica owns, by GVK",
            ["GVK"],
            registry=registry,
        )
        self.moves = Counter(
            "ansible_operator_shard_moves",
            "Keys this replica moved: handed off to another member (handoff), or taken "
            "over when unowned or owned by a dead member (claim)",
            ["GVK", "direction"],
            registry=registry,
        )
        self.handoff = Histogram(
            "ansible_operator_shard_handoff_seconds",
            "From deciding to move a key to its label naming the new owner (includes "
            "waiting for a run in flight to finish)",
            buckets=_HANDOFF_BUCKETS,
            registry=registry,
        )
