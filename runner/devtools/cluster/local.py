"""`ansible-operator cluster up|down|status`: the local control plane as a whole.

State lives in one directory (default `./.cluster`, or `$ANSIBLE_OPERATOR_CLUSTER_DIR`):
`state.json` (ports, pids, start time), `pki/`, `etcd/`, `logs/`, `kubeconfig`.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.devtools.cluster import build, certs, controlplane, egress
from runner.devtools.cluster import processes as process
from runner.devtools.cluster.components import components, kubelet
from runner.devtools.cluster.controlplane import FAKE_NODE, FAKE_NODE_OBJECT, KUBELET_ADDRESS_TYPES
from runner.devtools.cluster.kubeconfigdoc import admin_kubeconfig
from runner.devtools.cluster.layout import PKI
from runner.devtools.cluster.realnode import machine
from runner.devtools.cluster.realnode.node import RealNode, node_ready
from runner.errors import ClusterError
from runner.util.progress import Ticker

Progress = Callable[[str], None]

# A few seconds on an idle machine; a CI machine busy with parallel tests has needed
# more than 60 s for the post-start hooks (RBAC bootstrap, priority classes).
APISERVER_READY_S = 180.0
_STOP_ORDER = ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")


@dataclass
class ClusterState:
    """What `up` recorded: enough for `status` and `down` to act without guessing."""

    started_at: float
    ports: dict[str, int]
    processes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # {"service": CIDR, "pods": CIDR}; a state written by an older version has none
    # and ran on the defaults.
    networks: dict[str, str] = field(default_factory=dict)

    @property
    def cluster_networks(self) -> egress.ClusterNetworks:
        if not self.networks:
            return egress.DEFAULT_NETWORKS
        return egress.ClusterNetworks(self.networks["service"], self.networks["pods"])

    def running(self) -> dict[str, process.RunningProcess]:
        return {
            name: process.RunningProcess(name, p["pid"], p["binary"], Path(p["log"]))
            for name, p in self.processes.items()
        }


class LocalCluster:
    """The control plane rooted at one state directory."""

    def __init__(self, state_dir: Path, *, cache: Path | None = None) -> None:
        self.state_dir = state_dir
        self.cache = cache or build.cache_root()

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def _state_file(self) -> Path:
        return self.state_dir / "state.json"

    def load_state(self) -> ClusterState | None:
        try:
            raw = json.loads(self._state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return ClusterState(
            raw["started_at"], raw["ports"], raw["processes"], raw.get("networks") or {}
        )

    def _save_state(self, state: ClusterState) -> None:
        self._state_file.write_text(json.dumps(vars(state), indent=2), encoding="utf-8")

    def _token(self) -> str:
        path = self.state_dir / "admin.token"
        if not path.is_file():
            path.write_text(secrets.token_hex(24), encoding="utf-8")
            path.chmod(0o600)
        return path.read_text(encoding="utf-8").strip()

    def apiserver(self, state: ClusterState) -> process.Endpoint:
        return process.Endpoint(
            f"https://{process.LOOPBACK}:{state.ports['kube-apiserver']}",
            ca_file=PKI.under(self.state_dir / "pki").ca_cert,
            token=self._token(),
        )

    def is_up(self) -> bool:
        state = self.load_state()
        if state is None:
            return False
        alive = all(process.is_running(p.pid, p.binary) for p in state.running().values())
        return (
            alive
            and set(state.processes) == set(_STOP_ORDER)
            and self.apiserver(state).ok("/readyz")
        )

    def build(self, *, progress: Progress = print) -> dict[str, Path]:
        return build.ensure_built(components().values(), root=self.cache, progress=progress)

    def kubectl(self, args: list[str], *, progress: Progress = print) -> int:
        """Run the cached kubectl; against this cluster unless KUBECONFIG is set."""
        binary = build.ensure_built([components()["kubectl"]], root=self.cache, progress=progress)[
            "kubectl"
        ]
        env = dict(os.environ)
        if not env.get("KUBECONFIG"):
            if not self.kubeconfig.is_file():
                raise ClusterError(
                    f"no cluster in {self.state_dir} and KUBECONFIG is not set; "
                    "start one with `ansible-operator cluster up`"
                )
            env["KUBECONFIG"] = str(self.kubeconfig)
        return subprocess.run([str(binary), *args], env=env, check=False).returncode

    def up(
        self,
        *,
        progress: Progress = print,
        apiserver_port: int | None = None,
        real_node: bool = False,
    ) -> float:
        """Start everything (or reuse a running cluster); return the start-up seconds.
        With `real_node`, also a real kubelet beside the fake node (see `start_real_node`)."""
        if real_node:
            # Say what the machine lacks before spending a minute on the control plane.
            problems = machine.missing_requirements()
            if problems:
                raise ClusterError(
                    "this machine cannot run a real node:\n  " + "\n  ".join(problems)
                )
        if self.is_up():
            progress(f"cluster already running; kubeconfig: {self.kubeconfig}")
            running = self.load_state()
            if running is not None and not egress.installed(self.real_node.layout):
                self.guard_egress(running, progress=progress)  # started by an older version
            if real_node:
                return self.start_real_node(progress=progress)
            return 0.0
        binaries = self.build(progress=progress)
        self.down(keep=True, progress=lambda _msg: None)
        if apiserver_port and process.port_in_use(apiserver_port):
            raise ClusterError(f"port {apiserver_port} on {process.LOOPBACK} is already in use")
        started = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        networks = self._choose_networks(progress)
        pki = certs.ensure_pki(self.state_dir / "pki", service_ip=networks.service_ip)
        ports = {
            "etcd": process.free_port(),
            "etcd-peer": process.free_port(),
            "kube-apiserver": apiserver_port or process.free_port(),
            "kube-controller-manager": process.free_port(),
            "kube-scheduler": process.free_port(),
            "kwok": process.free_port(),
        }
        state = ClusterState(
            started_at=time.time(),
            ports=ports,
            networks={"service": networks.service, "pods": networks.pods},
        )
        token = self._token()
        (self.state_dir / "tokens.csv").write_text(
            f'{token},admin,admin-uid,"system:masters"\n', encoding="utf-8"
        )
        self._write_kubeconfig(state, pki)
        try:
            for orphan in egress.sweep_orphans():
                progress(f"removed iptables chain filter/{orphan} (its cluster is gone)")
            # Saved first: a guard whose cluster has no state.json is an orphan to others.
            self._save_state(state)
            # Before anything starts that could dial a cluster address.
            self.guard_egress(state, progress=progress)
            self._start_all(state, pki, binaries, progress)
        except BaseException:
            self.down(keep=True, progress=lambda _msg: None)
            raise
        elapsed = time.monotonic() - started
        progress(f"cluster ready in {elapsed:.1f} s; kubeconfig: {self.kubeconfig}")
        if real_node:
            elapsed += self.start_real_node(progress=progress)
        return elapsed

    @property
    def real_node(self) -> RealNode:
        return RealNode(self.state_dir)

    def start_real_node(self, *, progress: Progress = print) -> float:
        """Start the real node of this (running) cluster; return the seconds to Ready."""
        state = self.load_state()
        if state is None or not self.is_up():
            raise ClusterError(
                f"no running cluster in {self.state_dir}; start one with "
                "`ansible-operator cluster up --real-node`"
            )
        binary = build.ensure_built([kubelet()], root=self.cache, progress=progress)["kubelet"]
        self._ensure_apiserver_flag(state, KUBELET_ADDRESS_TYPES, progress)
        seconds = self.real_node.start(
            api=self.apiserver(state),
            kubeconfig=self.kubeconfig,
            apiserver_port=state.ports["kube-apiserver"],
            service_ip=state.cluster_networks.service_ip,
            kubelet=binary,
            progress=progress,
        )
        self.guard_egress(state, progress=progress)  # now with the node's pod subnet
        return seconds

    def _choose_networks(self, progress: Progress) -> egress.ClusterNetworks:
        """The Service and pod ranges, clear of this machine's networks."""
        try:
            used = egress.machine_networks()
        except (ClusterError, OSError, ValueError) as exc:  # no `ip`, or no JSON from it
            progress(
                f"warning: cannot list this machine's networks ({exc}; Debian/Ubuntu: "
                "`apt-get install -y iproute2`): using the default ranges unchecked"
            )
            return egress.DEFAULT_NETWORKS
        networks = egress.choose_networks(used)
        if networks != egress.DEFAULT_NETWORKS:
            progress(
                f"Service range {networks.service}, pod range {networks.pods} (the defaults "
                "overlap networks of this machine)"
            )
        return networks

    def guarded_ranges(self, state: ClusterState) -> list[str]:
        """What the egress guard keeps on the machine: the Service and kwok pod ranges,
        and the real node's pod subnet once it has one."""
        networks = state.cluster_networks
        ranges = [networks.service, networks.pods]
        node = self.real_node.load()
        if node is not None:
            ranges.append(node.subnet)
        return ranges

    def guard_egress(self, state: ClusterState, *, progress: Progress = print) -> bool:
        """Install (or refill) the egress guard (see `egress`); when this machine cannot
        have one, say why and go on without: returns whether it is installed."""
        layout = self.real_node.layout
        try:
            egress.install(layout, self.guarded_ranges(state))
        except (ClusterError, OSError) as exc:
            progress(
                f"warning: no egress guard ({exc}): connections to the cluster's Service "
                "and pod addresses follow this machine's default route"
            )
            return False
        return True

    def _ensure_apiserver_flag(self, state: ClusterState, flag: str, progress: Progress) -> None:
        """Restart the API server with `flag` when a cluster started by an older version
        runs without it (a few seconds of outage)."""
        running = state.running()["kube-apiserver"]
        argv = _cmdline(running.pid)
        option = flag.split("=", 1)[0]
        if any(arg.split("=", 1)[0] == option for arg in argv):
            return
        progress(f"restarting kube-apiserver with {flag}")
        process.stop(running, grace=10)
        restarted = self._launch(state, "kube-apiserver", [*argv, flag])
        self.wait_for_apiserver(restarted, state)

    def wait_for_apiserver(self, running: process.RunningProcess, state: ClusterState) -> None:
        """Until `running` (the API server) answers /readyz; fail with its log if it exits."""
        process.wait_until_ready(
            running, self.apiserver(state), "/readyz", timeout=APISERVER_READY_S
        )

    def _write_kubeconfig(self, state: ClusterState, pki: PKI) -> None:
        config = admin_kubeconfig(
            server=self.apiserver(state).url,
            ca_pem=pki.ca_cert.read_bytes(),
            token=self._token(),
            name="ansible-operator-local",
        )
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        self.kubeconfig.chmod(0o600)

    def _launch(self, state: ClusterState, name: str, argv: list[str]) -> process.RunningProcess:
        running = process.start(
            name,
            argv,
            log=self.state_dir / "logs" / f"{name}.log",
            pid_file=self.state_dir / "pids" / f"{name}.pid",
        )
        state.processes[name] = {"pid": running.pid, "binary": argv[0], "log": str(running.log)}
        self._save_state(state)
        return running

    def _start_all(
        self,
        state: ClusterState,
        pki: PKI,
        binaries: dict[str, Path],
        progress: Progress,
    ) -> None:
        loop = process.LOOPBACK
        plane = controlplane.ControlPlane(
            state_dir=self.state_dir,
            ports=state.ports,
            networks=state.cluster_networks,
            pki=pki,
            binaries=binaries,
            kubeconfig=self.kubeconfig,
            kwok_stages=tuple(
                sorted(build.kwok_stage_dir(components()["kwok"], self.cache).glob("*.yaml"))
            ),
        )
        ports = state.ports
        progress("starting etcd")
        etcd = self._launch(state, "etcd", plane.etcd())
        process.wait_until_ready(etcd, process.Endpoint(plane.etcd_url), "/health", timeout=30)

        progress("starting kube-apiserver")
        apiserver = self._launch(state, "kube-apiserver", plane.apiserver())
        self.wait_for_apiserver(apiserver, state)
        api = self.apiserver(state)

        progress("starting kube-controller-manager, kube-scheduler, kwok")
        kcm = self._launch(state, "kube-controller-manager", plane.controller_manager())
        scheduler = self._launch(state, "kube-scheduler", plane.scheduler())
        kwok = self._launch(state, "kwok", plane.kwok())
        for running, port in (
            (kcm, ports["kube-controller-manager"]),
            (scheduler, ports["kube-scheduler"]),
        ):
            # Their serving certificates are self-signed at start; only liveness matters.
            endpoint = process.Endpoint(f"https://{loop}:{port}", verify=False)
            process.wait_until_ready(running, endpoint, "/healthz", timeout=60)
        process.wait_until_ready(
            kwok, process.Endpoint(f"http://{loop}:{ports['kwok']}"), "/healthz", timeout=60
        )
        progress("registering the fake node")
        self._ensure_node(api)
        self._wait_for(
            api,
            kwok,
            f"/api/v1/nodes/{FAKE_NODE}",
            node_ready,
            what=f"node {FAKE_NODE} Ready",
        )
        self._wait_for(
            api,
            kcm,
            "/api/v1/namespaces/default/serviceaccounts/default",
            lambda _obj: True,
            what="the default service account",
        )

    def _ensure_node(self, api: process.Endpoint) -> None:
        status, body = api.request("/api/v1/nodes", method="POST", body=FAKE_NODE_OBJECT)
        if status not in (201, 409):
            raise ClusterError(f"creating node {FAKE_NODE} failed: {status} {body[:300]!r}")

    def _wait_for(
        self,
        api: process.Endpoint,
        owner: process.RunningProcess,
        path: str,
        check: Callable[[dict[str, Any]], bool],
        *,
        what: str,
        timeout: float = 60,
    ) -> None:
        def ready() -> bool:
            status, body = api.request(path)
            return status == 200 and check(json.loads(body))

        with Ticker(f"waiting for {what}"):
            exited = f"{owner.name} exited while waiting for {what}"
            if process.poll_while_running(owner, ready, timeout=timeout, exited=exited):
                return
        raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")

    def outage(self, name: str, *, seconds: float) -> None:
        """Stop component `name`, keep it down for `seconds`, start it again with the same
        command line and wait until it is ready (fault tests: an API server outage)."""
        state = self.load_state()
        running = state.running().get(name) if state is not None else None
        if state is None or running is None:
            raise ClusterError(f"no running {name} in {self.state_dir}")
        argv = _cmdline(running.pid)
        process.stop(running, grace=10)
        time.sleep(seconds)
        restarted = self._launch(state, name, argv)
        if name == "kube-apiserver":
            self.wait_for_apiserver(restarted, state)

    def down(self, *, keep: bool = False, progress: Progress = print) -> list[str]:
        """Stop exactly what `up` started, newest first; remove the state unless `keep`."""
        state = self.load_state()
        stopped = self.stop_addons(progress=progress)
        api = self.apiserver(state) if state is not None else None
        stopped += self.real_node.stop(api=api, progress=progress)
        if state is not None:
            running = state.running()
            for name in _STOP_ORDER:
                if name in running and process.stop(running[name], grace=10):
                    stopped.append(name)
                    progress(f"stopped {name} (pid {running[name].pid})")
            self._state_file.unlink(missing_ok=True)
        # Last: nothing of the cluster runs any more that could dial its addresses.
        if egress.remove(self.real_node.layout):
            progress(f"removed iptables chain filter/{egress.chain_name(self.real_node.layout)}")
        if not keep and self.state_dir.exists():
            shutil.rmtree(self.state_dir)
            progress(f"removed {self.state_dir}")
        return stopped

    def status(self) -> list[str]:
        """Human-readable lines: what runs, where, since when."""
        state = self.load_state()
        if state is None:
            return [f"no cluster in {self.state_dir}"]
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state.started_at))
        lines = [f"cluster in {self.state_dir}, started {since}"]
        running = state.running()
        for name in reversed(_STOP_ORDER):
            if name not in running:
                lines.append(f"  {name:<24} not started")
                continue
            proc = running[name]
            alive = "running" if process.is_running(proc.pid, proc.binary) else "NOT RUNNING"
            port = state.ports.get(name)
            where = f"{process.LOOPBACK}:{port}" if port else "-"
            lines.append(f"  {name:<24} {alive:<12} pid {proc.pid:<8} {where:<16} {proc.log}")
        for name, proc in self.addons().items():
            alive = "running" if process.is_running(proc.pid, proc.binary) else "NOT RUNNING"
            lines.append(f"  {name:<24} {alive:<12} pid {proc.pid:<8} {'-':<16} {proc.log}")
        lines += self.real_node.status_lines()
        layout = self.real_node.layout
        guard = (
            f"chain {egress.chain_name(layout)} (filter OUTPUT, FORWARD) rejects "
            + ", ".join(self.guarded_ranges(state))
            + " unless to loopback or the real node's bridge"
            if egress.installed(layout)
            else f"NOT INSTALLED ({egress.why_no_guard() or 'see `cluster up`'}): "
            "connections to cluster addresses follow the default route"
        )
        lines.append(f"  egress guard: {guard}")
        api = self.apiserver(state)
        ready = "ready" if api.ok("/readyz") else "not ready"
        lines.append(f"  API server {api.url}: {ready}; kubeconfig {self.kubeconfig}")
        return lines

    # -- add-ons: processes run beside the control plane (OLM's operators, opm serve) --
    # Recorded in addons.json (not in state.json, whose process set `is_up` checks), with
    # pid files and logs beside the components'; `down` stops them first.

    @property
    def _addons_file(self) -> Path:
        return self.state_dir / "addons.json"

    def _addon_records(self) -> dict[str, dict[str, Any]]:
        try:
            raw = json.loads(self._addons_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return raw if isinstance(raw, dict) else {}

    def _save_addons(self, records: dict[str, dict[str, Any]]) -> None:
        temporary = self._addons_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(records, indent=2), encoding="utf-8")
        os.replace(temporary, self._addons_file)

    def addons(self) -> dict[str, process.RunningProcess]:
        """The add-on processes recorded (running or not), oldest first."""
        return {
            name: process.RunningProcess(name, r["pid"], r["binary"], Path(r["log"]))
            for name, r in self._addon_records().items()
        }

    def start_addon(
        self, name: str, argv: list[str], *, env: Mapping[str, str] | None = None
    ) -> process.RunningProcess:
        """Start `argv` as add-on `name` (stopping an earlier one of that name)."""
        self.stop_addon(name)
        running = process.start(
            name,
            argv,
            log=self.state_dir / "logs" / f"{name}.log",
            pid_file=self.state_dir / "pids" / f"{name}.pid",
            env=env,
        )
        records = self._addon_records()
        records[name] = {"pid": running.pid, "binary": argv[0], "log": str(running.log)}
        self._save_addons(records)
        return running

    def stop_addon(self, name: str, *, grace: float = 10) -> bool:
        """Stop add-on `name` and forget it; returns whether it was running."""
        records = self._addon_records()
        record = records.pop(name, None)
        if record is None:
            return False
        running = process.RunningProcess(name, record["pid"], record["binary"], Path(record["log"]))
        was_running = process.stop(running, grace=grace)
        self._save_addons(records)
        (self.state_dir / "pids" / f"{name}.pid").unlink(missing_ok=True)
        return was_running

    def stop_addons(self, *, progress: Progress = print) -> list[str]:
        """Stop every add-on, newest first."""
        stopped: list[str] = []
        for name, proc in reversed(self.addons().items()):
            if self.stop_addon(name):
                stopped.append(name)
                progress(f"stopped {name} (pid {proc.pid})")
        return stopped


def _cmdline(pid: int) -> list[str]:
    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [part.decode() for part in raw.split(b"\0") if part]
