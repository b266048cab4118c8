"""iptables chains of our own: each reached by one unconditional jump from built-in
chains, so adding and removing ours never touches anybody else's rules.

The `iptables` found on the machine is used as it is (Debian's default is the nf_tables
backend, `iptables-legacy` where an admin chose it), like every other tool on the machine
that manages its own chains.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.devtools.cluster.realnode.machine import program, run
from runner.errors import ClusterError


@dataclass(frozen=True)
class Chain:
    """One chain: its table, name, the built-in chains that jump to it, its rules (each as
    iptables arguments after `-A <chain>`)."""

    table: str
    name: str
    jumps_from: tuple[str, ...]
    rules: tuple[tuple[str, ...], ...] = ()


def _exists(iptables: str, table: str, name: str) -> bool:
    return run([iptables, "-w", "-t", table, "-n", "-L", name], check=False).returncode == 0


def install(chains: Sequence[Chain]) -> None:
    """Create or refill each chain and make sure each jump is there (first in its built-in
    chain). Idempotent: a chain that exists is flushed and filled again, its jumps kept.
    On failure, what was installed is removed again before the error is raised."""
    iptables = program("iptables")
    try:
        for chain in chains:
            table = ["-w", "-t", chain.table]
            if _exists(iptables, chain.table, chain.name):
                run([iptables, *table, "-F", chain.name])
            else:
                run([iptables, *table, "-N", chain.name])
            for rule in chain.rules:
                run([iptables, *table, "-A", chain.name, *rule])
            for builtin in chain.jumps_from:
                jump = ["-j", chain.name]
                if run([iptables, *table, "-C", builtin, *jump], check=False).returncode != 0:
                    run([iptables, *table, "-I", builtin, "1", *jump])
    except ClusterError:
        remove(chains)
        raise


def remove(chains: Sequence[Chain]) -> list[str]:
    """Delete the jumps to each chain and the chain; returns `table/chain` of those
    removed (none when iptables is missing: then there are none)."""
    removed: list[str] = []
    try:
        iptables = program("iptables")
    except ClusterError:
        return removed
    for chain in chains:
        table = ["-w", "-t", chain.table]
        for builtin in chain.jumps_from:
            jump = [iptables, *table, "-D", builtin, "-j", chain.name]
            while run(jump, check=False).returncode == 0:
                pass
        if run([iptables, *table, "-F", chain.name], check=False).returncode == 0:
            run([iptables, *table, "-X", chain.name], check=False)
            removed.append(f"{chain.table}/{chain.name}")
    return removed


def exists(chain: Chain) -> bool:
    try:
        return _exists(program("iptables"), chain.table, chain.name)
    except ClusterError:
        return False
