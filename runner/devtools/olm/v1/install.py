"""OLM v1 on the local cluster: `ansible-operator olm install|uninstall --v1`.

`install --v1` builds operator-controller and catalogd (gomodules/tools/olm-v1), applies
their CRDs (copied from the module beside the binaries at build time), the namespace
`olmv1-system` and its two service accounts, then starts both as add-on processes of the
cluster with its admin kubeconfig (as OLM v0's operators run here). TLS comes from the
cluster's CA instead of cert-manager: one serving certificate for 127.0.0.1 serves
catalogd's catalog server and webhook and both metrics servers, and the CA is what
operator-controller trusts for catalogd (`--catalogd-cas-dir`) and both trust for
registries (`--pull-cas-dir`). catalogd's mutating webhook is registered with a loopback
URL once catalogd listens. Every port is a free loopback port.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.devtools.cluster import build, certs, registry
from runner.devtools.cluster import processes as process
from runner.devtools.cluster.components import olm_v1_operators
from runner.devtools.cluster.layout import PKI
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.olm import addons
from runner.devtools.olm import olmobjects as model
from runner.devtools.olm import steps as api
from runner.devtools.olm.v1 import objects as v1model
from runner.errors import ClusterError
from runner.k8s import KubeClient

Progress = Callable[[str], None]

# Add-on names, in start order (catalogd first: operator-controller reads its catalogs).
COMPONENTS = ("catalogd", "operator-controller")
# Port names recorded in state.json.
_PORTS = {
    "catalogd": ("health", "metrics", "catalogs", "webhook"),
    "operator-controller": ("health", "metrics"),
}
# Tokens are only read for the service account's name (never sent anywhere).
_TOKEN_SECONDS = 7 * 24 * 3600


def v1_dir(cluster: LocalCluster) -> Path:
    return cluster.state_dir / "olm-v1"


def _state_file(cluster: LocalCluster) -> Path:
    return v1_dir(cluster) / "state.json"


def version() -> str:
    return olm_v1_operators()["operator-controller"].version


@dataclass(frozen=True)
class Files:
    """What both processes read, under `<state>/olm-v1/`."""

    root: Path

    @property
    def cert(self) -> Path:
        return self.root / "tls" / "tls.crt"

    @property
    def key(self) -> Path:
        return self.root / "tls" / "tls.key"

    @property
    def cas(self) -> Path:
        """A directory with the cluster's CA (`--catalogd-cas-dir`, `--pull-cas-dir`)."""
        return self.root / "cas"

    @property
    def registries_conf(self) -> Path:
        return self.root / "registries.conf"

    def token(self, component: str) -> Path:
        return self.root / "tokens" / component

    def cache(self, component: str) -> Path:
        return self.root / "cache" / component


