"""The control plane's command lines follow the cluster's layout (pure)."""

from __future__ import annotations

from pathlib import Path

from runner.devtools.cluster.controlplane import FAKE_NODE, FAKE_NODE_OBJECT, ControlPlane
from runner.devtools.cluster.egress import ClusterNetworks
from runner.devtools.cluster.layout import PKI

PORTS = {
    "etcd": 2379,
    "etcd-peer": 2380,
    "kube-apiserver": 6443,
    "kube-controller-manager": 10257,
    "kube-scheduler": 10259,
    "kwok": 10247,
}


def _plane(tmp_path: Path) -> ControlPlane:
    names = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
    return ControlPlane(
        state_dir=tmp_path,
        ports=PORTS,
        networks=ClusterNetworks(service="10.96.0.0/24", pods="10.246.0.0/24"),
        pki=PKI.under(tmp_path / "pki"),
        binaries={name: Path("/bin") / name for name in names},
        kubeconfig=tmp_path / "kubeconfig",
        kwok_stages=(tmp_path / "a.yaml", tmp_path / "b.yaml"),
    )


def test_every_process_listens_on_loopback_only(tmp_path: Path) -> None:
    plane = _plane(tmp_path)
    assert "--listen-client-urls=http://127.0.0.1:2379" in plane.etcd()
    assert "--initial-cluster=local=http://127.0.0.1:2380" in plane.etcd()
    for argv in (plane.apiserver(), plane.controller_manager(), plane.scheduler()):
        assert "--bind-address=127.0.0.1" in argv
    assert "--server-address=127.0.0.1:10247" in plane.kwok()
    assert "--node-ip=127.0.0.1" in plane.kwok()


def test_the_chosen_ranges_reach_the_api_server_and_kwok(tmp_path: Path) -> None:
    plane = _plane(tmp_path)
    assert "--service-cluster-ip-range=10.96.0.0/24" in plane.apiserver()
    assert "--etcd-servers=http://127.0.0.1:2379" in plane.apiserver()
    assert "--cidr=10.246.0.0/24" in plane.kwok()


def test_each_command_line_starts_with_its_binary(tmp_path: Path) -> None:
    plane = _plane(tmp_path)
    assert plane.etcd()[0] == "/bin/etcd"
    assert plane.controller_manager()[0] == "/bin/kube-controller-manager"
    assert plane.scheduler()[0] == "/bin/kube-scheduler"
    assert "--secure-port=10259" in plane.scheduler()
    stages = [arg for arg in plane.kwok() if arg.startswith("--config=")]
    assert stages == [f"--config={tmp_path / 'a.yaml'}", f"--config={tmp_path / 'b.yaml'}"]


def test_the_fake_node_is_managed_by_kwok() -> None:
    meta = FAKE_NODE_OBJECT["metadata"]
    assert meta["name"] == FAKE_NODE
    assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake"
