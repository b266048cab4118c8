"""The local control plane's command lines and its fake node, from one cluster's layout
(pure: `LocalCluster` starts the processes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.devtools.cluster.egress import ClusterNetworks
from runner.devtools.cluster.layout import PKI
from runner.devtools.cluster.processes import LOOPBACK

FAKE_NODE = "kwok-node-0"
FAKE_NODE_OBJECT: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": FAKE_NODE,
        "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        "labels": {
            "kubernetes.io/hostname": FAKE_NODE,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
        },
    },
    "spec": {},
    "status": {
        "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "1000"},
        "capacity": {"cpu": "32", "memory": "256Gi", "pods": "1000"},
    },
}
# The API server reaches a kubelet (logs, exec) at its node's InternalIP first: a real
# node's name need not resolve, its address is on a bridge of this machine.
KUBELET_ADDRESS_TYPES = (
    "--kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalDNS,ExternalIP"
)


@dataclass(frozen=True)
class ControlPlane:
    """Where one cluster's processes find their ports, certificates, binaries and data."""

    state_dir: Path
    ports: Mapping[str, int]
    networks: ClusterNetworks
    pki: PKI
    binaries: Mapping[str, Path]
    kubeconfig: Path
    kwok_stages: tuple[Path, ...]

    @property
    def etcd_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['etcd']}"

    def etcd(self) -> list[str]:
        peer_url = f"http://{LOOPBACK}:{self.ports['etcd-peer']}"
        return [
            str(self.binaries["etcd"]),
            "--name=local",
            f"--data-dir={self.state_dir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=local={peer_url}",
            "--unsafe-no-fsync",  # test data only: fsync costs seconds per start here
            "--log-level=warn",
        ]

    def apiserver(self) -> list[str]:
        pki = self.pki
        return [
            str(self.binaries["kube-apiserver"]),
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={self.ports['kube-apiserver']}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--cert-dir={self.state_dir / 'apiserver-certs'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-cluster-ip-range={self.networks.service}",
            KUBELET_ADDRESS_TYPES,
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--token-auth-file={self.state_dir / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            # Only the node-lifecycle controller (off here) would lift the not-ready
            # taint from the fake node; without this admission there is none to lift.
            "--disable-admission-plugins=TaintNodesByCondition",
            # Namespace annotations that give every pod of the namespace a node
            # selector and tolerations: how OLM's bundle unpack Jobs, which carry
            # neither, reach the real node (docs/real-node.md). No-ops elsewhere.
            "--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
            # The `kubernetes` Service cannot point at a loopback address.
            "--endpoint-reconciler-type=none",
            # Webhooks (and aggregated APIs) behind a Service are called at one of its
            # endpoints (a pod on the real node's bridge): no kube-proxy routes the
            # Service's cluster IP here.
            "--enable-aggregator-routing=true",
            "--profiling=false",
        ]

    def _common(self) -> list[str]:
        kubeconfig = str(self.kubeconfig)
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
        ]

    def controller_manager(self) -> list[str]:
        pki = self.pki
        return [
            str(self.binaries["kube-controller-manager"]),
            *self._common(),
            f"--secure-port={self.ports['kube-controller-manager']}",
            f"--cert-dir={self.state_dir / 'kcm-certs'}",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
            "--use-service-account-credentials",
            "--controllers=*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle",
        ]

    def scheduler(self) -> list[str]:
        return [
            str(self.binaries["kube-scheduler"]),
            *self._common(),
            f"--secure-port={self.ports['kube-scheduler']}",
            f"--cert-dir={self.state_dir / 'scheduler-certs'}",
        ]

    def kwok(self) -> list[str]:
        return [
            str(self.binaries["kwok"]),
            f"--kubeconfig={self.kubeconfig}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--cidr={self.networks.pods}",
            # The API server dials a node's InternalIP for logs and exec: a fake node's
            # must not lead off the machine.
            f"--node-ip={LOOPBACK}",
            f"--server-address={LOOPBACK}:{self.ports['kwok']}",
            *(f"--config={stage}" for stage in self.kwok_stages),
        ]
