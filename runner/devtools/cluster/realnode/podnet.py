"""The pod network of one real node on this machine: its bridge and its iptables rules.

Pods get addresses from a /24 that no route of the machine uses; the bridge carries our
address in it (the pods' gateway and the node's InternalIP). All rules live in chains
named after the node, each reached by one jump from a built-in chain, so removing them
never touches anybody else's rules.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
from dataclasses import dataclass

from runner.devtools.cluster.realnode import chains
from runner.devtools.cluster.realnode.chains import Chain
from runner.devtools.cluster.realnode.machine import program, run, write_sysctl
from runner.devtools.cluster.realnode.nodeconfig import NodeLayout


def networks_in_use() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine routes or has an address in."""
    used: list[ipaddress.IPv4Network] = []
    for argv in (["ip", "-j", "-4", "route", "show", "table", "all"], ["ip", "-j", "-4", "addr"]):
        output = run([program("ip"), *argv[1:]], check=False).stdout or "[]"
        for entry in json.loads(output):
            destinations = [entry.get("dst")] + [
                f"{a['local']}/{a['prefixlen']}" for a in entry.get("addr_info", [])
            ]
            for destination in destinations:
                if not destination or destination == "default":
                    continue
                with contextlib.suppress(ValueError):
                    used.append(ipaddress.ip_network(destination, strict=False))  # type: ignore[arg-type]
    return used


def create_bridge(name: str, address: ipaddress.IPv4Interface) -> None:
    """The pods' bridge with our address on it; IPv6 off (pods reach this machine only
    through the IPv4 rules below); route_localnet on, so that traffic DNATed to the
    loopback API server may be routed (the setting goes away with the bridge)."""
    ip = program("ip")
    if run([ip, "link", "show", name], check=False).returncode != 0:
        run([ip, "link", "add", name, "type", "bridge"])
    write_sysctl(f"net.ipv6.conf.{name}.disable_ipv6", "1")
    write_sysctl(f"net.ipv4.conf.{name}.route_localnet", "1")
    run([ip, "addr", "replace", str(address), "dev", name])
    run([ip, "link", "set", name, "up"])


def delete_bridge(name: str) -> bool:
    ip = program("ip")
    if run([ip, "link", "show", name], check=False).returncode != 0:
        return False
    run([ip, "link", "delete", name])
    return True


@dataclass(frozen=True)
class PodNetworkRules:
    """The iptables rules of one node (all in chains named after it)."""

    bridge: str
    node_ip: str
    service_ip: str
    apiserver_port: int


def pod_network_chains(layout: NodeLayout, rules: PodNetworkRules | None = None) -> list[Chain]:
    """The node's chains (without their rules when `rules` is None: enough to remove them)."""
    bridge = rules.bridge if rules is not None else layout.bridge
    specs = (
        (
            "nat",
            "PREROUTING",
            layout.chain("DNAT"),
            # Stands in for kube-proxy: the `kubernetes` Service is the API server.
            [
                f"-i {bridge} -d {rules.service_ip}/32 -p tcp --dport 443 -j DNAT "
                f"--to-destination 127.0.0.1:{rules.apiserver_port}"
            ]
            if rules is not None
            else [],
        ),
        (
            "filter",
            "INPUT",
            layout.chain("INPUT"),
            # Pods reach this machine only as the API server (DNATed above) and with
            # replies to connections the machine opened (probes, logs, exec).
            [
                f"-i {bridge} -m conntrack --ctstate ESTABLISHED,RELATED,DNAT -j RETURN",
                f"-i {bridge} -j DROP",
            ],
        ),
        (
            "filter",
            "FORWARD",
            layout.chain("FORWARD"),
            # Nothing from the pods leaves through another interface.
            [f"-i {bridge} ! -o {bridge} -j DROP", f"-o {bridge} ! -i {bridge} -j DROP"],
        ),
    )
    return [
        Chain(table, chain, (builtin,), tuple(tuple(rule.split()) for rule in rule_list))
        for table, builtin, chain, rule_list in specs
    ]


def install_rules(layout: NodeLayout, rules: PodNetworkRules) -> None:
    chains.remove(pod_network_chains(layout))
    chains.install(pod_network_chains(layout, rules))


def remove_rules(layout: NodeLayout) -> list[str]:
    """Delete our chains and the jumps to them; returns the chains removed."""
    return chains.remove(pod_network_chains(layout))


def iptables_chains(family: str = "ipv4") -> dict[str, list[str]]:
    """Every chain of every table of `family` (ipv4 or ipv6), for checks."""
    binary = "iptables-save" if family == "ipv4" else "ip6tables-save"
    output = run([program(binary)], check=False).stdout
    chains: dict[str, list[str]] = {}
    table = ""
    for line in output.splitlines():
        if line.startswith("*"):
            table = line[1:]
            chains[table] = []
        elif line.startswith(":"):
            chains[table].append(line[1:].split()[0])
    return chains
