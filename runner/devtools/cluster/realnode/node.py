"""A real node beside the fake one: a kubelet and containerd running real containers.

`start` brings up, in order: the machine record (kernel settings before any change), a
cgroup root and a bridge of the node's own, containerd (its own config, root, state
and socket; runc; the CNI bridge plugin), a pause image made here (`FROM scratch` with
Debian's static catatonit), the iptables rules of the pod network, and the kubelet (built
from the control plane's Kubernetes module). `stop` undoes each step, also after a start
that failed halfway, and also when the processes are already gone: it finds what
belongs to the node by name (see `nodeconfig`), not by asking containerd.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runner.devtools.cluster import processes as process
from runner.devtools.cluster.realnode import leftovers as sweep
from runner.devtools.cluster.realnode import machine, nodeconfig, podnet
from runner.devtools.cluster.realnode import ociarchive as oci
from runner.devtools.cluster.realnode.nodeconfig import NodeLayout
from runner.errors import ClusterError

Progress = Callable[[str], None]

PAUSE_IMAGE = "localhost/ansible-operator/pause:catatonit"
_NAMESPACE = "k8s.io"  # the containerd namespace of the CRI plugin


@dataclass
class NodeState:
    """What `start` recorded in node.json (read by `stop` and `status`)."""

    name: str
    subnet: str
    node_ip: str
    kubelet_port: int
    started_at: float
    processes: dict[str, dict[str, Any]] = field(default_factory=dict)
    ready_seconds: float = 0.0

    def running(self) -> dict[str, process.RunningProcess]:
        return {
            name: process.RunningProcess(name, p["pid"], p["binary"], Path(p["log"]))
            for name, p in self.processes.items()
        }


def pause_image_archive() -> bytes:
    """The sandbox ("pause") image: Debian's static catatonit in pause mode, as nobody."""
    catatonit = Path(machine.program("catatonit"))
    return oci.image_archive(
        oci.ImageSpec(
            name=PAUSE_IMAGE,
            files={"pause": oci.ImageFile(catatonit.read_bytes())},
            entrypoint=("/pause", "-P"),
            user="65535:65535",
        )
    )


