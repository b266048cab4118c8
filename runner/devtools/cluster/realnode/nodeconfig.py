"""The real node's layout and configuration files, as pure functions of its inputs.

One real node belongs to one cluster state directory. Everything it creates on the
machine is named after `node_id` (a digest of that directory), so two clusters on one
machine never share a bridge, an iptables chain, a cgroup or a containerd socket, and
`down` can find what belongs to it without asking a process that may be gone.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

CNI_BIN_DIR = Path("/usr/lib/cni")
# The taint keeps ordinary workloads (which kwok fakes) off the real node; pods that
# need a real container runtime tolerate it and select the label.
NODE_LABEL = "ansible-operator.local/real-node"
NODE_TAINT = {"key": NODE_LABEL, "value": "true", "effect": "NoSchedule"}
TOLERATION = {"key": NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}
NODE_SELECTOR = {NODE_LABEL: "true"}
# Pod subnets come from here, one /24 per node; nothing outside the machine uses them.
POD_SUBNET_POOL = ipaddress.IPv4Network("10.245.0.0/16")
# Short paths for sockets (a unix socket path is limited to 107 bytes) and the runtime's
# state, which lives in memory as containerd intends; the images stay in the cluster's
# state directory.
RUN_ROOT = Path("/run/ansible-operator")


def node_id(state_dir: Path) -> str:
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:6]


@dataclass(frozen=True)
class NodeLayout:
    """Names and paths of one real node (no IO)."""

    state_dir: Path
    ident: str

    @classmethod
    def of(cls, state_dir: Path) -> NodeLayout:
        return cls(state_dir, node_id(state_dir))

    @property
    def node_name(self) -> str:
        return f"real-node-{self.ident}"

    @property
    def home(self) -> Path:
        return self.state_dir / "node"

    @property
    def run_dir(self) -> Path:
        return RUN_ROOT / f"node-{self.ident}"

    @property
    def containerd_root(self) -> Path:
        return self.home / "containerd"

    @property
    def containerd_state(self) -> Path:
        return self.run_dir / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.home / "containerd.toml"

    @property
    def registry_config(self) -> Path:
        return self.home / "registry"

    @property
    def cni_config_dir(self) -> Path:
        return self.home / "cni"

    @property
    def ipam_dir(self) -> Path:
        return self.home / "ipam"

    @property
    def kubelet_root(self) -> Path:
        """The kubelet's root directory: a short path (it holds unix sockets), bind-
        mounted from `kubelet_data`."""
        return self.run_dir / "kubelet"

    @property
    def kubelet_data(self) -> Path:
        """Where the kubelet's files (pod volumes, certificates) are kept."""
        return self.home / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.home / "kubelet.yaml"

    @property
    def pod_logs(self) -> Path:
        return self.home / "pod-logs"

    @property
    def state_file(self) -> Path:
        return self.home / "node.json"

    @property
    def bridge(self) -> str:
        return f"aop{self.ident}"

    @property
    def network_name(self) -> str:
        return f"ansible-operator-{self.ident}"

    @property
    def cgroup_root(self) -> str:
        return f"/ansible-operator-{self.ident}"

    def chain(self, purpose: str) -> str:
        """Our iptables chain for `purpose` (INPUT, FORWARD, DNAT)."""
        return f"AO-{self.ident.upper()}-{purpose}"

    def owned_paths(self) -> tuple[Path, ...]:
        """Directories under which every mount of this node lies."""
        return (self.home, self.run_dir)


def gateway(subnet: ipaddress.IPv4Network) -> ipaddress.IPv4Address:
    return subnet.network_address + 1


def first_free_subnet(
    used: list[ipaddress.IPv4Network], *, start: int
) -> ipaddress.IPv4Network | None:
    """The first /24 of the pool (from index `start`, wrapping) that overlaps no network
    in `used`."""
    subnets = list(POD_SUBNET_POOL.subnets(new_prefix=24))
    for offset in range(len(subnets)):
        candidate = subnets[(start + offset) % len(subnets)]
        if candidate.network_address == POD_SUBNET_POOL.network_address:
            continue
        if not any(candidate.overlaps(network) for network in used):
            return candidate
    return None