def load_ports(cluster: LocalCluster) -> dict[str, dict[str, int]]:
    try:
        data = json.loads(_state_file(cluster).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    ports = data.get("ports") or {}
    return {str(c): {str(k): int(v) for k, v in p.items()} for c, p in ports.items()}


def _save_ports(cluster: LocalCluster, ports: dict[str, dict[str, int]]) -> None:
    v1_dir(cluster).mkdir(parents=True, exist_ok=True)
    text = json.dumps({"ports": ports, "version": version()}, indent=2)
    _state_file(cluster).write_text(text, encoding="utf-8")


def healthy(cluster: LocalCluster) -> dict[str, bool]:
    """Each component: running and answering /readyz on its health port."""
    ports = load_ports(cluster)
    health_ports = {name: ports.get(name, {}).get("health") for name in COMPONENTS}
    return addons.healthy(cluster, health_ports, "/readyz")


def installed(cluster: LocalCluster) -> bool:
    return _state_file(cluster).is_file() or any(n in cluster.addons() for n in COMPONENTS)


def require_running(cluster: LocalCluster) -> None:
    if not cluster.is_up():
        raise ClusterError(
            f"no running cluster in {cluster.state_dir}; start one with "
            "`ansible-operator cluster up --registry --real-node`, then "
            "`ansible-operator olm install --v1`"
        )
    down = [name for name, ok in healthy(cluster).items() if not ok]
    if down:
        raise ClusterError(
            f"OLM v1 is not running on the cluster in {cluster.state_dir} "
            f"({', '.join(down)} down); run `ansible-operator olm install --v1`"
        )


def crd_files(cluster: LocalCluster) -> list[Path]:
    directory = build.olm_v1_crd_dir(olm_v1_operators()["operator-controller"], cluster.cache)
    found = sorted(directory.glob("*.yaml"))
    if not found:
        raise ClusterError(
            f"{directory}: OLM v1's CRDs are missing; remove {directory.parent} to rebuild"
        )
    return found


def _prepare_files(cluster: LocalCluster) -> tuple[Files, bool]:
    """The files both components read; and whether the registries they must know of
    changed (read once at start: a registry started after them needs a restart)."""
    files = Files(v1_dir(cluster))
    pki = PKI.under(cluster.state_dir / "pki")
    certs.ensure_serving_cert(
        pki, files.cert, files.key, common_name="olm-v1", ips=(process.LOOPBACK,)
    )
    files.cas.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(pki.ca_cert, files.cas / "cluster-ca.crt")
    local = registry.info(cluster)
    insecure = [local.address] if local is not None and not local.tls else []
    text = v1model.registries_conf(insecure)
    try:
        changed = files.registries_conf.read_text(encoding="utf-8") != text
    except OSError:
        changed = True
    files.registries_conf.write_text(text, encoding="utf-8")
    return files, changed


def install(cluster: LocalCluster, *, progress: Progress = print) -> float:
    """Install OLM v1 (or restart a stopped component); return the seconds it took."""
    if not cluster.is_up():
        raise ClusterError(
            f"no running cluster in {cluster.state_dir}; start one with "
            "`ansible-operator cluster up --registry --real-node`"
        )
    components = olm_v1_operators()
    binaries = build.ensure_built(components.values(), root=cluster.cache, progress=progress)
    started = time.monotonic()
    files, registries_changed = _prepare_files(cluster)
    asyncio.run(_apply_base(cluster, crd_files(cluster), files, progress))
    ports = load_ports(cluster)
    health = healthy(cluster)
    if registries_changed and any(health.values()):
        progress("the cluster's registry changed: restarting OLM v1's components")
        health = dict.fromkeys(health, False)
    for name in COMPONENTS:
        if health[name]:
            progress(f"{name} already running")
            continue
        ports[name] = {purpose: process.free_port() for purpose in _PORTS[name]}
        _save_ports(cluster, ports)
        _start(cluster, name, binaries[name], ports[name], files, progress)
        if name == "catalogd":
            _wait_listening(cluster, name, ports[name]["webhook"])
            asyncio.run(_register_webhook(cluster, ports[name]["webhook"]))
    elapsed = time.monotonic() - started
    progress(f"OLM v1 {version()} running in {elapsed:.1f} s")
    return elapsed


async def _client(cluster: LocalCluster) -> KubeClient:
    return await KubeClient.connect(kubeconfig=str(cluster.kubeconfig))


async def _apply_base(
    cluster: LocalCluster, crds: list[Path], files: Files, progress: Progress
) -> None:
    client = await _client(cluster)
    try:
        await addons.apply_crds(client, crds, what="OLM v1", progress=progress)
        namespace = v1model.SYSTEM_NAMESPACE
        if await api.get(client, model.NAMESPACE, namespace, None) is None:
            await client.create(model.NAMESPACE, model.namespace(namespace))
        for component, account in v1model.SERVICE_ACCOUNTS.items():
            if await api.get(client, model.SERVICE_ACCOUNT, account, namespace) is None:
                body = {"metadata": {"name": account, "namespace": namespace}}
                await client.create(model.SERVICE_ACCOUNT, body)
            # Both read their service account's name from its token file (to find its
            # pull secrets); outside a pod the edit points them at this one.
            token = await api.service_account_token(
                client, namespace, account, seconds=_TOKEN_SECONDS
            )
            path = files.token(component)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(token, encoding="utf-8")
            path.chmod(0o600)
    finally:
        await client.close()


def _argv(
    name: str, binary: Path, ports: dict[str, int], files: Files
) -> tuple[list[str], dict[str, str]]:
    loop = process.LOOPBACK
    argv = [
        str(binary),
        f"--health-probe-bind-address={loop}:{ports['health']}",
        f"--metrics-bind-address={loop}:{ports['metrics']}",
        f"--tls-cert={files.cert}",
        f"--tls-key={files.key}",
        f"--pull-cas-dir={files.cas}",
        f"--system-namespace={v1model.SYSTEM_NAMESPACE}",
    ]
    env: dict[str, str] = {}
    if name == "catalogd":
        argv += [
            f"--catalogs-server-addr={loop}:{ports['catalogs']}",
            f"--external-address={loop}:{ports['catalogs']}",
            f"--webhook-server-port={ports['webhook']}",
            f"--cache-dir={files.cache(name)}",
        ]
        env["CATALOGD_WEBHOOK_HOST"] = loop
    else:
        argv += [f"--catalogd-cas-dir={files.cas}", f"--cache-path={files.cache(name)}"]
    env["OLMV1_SERVICE_ACCOUNT_TOKEN_FILE"] = str(files.token(name))
    env["CONTAINERS_REGISTRIES_CONF"] = str(files.registries_conf)
    return argv, env


def _start(
    cluster: LocalCluster,
    name: str,
    binary: Path,
    ports: dict[str, int],
    files: Files,
    progress: Progress,
) -> None:
    argv, extra = _argv(name, binary, ports, files)
    files.cache(name).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), **extra}
    addons.start(
        cluster,
        name,
        argv,
        env,
        health_port=ports["health"],
        ready_path="/readyz",
        progress=progress,
        tick=True,
    )


