"""Traffic for the local cluster's made-up addresses never leaves this machine.

The cluster's Service range and kwok's pod range exist only on paper: no kube-proxy
routes a ClusterIP here and kwok's pods have no network. Without a rule, a dial from
this machine to such an address (a test, the API server calling a webhook at an
endpoint that is a kwok pod) follows the default route off the machine. So:

- The ranges are chosen, at `up`, among a few candidates as the first that overlaps no
  network this machine routes or has an address in (a LAN on 10.0.0.0/24 is common):
  otherwise a ClusterIP would reach a real host, and the guard below would cut the
  machine off that network. No candidate free: `up` says which routes are in the way.
- While the cluster runs, one chain of its own in the filter table (`AO-<ID>-EGRESS`,
  jumped to from OUTPUT and FORWARD) REJECTs packets for those ranges (TCP with a reset,
  so a connect fails at once as "refused") unless they leave through loopback or the
  cluster's real-node bridge. The filter table sees a packet after nat OUTPUT's DNAT,
  so a Service address translated to a real pod on the bridge still passes; an
  `unreachable` route would fail such a packet before any DNAT. The real node's pod
  subnet joins the guarded ranges once the node runs: after its bridge is gone, a Pod
  or Endpoints object naming one of its addresses must not lead off the machine either.

The chain is per cluster (named after its state directory, like the real node's), not
reference-counted: two clusters on one machine each add and remove only their own.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.devtools.cluster.realnode import chains, podnet
from runner.devtools.cluster.realnode.chains import Chain
from runner.devtools.cluster.realnode.machine import program
from runner.devtools.cluster.realnode.nodeconfig import NodeLayout
from runner.errors import ClusterError

# Which state directory each guard belongs to (by chain name), so that the guard of a
# cluster deleted without `down` can be found and removed; gone after a reboot, like the
# chains themselves.
RECORDS = Path("/run/ansible-operator-egress")
# First choice first; the later ones for machines whose networks use the first.
# 198.18.0.0/15 is reserved for benchmark tests (RFC 2544): real networks rarely use it.
SERVICE_RANGES = ("10.0.0.0/24", "10.96.0.0/24", "198.18.0.0/24")
POD_RANGES = ("10.244.0.0/24", "10.246.0.0/24", "198.18.1.0/24")


@dataclass(frozen=True)
class ClusterNetworks:
    """The address ranges of one cluster."""

    service: str
    pods: str

    @property
    def service_ip(self) -> str:
        """The `kubernetes` Service's address: the range's first."""
        return str(ipaddress.ip_network(self.service).network_address + 1)


DEFAULT_NETWORKS = ClusterNetworks(SERVICE_RANGES[0], POD_RANGES[0])


def _in_the_way(candidate: str, used: Sequence[ipaddress.IPv4Network]) -> list[str]:
    network = ipaddress.ip_network(candidate)
    return [str(u) for u in used if u.prefixlen > 0 and network.overlaps(u)]


def choose_networks(used: Sequence[ipaddress.IPv4Network]) -> ClusterNetworks:
    """The first service and pod ranges that overlap none of `used` (the default route
    does not count: it is where a stray packet would go, which the guard stops)."""
    chosen = []
    for kind, candidates in (("Service", SERVICE_RANGES), ("pod", POD_RANGES)):
        free = [c for c in candidates if not _in_the_way(c, used)]
        if not free:
            blocking = sorted({n for c in candidates for n in _in_the_way(c, used)})
            raise ClusterError(
                f"every {kind} range the local cluster can use ({', '.join(candidates)}) "
                f"overlaps a network of this machine ({', '.join(blocking)}): addresses "
                "of the cluster would reach real hosts there"
            )
        chosen.append(free[0])
    return ClusterNetworks(service=chosen[0], pods=chosen[1])


def chain_name(layout: NodeLayout) -> str:
    return layout.chain("EGRESS")


def guard_chain(
    layout: NodeLayout, destinations: Sequence[str] = (), local: Sequence[str] = ()
) -> Chain:
    """The guard of the cluster whose real node would have `layout`: packets for
    `destinations` may leave only through loopback, the node's bridge or `local`."""
    rules: list[tuple[str, ...]] = [
        ("-o", interface, "-j", "RETURN") for interface in ("lo", layout.bridge, *local)
    ]
    for destination in destinations:
        rules.append(("-d", destination, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"))
        rules.append(("-d", destination, "-j", "REJECT", "--reject-with", "icmp-net-unreachable"))
    return Chain("filter", chain_name(layout), ("OUTPUT", "FORWARD"), tuple(rules))


def machine_networks() -> list[ipaddress.IPv4Network]:
    """The networks this machine routes or has an address in (`ip` must be installed)."""
    return podnet.networks_in_use()


def why_no_guard() -> str | None:
    """Why the guard cannot be installed here, or None when it can."""
    if os.geteuid() != 0:
        return "iptables rules need root"
    try:
        program("iptables")
    except ClusterError:
        return "iptables is not installed (Debian/Ubuntu: `apt-get install -y iptables`)"
    return None


def install(layout: NodeLayout, destinations: Sequence[str]) -> None:
    """Install (or refill) the guard for `destinations`; ClusterError if it cannot."""
    reason = why_no_guard()
    if reason is not None:
        raise ClusterError(reason)
    chains.install([guard_chain(layout, destinations)])
    with contextlib.suppress(OSError):
        RECORDS.mkdir(parents=True, exist_ok=True)
        (RECORDS / chain_name(layout)).write_text(str(layout.state_dir), encoding="utf-8")


def _remove_chain(name: str) -> bool:
    with contextlib.suppress(ClusterError, OSError):
        return bool(chains.remove([Chain("filter", name, ("OUTPUT", "FORWARD"))]))
    return False


def _forget(name: str) -> None:
    with contextlib.suppress(OSError):
        (RECORDS / name).unlink(missing_ok=True)
        RECORDS.rmdir()  # only when it is empty


def remove(layout: NodeLayout) -> bool:
    """Remove the guard if it is there; never fails (a stop must go on)."""
    removed = _remove_chain(chain_name(layout))
    _forget(chain_name(layout))
    return removed


def sweep_orphans() -> list[str]:
    """Remove the guards of clusters that are gone without `down` (their state directory
    holds no `state.json` any more: deleted, or its `up` was killed before it could clean
    up); returns the chains removed. A cluster saves its state before its guard."""
    removed = []
    with contextlib.suppress(OSError):
        for record in sorted(RECORDS.iterdir()) if RECORDS.is_dir() else []:
            state_dir = Path(record.read_text(encoding="utf-8").strip())
            if (state_dir / "state.json").is_file():
                continue
            if _remove_chain(record.name):
                removed.append(record.name)
            _forget(record.name)
    return removed


def installed(layout: NodeLayout) -> bool:
    return chains.exists(guard_chain(layout))
