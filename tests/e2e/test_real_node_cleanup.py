"""`cluster down` leaves nothing of a real node on the machine — after a normal run with a
pod, and after a start that failed halfway.

Compared before and after: kernel settings, network links, mounts, /run/netns, every
iptables chain and rule (IPv4 and IPv6); and nothing of the node (processes, mounts,
cgroups, bridge, chains, run directory) may remain.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client, config
from support.cluster_cli import cluster_cli
from support.kube import wait_for
from support.realnode import (
    TOOLS_IMAGE,
    MachineSnapshot,
    leftovers,
    on_real_node,
    other_real_nodes,
    tools_image_archive,
)

from runner.devtools.cluster import egress
from runner.devtools.cluster import processes as process
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.cluster.realnode import machine
from runner.devtools.cluster.realnode.node import RealNode
from runner.errors import ClusterError

pytestmark = pytest.mark.timeout(600)


def assert_machine_as_before(
    before: MachineSnapshot, node: RealNode, *, cluster_running: bool = False
) -> None:
    """Nothing of `node` is left, and the machine is as `before`. On a shared developer
    machine other tools (podman's netavark, other clusters' real nodes) change the
    network meanwhile: what is theirs is told apart by name, and the machine-wide
    settings they may change are compared only when they changed nothing. While the
    cluster runs, its egress chain (named like the node's chains) is expected."""
    assert leftovers(node) == []
    after = MachineSnapshot.take()
    ours = (str(node.layout.state_dir), str(node.layout.run_dir), node.layout.ident)
    assert [m for m in after.mounts - before.mounts if any(o in m for o in ours)] == []
    assert after.netns - before.netns == set()
    new_rules = {
        rule
        for family in ("ipv4", "ipv6")
        for rule in after.iptables[family] ^ before.iptables[family]
    }
    guard = egress.chain_name(node.layout)
    if cluster_running:
        assert f"filter -A OUTPUT -j {guard}" in new_rules
        new_rules = {rule for rule in new_rules if guard not in rule}
    assert [r for r in new_rules if node.layout.ident.upper() in r or "KUBE-" in r] == []
    assert [link for link in after.links - before.links if node.layout.ident in link] == []
    if before.other_real_nodes or other_real_nodes():
        # Another cluster's real node ran on this machine meanwhile: the kernel settings
        # are as it needs them until it stops, then as the machine had them before it.
        return
    kubelet_settings = set(machine.KUBELET_SYSCTLS) | {
        "net.ipv4.conf.all.route_localnet",
        "net.ipv4.conf.default.route_localnet",
    }
    for name in kubelet_settings & set(before.sysctls):
        assert after.sysctls[name] == before.sysctls[name], name
    if not new_rules and after.links == before.links:
        # No other tool touched the network meanwhile: everything is exactly as before.
        assert after.sysctls == before.sysctls


def test_real_node_leaves_nothing_after_a_failed_start_nor_after_down(tmp_path: Path) -> None:
    """One cluster, three steps. (1) A start whose "kubelet" changes a kernel setting the
    way the real one does and then exits fails, and everything up to that point is put
    back. (2) `up --real-node` adds the node to the running cluster, whose API server (as
    one started by an older version) lacks the flag that lets it reach kubelets by
    address. (3) With a pod running on it, `cluster down` removes everything."""
    state_dir = tmp_path / "cluster"
    before = MachineSnapshot.take()
    cluster = LocalCluster(state_dir)
    node = cluster.real_node
    cluster.up(progress=lambda _message: None)
    try:
        state = cluster.load_state()
        assert state is not None
        fake_kubelet = tmp_path / "kubelet"
        fake_kubelet.write_text("#!/bin/sh\necho 1 > /proc/sys/vm/overcommit_memory\nexit 3\n")
        fake_kubelet.chmod(0o755)
        with pytest.raises(ClusterError, match="kubelet exited during start-up"):
            node.start(
                api=cluster.apiserver(state),
                kubeconfig=cluster.kubeconfig,
                apiserver_port=state.ports["kube-apiserver"],
                service_ip="10.0.0.1",
                kubelet=fake_kubelet,
                progress=lambda _message: None,
            )
        assert_machine_as_before(before, node, cluster_running=True)
        assert not node.layout.state_file.exists()

        _restart_apiserver_without_address_types(cluster)
        up = cluster_cli(state_dir, "up", "--real-node")
        assert up.returncode == 0, up.stderr
        assert "restarting kube-apiserver with --kubelet-preferred-address-types" in up.stderr
        assert f"real node {node.name} Ready" in up.stderr
        status = cluster_cli(state_dir, "status")
        assert f"real node {node.name}" in status.stdout
        node_state = node.load()
        assert node_state is not None
        # The node's pod subnet joined the guarded ranges (see runner.devtools.cluster.egress).
        guard_line = next(line for line in status.stdout.splitlines() if "egress guard" in line)
        assert node_state.subnet in guard_line, guard_line

        archive = tmp_path / "tools.tar"
        archive.write_bytes(tools_image_archive(cluster.cache))
        node.import_image(archive)
        _run_pod(cluster)
        # The node really changed the machine while it ran.
        during = leftovers(node)
        assert any(item.startswith("mount ") for item in during)
        assert f"bridge {node.layout.bridge}" in during
    finally:
        down = cluster_cli(state_dir, "down")

    assert down.returncode == 0, down.stderr
    assert "stopped kubelet" in down.stderr
    assert_machine_as_before(before, node)


def _run_pod(cluster: LocalCluster) -> None:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    core = client.CoreV1Api(api)
    wait_for(
        lambda: core.list_namespaced_service_account("default").items,
        timeout=60,
        message="the default service account",
    )
    pod = on_real_node(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "sleeper"},
            "spec": {
                "containers": [{"name": "c", "image": TOOLS_IMAGE, "imagePullPolicy": "Never"}]
            },
        }
    )
    core.create_namespaced_pod("default", pod)
    wait_for(
        lambda: core.read_namespaced_pod("sleeper", "default").status.phase == "Running",
        timeout=120,
        message="pod sleeper running",
    )
    api.close()


def _restart_apiserver_without_address_types(cluster: LocalCluster) -> None:
    state = cluster.load_state()
    assert state is not None
    running = state.running()["kube-apiserver"]
    raw = Path(f"/proc/{running.pid}/cmdline").read_bytes()
    argv = [
        part.decode()
        for part in raw.split(b"\0")
        if part and not part.startswith(b"--kubelet-preferred-address-types")
    ]
    process.stop(running, grace=10)
    restarted = process.start(
        "kube-apiserver",
        argv,
        log=running.log,
        pid_file=cluster.state_dir / "pids" / "kube-apiserver.pid",
    )
    state.processes["kube-apiserver"]["pid"] = restarted.pid
    (cluster.state_dir / "state.json").write_text(json.dumps(vars(state)), encoding="utf-8")
    cluster.wait_for_apiserver(restarted, state)