def _wait_listening(cluster: LocalCluster, name: str, port: int) -> None:
    """Until `name` listens on `port` (the webhook server may start after /readyz
    answers, and the API server refuses ClusterCatalogs while the webhook is down)."""
    addons.wait_listening(cluster.addons()[name], port, timeout=60, interval=0.2)


async def _register_webhook(cluster: LocalCluster, port: int) -> None:
    ca = (cluster.state_dir / "pki" / "ca.crt").read_bytes()
    client = await _client(cluster)
    try:
        await api.apply(client, v1model.catalogd_webhook(port, ca))
    finally:
        await client.close()


def uninstall(cluster: LocalCluster, *, progress: Progress = print) -> None:
    """Remove OLM v1: every ClusterExtension (while operator-controller still runs to
    uninstall what it installed) and ClusterCatalog, both processes, the webhook, the
    namespace, the CRDs and the state."""
    addons.remove(
        cluster,
        tuple(reversed(COMPONENTS)),
        v1_dir(cluster),
        while_running=lambda: _delete_objects(cluster, progress),
        after_stop=lambda: _delete_base(cluster, progress),
        progress=progress,
    )


async def _delete_objects(cluster: LocalCluster, progress: Progress) -> None:
    client = await _client(cluster)
    try:
        for gvk in (v1model.CLUSTER_EXTENSION, v1model.CLUSTER_CATALOG):
            found = await api.listed(client, gvk, None)
            for obj in found:
                progress(f"deleting {gvk.kind} {obj['metadata']['name']}")
                await api.delete(client, gvk, obj["metadata"]["name"], None)
            for obj in found:
                name = obj["metadata"]["name"]
                if not await api.wait_gone(client, gvk, name, None, timeout=120):
                    progress(f"{gvk.kind} {name} still there; removing its finalizers")
                    body = {"metadata": {"finalizers": None}}
                    await client.patch(gvk, name=name, namespace=None, body=body)
    finally:
        await client.close()


async def _delete_base(cluster: LocalCluster, progress: Progress) -> None:
    client = await _client(cluster)
    try:
        await api.delete(client, v1model.MUTATING_WEBHOOK, v1model.WEBHOOK_CONFIGURATION, None)
        if await api.delete(client, model.NAMESPACE, v1model.SYSTEM_NAMESPACE, None):
            progress(f"deleting namespace {v1model.SYSTEM_NAMESPACE}")
        await addons.delete_crds(client, crd_files(cluster), progress=progress)
    finally:
        await client.close()


def status_lines(cluster: LocalCluster) -> list[str]:
    ports = load_ports(cluster)
    health = healthy(cluster)
    procs = cluster.addons()
    lines = [f"OLM v1 {version()} on the cluster in {cluster.state_dir}"]
    for name in COMPONENTS:
        proc = procs.get(name)
        state = "running" if health[name] else "NOT RUNNING"
        pid = proc.pid if proc else "-"
        where = f"{process.LOOPBACK}:{ports.get(name, {}).get('health', '-')}"
        log = proc.log if proc else "-"
        lines.append(f"  {name:<20} {state:<12} pid {pid!s:<8} health {where:<16} {log}")
    return lines