def containerd_config(layout: NodeLayout, *, sandbox_image: str) -> str:
    """containerd's config (version 2): its own root, state, socket and CRI settings.

    `restrict_oom_score_adj`: without CAP_SYS_RESOURCE a sandbox asking for a negative
    oom_score_adj fails to start. `netns_mounts_under_state_dir` keeps the pods' network
    namespace mounts in our state instead of /var/run/netns. The `opt` plugin would
    otherwise create /opt/containerd.
    """
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    runc = f"{cri}.containerd.runtimes.runc"
    lines = [
        "version = 2",
        f'root = "{layout.containerd_root}"',
        f'state = "{layout.containerd_state}"',
        "disabled_plugins = ["
        + ", ".join(
            f'"{name}"'
            for name in (
                "io.containerd.snapshotter.v1.aufs",
                "io.containerd.snapshotter.v1.btrfs",
                "io.containerd.snapshotter.v1.devmapper",
                "io.containerd.snapshotter.v1.zfs",
                "io.containerd.tracing.processor.v1.otlp",
                "io.containerd.internal.v1.tracing",
            )
        )
        + "]",
        "",
        "[grpc]",
        f'  address = "{layout.containerd_socket}"',
        "",
        "[ttrpc]",
        f'  address = "{layout.containerd_socket}.ttrpc"',
        "",
        '[plugins."io.containerd.internal.v1.opt"]',
        f'  path = "{layout.containerd_root / "opt"}"',
        "",
        f"[{cri}]",
        f'  sandbox_image = "{sandbox_image}"',
        "  disable_apparmor = true",
        "  restrict_oom_score_adj = true",
        "  netns_mounts_under_state_dir = true",
        '  stream_server_address = "127.0.0.1"',
        '  stream_server_port = "0"',
        "",
        f"[{cri}.containerd]",
        '  snapshotter = "overlayfs"',
        '  default_runtime_name = "runc"',
        "",
        f"[{runc}]",
        '  runtime_type = "io.containerd.runc.v2"',
        "",
        f"[{runc}.options]",
        "  SystemdCgroup = false",
        f'  Root = "{layout.containerd_state / "runc"}"',
        "",
        f"[{cri}.cni]",
        f'  bin_dir = "{CNI_BIN_DIR}"',
        f'  conf_dir = "{layout.cni_config_dir}"',
        "  max_conf_num = 1",
        "",
        f"[{cri}.registry]",
        f'  config_path = "{layout.registry_config}"',
        "",
    ]
    return "\n".join(lines)


def registry_hosts(port: int, *, ca_file: str | None = None) -> dict[str, str]:
    """`hosts.toml` files (by registry directory name) for the local registry on
    127.0.0.1:`port` (plain HTTP, or HTTPS trusting `ca_file`): its own names, and
    docker.io mirrored to it — with the local registry as docker.io's server too, so a
    pull never leaves the machine."""
    local = f"{'https' if ca_file else 'http'}://127.0.0.1:{port}"
    body = f'server = "{local}"\n\n[host."{local}"]\n  capabilities = ["pull", "resolve"]\n'
    if ca_file:
        body += f'  ca = "{ca_file}"\n'
    return {f"127.0.0.1:{port}": body, f"localhost:{port}": body, "docker.io": body}


def cni_config(layout: NodeLayout, subnet: ipaddress.IPv4Network) -> str:
    """A bridge network on `subnet`; our own address on the bridge is the pods' gateway.

    `isGateway` stays false so that the bridge plugin does not turn on IP forwarding for
    the whole machine: pods only talk to each other (bridged) and to this machine.
    """
    gw = str(gateway(subnet))
    config = {
        "cniVersion": "1.0.0",
        "name": layout.network_name,
        "plugins": [
            {
                "type": "bridge",
                "bridge": layout.bridge,
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(subnet), "gateway": gw}]],
                    "routes": [{"dst": "0.0.0.0/0", "gw": gw}],
                    "dataDir": str(layout.ipam_dir),
                },
            }
        ],
    }
    return json.dumps(config, indent=2) + "\n"


def kubelet_config(
    layout: NodeLayout,
    *,
    node_ip: str,
    port: int,
    healthz_port: int,
) -> str:
    """The KubeletConfiguration of a node that changes as little of the machine as it can.

    `makeIPTablesUtilChains: false`: the kubelet leaves iptables alone (its KUBE-* chains
    are hints for kube-proxy, which does not run here). It still sets a few kernel
    settings at start (see `machine.KUBELET_SYSCTLS`); `down` puts them back.
    """
    config: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node_ip,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        # Reached only from this machine: pods are kept off the port by our INPUT chain.
        "authentication": {
            "anonymous": {"enabled": True},
            "webhook": {"enabled": False},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": layout.cgroup_root,
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "podLogsDir": str(layout.pod_logs),
        "volumePluginDir": str(layout.kubelet_root / "volume-plugins"),
        "makeIPTablesUtilChains": False,
        "resolvConf": "",
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "1Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "registerWithTaints": [NODE_TAINT],
        "nodeStatusReportFrequency": "10s",
        "maxPods": 110,
        "shutdownGracePeriod": "0s",
    }
    return yaml.safe_dump(config, sort_keys=False)
