"""`ansible-operator sharding status`: a ring's members and how many CRs each owns.

Read from the API like any client: the ring's Leases (live while renewed within their
duration; this command compares `renewTime` with its own clock, which the replicas never
do) and the watched kinds' CRs counted by their shard label.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import yaml

from runner.engine.leader import LEASE
from runner.errors import ConfigError
from runner.k8s.client import KubeClient
from runner.sharding.ring import LEAVING_ANNOTATION, RING_LABEL, shard_of
from runner.structs import GVK, bodies
from runner.structs.bodies import KubeObject


@dataclass(frozen=True)
class MemberRow:
    member: str
    state: str  # live, leaving, expired, released, gone
    renewed_ago: float | None
    keys: int


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sharding = sub.add_parser("sharding", help="inspect a sharding ring (run --sharding)")
    actions = sharding.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = actions.add_parser(
        "status",
        help="the ring's members and how many CRs each owns",
        description="List the members of a sharding ring (their Leases) and count the "
        "CRs of every kind in watches.yaml by the member that owns them.",
    )
    status.add_argument("--ring", default="", help="the ring (default: $OPERATOR_NAME)")
    status.add_argument(
        "--namespace",
        default="",
        help="namespace of the ring's Leases (default: $POD_NAMESPACE, else the first "
        "of $WATCH_NAMESPACE)",
    )
    status.add_argument("--watches-file", default="watches.yaml", help="the kinds to count")
    status.set_defaults(handler=_cmd_status)


def _cmd_status(args: argparse.Namespace) -> int:
    environ = os.environ
    ring = args.ring or environ.get("OPERATOR_NAME", "")
    if not ring:
        raise ConfigError("sharding status: name the ring with --ring (or $OPERATOR_NAME)")
    watched = [n.strip() for n in environ.get("WATCH_NAMESPACE", "").split(",") if n.strip()]
    namespace = args.namespace or environ.get("POD_NAMESPACE", "") or next(iter(watched), "")
    if not namespace:
        raise ConfigError("sharding status: pass --namespace (where the ring's Leases are)")
    kinds = watched_kinds(Path(args.watches_file))
    rows, unowned = asyncio.run(
        collect(ring=ring, namespace=namespace, kinds=kinds, namespaces=watched or None)
    )
    render(sys.stdout, ring=ring, namespace=namespace, rows=rows, unowned=unowned)
    return 0


def watched_kinds(path: Path) -> list[GVK]:
    """The group/version/kind of every entry of watches.yaml (nothing else is checked)."""
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not YAML: {err}") from None
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: expected a list of watches")
    return [
        GVK(str(e.get("group") or ""), str(e.get("version") or ""), str(e.get("kind") or ""))
        for e in entries
        if isinstance(e, dict) and e.get("kind") and e.get("version")
    ]


async def collect(
    *, ring: str, namespace: str, kinds: Sequence[GVK], namespaces: Sequence[str] | None
) -> tuple[list[MemberRow], int]:
    async with await KubeClient.connect(kubeconfig=os.environ.get("KUBECONFIG")) as client:
        leases, _ = await client.list(
            LEASE, namespace=namespace, label_selector=f"{RING_LABEL}={ring}"
        )
        owners: Counter[str] = Counter()
        for gvk in kinds:
            wheres: Sequence[str | None] = namespaces or [None]
            for where in wheres:
                items, _ = await client.list(gvk, namespace=where)
                owners.update(shard_of(item, ring) for item in items)
    return member_rows(leases, owners, now=datetime.now(UTC)), owners.get("", 0)


def member_rows(
    leases: Sequence[KubeObject], owners: Counter[str], *, now: datetime
) -> list[MemberRow]:
    """One row per Lease, then one per member that owns CRs but has no Lease (dead)."""
    rows = []
    for lease in leases:
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        member = holder or bodies.name(lease)
        renewed = spec.get("renewTime")
        ago = (now - _time(renewed)).total_seconds() if renewed else None
        duration = float(spec.get("leaseDurationSeconds") or 0)
        if not holder:
            state = "released"
        elif ago is not None and ago < duration:
            leaving = bodies.annotations(lease).get(LEAVING_ANNOTATION) == "true"
            state = "leaving" if leaving else "live"
        else:
            state = "expired"
        rows.append(MemberRow(member, state, ago, owners.get(member, 0)))
    known = {row.member for row in rows}
    for member, keys in sorted(owners.items()):
        if member and member not in known:
            rows.append(MemberRow(member, "gone", None, keys))
    return rows


def render(
    out: TextIO, *, ring: str, namespace: str, rows: Sequence[MemberRow], unowned: int
) -> None:
    live = sum(row.state == "live" for row in rows)
    out.write(f"ring {ring} in {namespace}: {live} live member(s)\n")
    table = [("MEMBER", "STATE", "RENEWED", "KEYS")]
    for row in rows:
        ago = f"{row.renewed_ago:.1f}s ago" if row.renewed_ago is not None else "-"
        table.append((row.member, row.state, ago, str(row.keys)))
    table.append(("(unowned)", "", "", str(unowned)))
    widths = [max(len(line[i]) for line in table) for i in range(4)]
    for line in table:
        out.write("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
        out.write("\n")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
