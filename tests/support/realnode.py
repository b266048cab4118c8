"""Tests on the real node: a private cluster with one, a small image built here, and a
snapshot of what a real node may change on the machine.

`RealNodeCluster` is what the `real_node_cluster` session fixture yields; tests that need
real pods (exec, logs, the operator as a pod) share it, so the node starts once a session.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.devtools.cluster import build, egress
from runner.devtools.cluster.components import components
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.cluster.realnode import leftovers as sweep
from runner.devtools.cluster.realnode import machine, nodeconfig, podnet
from runner.devtools.cluster.realnode import ociarchive as oci
from runner.devtools.cluster.realnode.node import RealNode

# Static binaries only (FROM scratch): the cached kubectl (CGO off) and catatonit.
TOOLS_IMAGE = "localhost/ansible-operator-test/tools:1"


def tools_image_archive(cache: Path) -> bytes:
    kubectl = build.binary_path(components()["kubectl"], cache)
    return oci.image_archive(
        oci.ImageSpec(
            name=TOOLS_IMAGE,
            files={
                "kubectl": oci.ImageFile(kubectl.read_bytes()),
                "catatonit": oci.ImageFile(Path(machine.program("catatonit")).read_bytes()),
            },
            entrypoint=("/catatonit", "-P"),
            env=("PATH=/", "HOME=/tmp"),
        )
    )


@dataclass
class RealNodeCluster:
    """A running cluster with a real node, and helpers to put pods on that node."""

    cluster: LocalCluster

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    @property
    def node(self) -> RealNode:
        return self.cluster.real_node

    @property
    def node_name(self) -> str:
        return self.node.name

    def import_archive(self, archive: bytes) -> None:
        with tempfile.NamedTemporaryFile(suffix=".tar") as handle:
            handle.write(archive)
            handle.flush()
            self.node.import_image(Path(handle.name))

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        binary = build.binary_path(components()["kubectl"], self.cluster.cache)
        return subprocess.run(
            [str(binary), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=60,
        )


def tools_pod(name: str, main: dict[str, Any]) -> dict[str, Any]:
    """A pod on the real node from the tools image: an init container `whoami` asks the API
    server who it is through the in-cluster configuration (the pod network and the
    `kubernetes` Service address) and prints the answer; `main` is what the main container
    (named `main`, same image) adds: its command, security context."""
    return on_real_node(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "initContainers": [
                    {
                        "name": "whoami",
                        "image": TOOLS_IMAGE,
                        "imagePullPolicy": "Never",
                        "command": [
                            "/kubectl",
                            "auth",
                            "whoami",
                            "-o",
                            "jsonpath={.status.userInfo.username}",
                        ],
                    }
                ],
                "containers": [
                    {"name": "main", "image": TOOLS_IMAGE, "imagePullPolicy": "Never", **main}
                ],
            },
        }
    )


def on_real_node(pod: dict[str, Any]) -> dict[str, Any]:
    """`pod` with the toleration and node selector that place it on the real node."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("tolerations", []).append(dict(nodeconfig.TOLERATION))
    spec.setdefault("nodeSelector", {}).update(nodeconfig.NODE_SELECTOR)
    return pod


# -- what a real node may leave behind ---------------------------------------------------


@dataclass(frozen=True)
class MachineSnapshot:
    sysctls: dict[str, str]
    links: frozenset[str]
    mounts: frozenset[str]
    netns: frozenset[str]
    iptables: dict[str, frozenset[str]]
    other_real_nodes: bool

    @classmethod
    def take(cls) -> MachineSnapshot:
        links = subprocess.run(
            [machine.program("ip"), "-o", "link", "show"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        mounts = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
        netns_dir = Path("/run/netns")
        names = [line.split(":")[1].strip().split("@")[0] for line in links.splitlines()]
        netns = frozenset(p.name for p in (netns_dir.iterdir() if netns_dir.is_dir() else ()))
        return cls(
            sysctls=machine.read_sysctls(),
            links=frozenset(names),
            mounts=frozenset(line.split()[4] for line in mounts),
            netns=netns,
            iptables={family: frozenset(_iptables_rules(family)) for family in ("ipv4", "ipv6")},
            other_real_nodes=other_real_nodes(),
        )


def _iptables_rules(family: str) -> list[str]:
    """Every chain and rule (without packet counters) of `family`."""
    binary = "iptables-save" if family == "ipv4" else "ip6tables-save"
    output = subprocess.run(
        [machine.program(binary)], capture_output=True, text=True, check=True
    ).stdout
    table = ""
    rules = []
    for line in output.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith(":"):
            rules.append(f"{table} chain {line[1:].split()[0]}")
        elif line.startswith("-"):
            rules.append(f"{table} {line}")
    return rules


def leftovers(node: RealNode) -> list[str]:
    """What of `node` is still on the machine (processes, mounts, cgroups, bridge,
    iptables chains, run directory); empty when it was removed completely. The cluster's
    egress chain is not the node's (see `runner.devtools.cluster.egress`)."""
    layout = node.layout
    found = [f"process {pid}" for pid in sweep.owned_pids(layout)]
    found += [
        f"process {pid} ({name})"
        for pid, name in _processes_mentioning(str(layout.home), str(layout.run_dir))
    ]
    found += [f"mount {point}" for point in sweep.mounts_under(layout.owned_paths())]
    found += [f"cgroup {path}" for path in sweep.remaining_cgroups(layout.cgroup_root)]
    link = subprocess.run(
        [machine.program("ip"), "link", "show", layout.bridge], capture_output=True, check=False
    )
    if link.returncode == 0:
        found.append(f"bridge {layout.bridge}")
    # The cluster's egress chain carries the same id but is the cluster's, not the
    # node's: it stays until the cluster is down.
    cluster_chain = egress.chain_name(layout)
    for family in ("ipv4", "ipv6"):
        for table, chains in podnet.iptables_chains(family).items():
            found += [
                f"{family} chain {table}/{chain}"
                for chain in chains
                if (layout.ident.upper() in chain and chain != cluster_chain)
                or chain.startswith("KUBE-")
            ]
    if layout.run_dir.exists():
        found.append(f"directory {layout.run_dir}")
    return found


def _processes_mentioning(*needles: str) -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(needle in cmdline for needle in needles):
            found.append((int(entry.name), cmdline.split(" ", 1)[0]))
    return found


def other_real_nodes() -> bool:
    """Whether real nodes of other clusters run on this machine (shared developer
    machines): machine-wide settings are then theirs to keep until they stop."""
    users = nodeconfig.RUN_ROOT / "users"
    return users.is_dir() and any(users.iterdir())
