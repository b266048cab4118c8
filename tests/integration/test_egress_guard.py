"""While a local cluster runs, a connection from this machine to one of its made-up
addresses (a ClusterIP without endpoints, a kwok pod's IP) is refused at once by the
cluster's egress chain instead of leaving by the default route; `down`, and a start that
fails, take the chain away again and leave every other iptables rule as it was."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from support.kube import wait_for
from support.realnode import MachineSnapshot

from runner.devtools.cluster import egress
from runner.devtools.cluster.controlplane import FAKE_NODE
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.cluster.realnode import machine
from runner.devtools.cluster.realnode.nodeconfig import NodeLayout
from runner.errors import ClusterError

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        egress.why_no_guard() is not None,
        reason=f"no egress guard on this machine: {egress.why_no_guard()}",
    ),
]


def _ipv4_rules() -> frozenset[str]:
    return MachineSnapshot.take().iptables["ipv4"]


def _ours(rules: frozenset[str], cluster: LocalCluster) -> list[str]:
    return sorted(r for r in rules if cluster.real_node.layout.ident.upper() in r)


def _rejected(destination: str) -> int:
    """Packets the TCP REJECT rules for `destination` of every egress guard chain have
    answered so far. Every guard counts: another cluster of ours (the session's, under
    xdist) may guard the same range, and whichever chain comes first in OUTPUT answers."""
    iptables = machine.program("iptables")
    names = re.findall(r"^-N (AO-\S+-EGRESS)$", machine.run([iptables, "-w", "-S"]).stdout, re.M)
    total = 0
    for chain in names:
        listing = machine.run([iptables, "-w", "-n", "-v", "-x", "-L", chain]).stdout
        total += sum(
            int(line.split()[0])
            for line in listing.splitlines()[2:]
            if "REJECT" in line and "tcp-reset" in line and destination in line.split()
        )
    return total


def _connect(address: str, port: int) -> BaseException | None:
    """What connecting to address:port raised (None if it connected)."""
    try:
        with socket.create_connection((address, port), timeout=10):
            return None
    except OSError as exc:
        return exc


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path / "cluster")
    try:
        yield local
    finally:
        local.down(progress=lambda _message: None)


def test_cluster_addresses_are_refused_on_the_machine_and_the_chain_goes_with_down(
    cluster: LocalCluster,
) -> None:
    before = _ipv4_rules()
    messages: list[str] = []
    cluster.up(progress=messages.append)
    state = cluster.load_state()
    assert state is not None
    chain = egress.chain_name(cluster.real_node.layout)
    networks = state.cluster_networks
    # Checked before any dial: without the chain, the dials below would leave the machine.
    assert egress.installed(cluster.real_node.layout), messages
    rules = _ipv4_rules()
    assert f"filter -A OUTPUT -j {chain}" in rules
    assert f"filter -A FORWARD -j {chain}" in rules
    assert not any(m.startswith("warning: no egress guard") for m in messages)

    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    core = client.CoreV1Api(api)
    try:
        service = core.create_namespaced_service(
            "default",
            {
                "metadata": {"name": "nowhere"},
                "spec": {"ports": [{"port": 8443}]},  # no selector: no endpoints ever
            },
        )
        cluster_ip = service.spec.cluster_ip
        core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": "paper"},
                "spec": {
                    "nodeName": FAKE_NODE,
                    "containers": [{"name": "c", "image": "nothing:1"}],
                },
            },
        )
        pod_ip = wait_for(
            lambda: core.read_namespaced_pod("paper", "default").status.pod_ip,
            timeout=60,
            message="kwok gives pod paper an address",
        )
    finally:
        api.close()

    for address, port, network in (
        (cluster_ip, 8443, networks.service),
        (pod_ip, 8080, networks.pods),
    ):
        assert ipaddress.ip_address(address) in ipaddress.ip_network(network)
        rejected = _rejected(network)
        error = _connect(address, port)
        # Refused by a guard rule of ours, not timed out somewhere beyond the machine.
        assert isinstance(error, ConnectionRefusedError), (address, error)
        assert _rejected(network) > rejected, address

    cluster.down(progress=messages.append)
    assert f"removed iptables chain filter/{chain}" in messages
    assert not egress.installed(cluster.real_node.layout)
    after = _ipv4_rules()
    assert _ours(after, cluster) == []
    assert _ours(before, cluster) == []


def test_a_failed_start_takes_the_guard_away(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []

    def fail(*_args: object, **_kwargs: object) -> None:
        seen.append(egress.installed(cluster.real_node.layout))
        raise ClusterError("etcd exited during start-up")

    monkeypatch.setattr(LocalCluster, "_start_all", fail)
    with pytest.raises(ClusterError, match="etcd exited"):
        cluster.up(progress=lambda _message: None)
    assert seen == [True]  # installed before anything started
    assert not egress.installed(cluster.real_node.layout)
    assert _ours(_ipv4_rules(), cluster) == []


def test_the_guard_of_a_cluster_deleted_without_down_is_swept(tmp_path: Path) -> None:
    state_dir = tmp_path / "gone"
    state_dir.mkdir()
    (state_dir / "state.json").write_text("{}", encoding="utf-8")
    layout = NodeLayout.of(state_dir)
    egress.install(layout, ["10.0.0.0/24"])
    try:
        assert egress.chain_name(layout) not in egress.sweep_orphans()  # its cluster is there
        assert egress.installed(layout)
        (state_dir / "state.json").unlink()  # as when the directory is deleted
        assert egress.chain_name(layout) in egress.sweep_orphans()
        assert not egress.installed(layout)
        assert not (egress.RECORDS / egress.chain_name(layout)).exists()
    finally:
        egress.remove(layout)
