"""The egress guard's pure parts: the ranges chosen clear of the machine's networks, the
guard chain's rules, and the real node's chains built by the same chain model."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest
from cryptography import x509

from runner.devtools.cluster import egress
from runner.devtools.cluster.local import ClusterState, LocalCluster
from runner.devtools.cluster.realnode import podnet
from runner.devtools.cluster.realnode.chains import Chain
from runner.devtools.cluster.realnode.nodeconfig import NodeLayout
from runner.errors import ClusterError


def _networks(*cidrs: str) -> list[ipaddress.IPv4Network]:
    return [ipaddress.IPv4Network(c) for c in cidrs]


@pytest.mark.parametrize(
    ("used", "service", "pods"),
    [
        pytest.param([], "10.0.0.0/24", "10.244.0.0/24", id="nothing-in-the-way"),
        pytest.param(
            ["0.0.0.0/0", "192.0.2.0/24", "127.0.0.0/8", "10.245.7.0/24"],
            "10.0.0.0/24",
            "10.244.0.0/24",
            id="default-route-and-other-networks-do-not-count",
        ),
        pytest.param(["10.0.0.0/24"], "10.96.0.0/24", "10.244.0.0/24", id="lan-on-10.0.0"),
        pytest.param(["10.0.0.7/32"], "10.96.0.0/24", "10.244.0.0/24", id="one-host-route"),
        pytest.param(["10.244.0.0/16"], "10.0.0.0/24", "10.246.0.0/24", id="pod-range-taken"),
        pytest.param(["10.0.0.0/8"], "198.18.0.0/24", "198.18.1.0/24", id="vpn-on-10/8"),
    ],
)
def test_ranges_are_chosen_clear_of_the_machines_networks(
    used: list[str], service: str, pods: str
) -> None:
    chosen = egress.choose_networks(_networks(*used))
    assert (chosen.service, chosen.pods) == (service, pods)


def test_no_free_range_names_the_networks_in_the_way() -> None:
    with pytest.raises(ClusterError) as caught:
        egress.choose_networks(_networks("10.0.0.0/8", "198.18.0.0/15"))
    message = str(caught.value)
    assert "every Service range" in message
    assert "10.0.0.0/24, 10.96.0.0/24, 198.18.0.0/24" in message
    assert "(10.0.0.0/8, 198.18.0.0/15)" in message


def test_service_ip_is_the_first_address_of_the_range() -> None:
    assert egress.DEFAULT_NETWORKS.service_ip == "10.0.0.1"
    assert egress.ClusterNetworks("198.18.0.0/24", "198.18.1.0/24").service_ip == "198.18.0.1"


def test_guard_rejects_the_ranges_unless_they_stay_on_the_machine(tmp_path: Path) -> None:
    layout = NodeLayout.of(tmp_path)
    chain = egress.guard_chain(layout, ["10.0.0.0/24", "10.244.0.0/24"])
    assert chain.table == "filter"
    assert chain.name == f"AO-{layout.ident.upper()}-EGRESS"
    assert len(chain.name) <= 28  # iptables' limit
    assert chain.jumps_from == ("OUTPUT", "FORWARD")
    rules = [" ".join(rule) for rule in chain.rules]
    # The exceptions come first: a rule list is read top down.
    assert rules == [
        "-o lo -j RETURN",
        f"-o {layout.bridge} -j RETURN",
        "-d 10.0.0.0/24 -p tcp -j REJECT --reject-with tcp-reset",
        "-d 10.0.0.0/24 -j REJECT --reject-with icmp-net-unreachable",
        "-d 10.244.0.0/24 -p tcp -j REJECT --reject-with tcp-reset",
        "-d 10.244.0.0/24 -j REJECT --reject-with icmp-net-unreachable",
    ]


def test_each_cluster_has_its_own_guard(tmp_path: Path) -> None:
    one = egress.guard_chain(NodeLayout.of(tmp_path / "one"), ["10.0.0.0/24"])
    two = egress.guard_chain(NodeLayout.of(tmp_path / "two"), ["10.0.0.0/24"])
    assert one.name != two.name


def test_pod_network_chains_keep_their_rules(tmp_path: Path) -> None:
    layout = NodeLayout.of(tmp_path)
    rules = podnet.PodNetworkRules(layout.bridge, "10.245.3.1", "10.0.0.1", 6443)
    chains = podnet.pod_network_chains(layout, rules)
    bridge = layout.bridge
    assert chains == [
        Chain(
            "nat",
            layout.chain("DNAT"),
            ("PREROUTING",),
            (
                tuple(
                    f"-i {bridge} -d 10.0.0.1/32 -p tcp --dport 443 -j DNAT "
                    "--to-destination 127.0.0.1:6443".split()
                ),
            ),
        ),
        Chain(
            "filter",
            layout.chain("INPUT"),
            ("INPUT",),
            (
                tuple(
                    f"-i {bridge} -m conntrack --ctstate ESTABLISHED,RELATED,DNAT -j RETURN".split()
                ),
                tuple(f"-i {bridge} -j DROP".split()),
            ),
        ),
        Chain(
            "filter",
            layout.chain("FORWARD"),
            ("FORWARD",),
            (
                tuple(f"-i {bridge} ! -o {bridge} -j DROP".split()),
                tuple(f"-o {bridge} ! -i {bridge} -j DROP".split()),
            ),
        ),
    ]
    # Removal needs only the names.
    names = [(c.table, c.name, c.jumps_from) for c in podnet.pod_network_chains(layout)]
    assert names == [(c.table, c.name, c.jumps_from) for c in chains]


def test_a_state_from_an_older_version_runs_on_the_default_ranges(tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "state.json").write_text(
        json.dumps({"started_at": 1.0, "ports": {}, "processes": {}}), encoding="utf-8"
    )
    state = LocalCluster(tmp_path).load_state()
    assert state is not None
    assert state.cluster_networks == egress.DEFAULT_NETWORKS
    assert LocalCluster(tmp_path).guarded_ranges(state) == ["10.0.0.0/24", "10.244.0.0/24"]


def test_up_goes_on_without_a_guard_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No iptables (or not root): the cluster still starts, with a warning naming what is
    missing; and a machine network on 10.0.0.0/24 moves the Service range (and the API
    server's certificate with it)."""
    cluster = LocalCluster(tmp_path / "state", cache=tmp_path / "cache")
    started: list[egress.ClusterNetworks] = []
    monkeypatch.setattr(egress, "why_no_guard", lambda: "iptables is not installed (x)")
    monkeypatch.setattr(egress, "machine_networks", lambda: _networks("10.0.0.0/24"))
    monkeypatch.setattr(LocalCluster, "build", lambda self, progress: {})

    def start_all(self: LocalCluster, state: ClusterState, *_args: object) -> None:
        started.append(state.cluster_networks)
        self._save_state(state)  # as launching the first process does

    monkeypatch.setattr(LocalCluster, "_start_all", start_all)
    messages: list[str] = []
    cluster.up(progress=messages.append)
    try:
        assert started == [egress.ClusterNetworks("10.96.0.0/24", "10.244.0.0/24")]
        assert (
            "warning: no egress guard (iptables is not installed (x)): connections to the "
            "cluster's Service and pod addresses follow this machine's default route"
        ) in messages
        assert any("Service range 10.96.0.0/24" in m for m in messages)
        serving = x509.load_pem_x509_certificate(
            (tmp_path / "state" / "pki" / "apiserver.crt").read_bytes()
        )
        sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "10.96.0.1" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
        state = cluster.load_state()
        assert state is not None and state.networks == {
            "service": "10.96.0.0/24",
            "pods": "10.244.0.0/24",
        }
    finally:
        cluster.down(progress=lambda _message: None)