class RealNode:
    """The real node of the cluster rooted at `state_dir`."""

    def __init__(self, state_dir: Path) -> None:
        self.layout = NodeLayout.of(state_dir)
        self.logs = state_dir / "logs"

    @property
    def name(self) -> str:
        return self.layout.node_name

    def load(self) -> NodeState | None:
        try:
            raw = json.loads(self.layout.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return NodeState(**raw)

    def _save(self, state: NodeState) -> None:
        self.layout.home.mkdir(parents=True, exist_ok=True)
        self.layout.state_file.write_text(json.dumps(asdict(state), indent=2), encoding="utf-8")

    def is_running(self) -> bool:
        state = self.load()
        if state is None or set(state.processes) != {"containerd", "kubelet"}:
            return False
        return all(process.is_running(p.pid, p.binary) for p in state.running().values())

    # -- start ------------------------------------------------------------------------

    def start(
        self,
        *,
        api: process.Endpoint,
        kubeconfig: Path,
        apiserver_port: int,
        service_ip: str,
        kubelet: Path,
        progress: Progress = print,
    ) -> float:
        """Start the node and wait until it is Ready; return the seconds that took."""
        problems = machine.missing_requirements()
        if problems:
            raise ClusterError("this machine cannot run a real node:\n  " + "\n  ".join(problems))
        if self.is_running():
            progress(f"real node {self.name} already running")
            return 0.0
        self.stop(api=None, progress=lambda _msg: None)
        started = time.monotonic()
        machine.acquire_machine(self.layout)
        try:
            state = self._start(
                api=api,
                kubeconfig=kubeconfig,
                apiserver_port=apiserver_port,
                service_ip=service_ip,
                kubelet=kubelet,
                progress=progress,
            )
        except BaseException:
            self.stop(api=api, progress=lambda _msg: None)
            raise
        state.ready_seconds = round(time.monotonic() - started, 2)
        self._save(state)
        progress(
            f"real node {self.name} Ready in {state.ready_seconds:.1f} s "
            f"(pods on {state.subnet}, taint {nodeconfig.NODE_LABEL}:NoSchedule)"
        )
        return state.ready_seconds

    def _start(
        self,
        *,
        api: process.Endpoint,
        kubeconfig: Path,
        apiserver_port: int,
        service_ip: str,
        kubelet: Path,
        progress: Progress,
    ) -> NodeState:
        layout = self.layout
        subnet = nodeconfig.first_free_subnet(
            podnet.networks_in_use(), start=int(layout.ident, 16) % 256
        )
        if subnet is None:
            raise ClusterError(f"no free /24 left in {nodeconfig.POD_SUBNET_POOL} for the pods")
        node_ip = str(nodeconfig.gateway(subnet))
        state = NodeState(
            name=layout.node_name,
            subnet=str(subnet),
            node_ip=node_ip,
            kubelet_port=process.free_port(),
            started_at=time.time(),
        )
        self._save(state)
        for directory in (
            layout.home,
            layout.run_dir,
            layout.cni_config_dir,
            layout.registry_config,
            layout.kubelet_root,
            layout.kubelet_data,
            layout.pod_logs,
            self.logs,
        ):
            directory.mkdir(parents=True, exist_ok=True)
        sweep.create_cgroups(layout.cgroup_root)
        sweep.bind_mount(layout.kubelet_data, layout.kubelet_root)
        progress(f"creating bridge {layout.bridge} ({node_ip}/{subnet.prefixlen})")
        podnet.create_bridge(
            layout.bridge, ipaddress.IPv4Interface(f"{node_ip}/{subnet.prefixlen}")
        )
        podnet.install_rules(
            layout,
            podnet.PodNetworkRules(layout.bridge, node_ip, service_ip, apiserver_port),
        )
        layout.containerd_config.write_text(
            nodeconfig.containerd_config(layout, sandbox_image=PAUSE_IMAGE), encoding="utf-8"
        )
        (layout.cni_config_dir / "10-pods.conflist").write_text(
            nodeconfig.cni_config(layout, subnet), encoding="utf-8"
        )
        registry = _recorded_registry(self.layout.state_dir)
        if registry is not None:
            self.use_registry(registry[0], ca_file=registry[1])

        progress("starting containerd")
        containerd = machine.program("containerd")
        self._launch(state, "containerd", [containerd, "--config", str(layout.containerd_config)])
        self._wait_for_containerd(state)
        with tempfile.NamedTemporaryFile(suffix=".tar", dir=layout.home) as archive:
            archive.write(pause_image_archive())
            archive.flush()
            self.import_image(Path(archive.name))

        progress("starting the kubelet")
        layout.kubelet_config.write_text(
            nodeconfig.kubelet_config(
                layout,
                node_ip=node_ip,
                port=state.kubelet_port,
                healthz_port=process.free_port(),
            ),
            encoding="utf-8",
        )
        running = self._launch(
            state,
            "kubelet",
            [
                str(kubelet),
                f"--config={layout.kubelet_config}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={layout.kubelet_root}",
                f"--cert-dir={layout.kubelet_root / 'pki'}",
                f"--hostname-override={layout.node_name}",
                f"--node-ip={node_ip}",
                f"--node-labels={nodeconfig.NODE_LABEL}=true",
            ],
        )
        self._wait_until_ready(api, running)
        return state

    def _launch(self, state: NodeState, name: str, argv: list[str]) -> process.RunningProcess:
        running = process.start(
            name,
            argv,
            log=self.logs / f"{name}.log",
            pid_file=self.layout.home / f"{name}.pid",
        )
        state.processes[name] = {"pid": running.pid, "binary": argv[0], "log": str(running.log)}
        self._save(state)
        return running

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `ctr` against this node's containerd, in the CRI plugin's namespace."""
        argv = [
            machine.program("ctr"),
            "--address",
            str(self.layout.containerd_socket),
            "--namespace",
            _NAMESPACE,
            *args,
        ]
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if check and result.returncode != 0:
            raise ClusterError(f"`ctr {' '.join(args)}` failed: {result.stderr.strip()}")
        return result

    def _wait_for_containerd(self, state: NodeState, timeout: float = 30) -> None:
        running = state.running()["containerd"]
        if process.poll_while_running(
            running,
            lambda: (
                self.layout.containerd_socket.exists()
                and self.ctr("version", check=False).returncode == 0
            ),
            timeout=timeout,
            interval=0.05,
            exited="containerd exited during start-up",
        ):
            return
        raise ClusterError(f"containerd did not answer within {timeout:.0f} s; see {running.log}")

    def _wait_until_ready(
        self, api: process.Endpoint, kubelet: process.RunningProcess, timeout: float = 60
    ) -> None:
        def ready() -> bool:
            status, body = api.request(f"/api/v1/nodes/{self.name}")
            return status == 200 and node_ready(json.loads(body))

        if process.poll_while_running(
            kubelet, ready, timeout=timeout, exited="the kubelet exited during start-up"
        ):
            return
        raise ClusterError(
            f"node {self.name} not Ready within {timeout:.0f} s; last lines of {kubelet.log}:\n"
            f"{process.log_tail(kubelet.log)}"
        )

    # -- images and registries --------------------------------------------------------

    def import_image(self, archive: Path) -> None:
        """Import an image archive (OCI layout or `docker save`) for the kubelet's use."""
        self.ctr("images", "import", str(archive))

    def use_registry(self, port: int, *, ca_file: str | None = None) -> None:
        """Pull through the local registry on 127.0.0.1:`port` (HTTPS when `ca_file` is
        given), and mirror docker.io to it (containerd reads these files at each pull:
        no restart)."""
        for host, body in nodeconfig.registry_hosts(port, ca_file=ca_file).items():
            directory = self.layout.registry_config / host
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "hosts.toml").write_text(body, encoding="utf-8")

    # -- stop -------------------------------------------------------------------------

    def stop(self, *, api: process.Endpoint | None, progress: Progress = print) -> list[str]:
        """Remove everything the node put on the machine; returns what was stopped."""
        layout = self.layout
        stopped: list[str] = []
        if not (layout.home.exists() or layout.run_dir.exists()):
            return stopped
        state = self.load()
        running = state.running() if state is not None else {}
        if "kubelet" in running and process.stop(running["kubelet"], grace=10):
            stopped.append("kubelet")
            progress(f"stopped kubelet (pid {running['kubelet'].pid})")
        if "containerd" in running and process.is_running(
            running["containerd"].pid, running["containerd"].binary
        ):
            self._delete_tasks()
            process.stop(running["containerd"], grace=10)
            stopped.append("containerd")
            progress(f"stopped containerd (pid {running['containerd'].pid})")
        killed = sweep.kill_owned_processes(layout)
        if killed:
            progress(f"killed {len(killed)} leftover container processes")
        sweep.remove_shim_sockets(layout)
        unmounted = sweep.unmount_all(layout.owned_paths())
        if unmounted:
            progress(f"unmounted {len(unmounted)} mounts")
        sweep.remove_cgroups(layout.cgroup_root)
        for chain in podnet.remove_rules(layout):
            progress(f"removed iptables chain {chain}")
        if podnet.delete_bridge(layout.bridge):
            progress(f"removed bridge {layout.bridge}")
        shutil.rmtree(layout.run_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            nodeconfig.RUN_ROOT.rmdir()
        for name, (found, restored) in machine.release_machine(layout).items():
            progress(f"restored {name} = {restored} (was {found})")
        if state is not None and api is not None:
            with contextlib.suppress(OSError):
                api.request(f"/api/v1/nodes/{state.name}", method="DELETE")
        layout.state_file.unlink(missing_ok=True)
        return stopped

    def _delete_tasks(self) -> None:
        """Kill every container and delete its task, so that each shim exits cleanly
        (removing its socket and the container's root file system mount)."""
        listing = self.ctr("tasks", "list", "--quiet", check=False).stdout.split()
        for task in listing:
            self.ctr("tasks", "kill", "--signal", "SIGKILL", "--all", task, check=False)
        for task in listing:
            self.ctr("tasks", "delete", "--force", task, check=False)

    # -- status -----------------------------------------------------------------------

    def status_lines(self) -> list[str]:
        state = self.load()
        if state is None:
            return []
        lines = []
        for name, proc in state.running().items():
            alive = "running" if process.is_running(proc.pid, proc.binary) else "NOT RUNNING"
            where = (
                f"{state.node_ip}:{state.kubelet_port}"
                if name == "kubelet"
                else str(self.layout.containerd_socket)
            )
            lines.append(f"  {name:<24} {alive:<12} pid {proc.pid:<8} {where:<16} {proc.log}")
        lines.append(
            f"  real node {state.name}: node IP {state.node_ip}, pods on {state.subnet} "
            f"(bridge {self.layout.bridge}), Ready after {state.ready_seconds:.1f} s"
        )
        return lines


def _recorded_registry(state_dir: Path) -> tuple[int, str | None] | None:
    """The local registry `cluster up --registry` recorded in `registry.json` (port, CA
    file when it speaks TLS), if any."""
    try:
        raw = json.loads((state_dir / "registry.json").read_text(encoding="utf-8"))
        return int(raw["port"]), (raw.get("ca_file") if raw.get("tls") else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def node_ready(node: dict[str, Any]) -> bool:
    """Whether a Node object's Ready condition is True."""
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
