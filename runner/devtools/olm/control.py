"""OLM itself on the local cluster: `ansible-operator olm install|uninstall|status`.

`install` builds OLM's `olm` and `catalog` operators (gomodules/tools/olm), applies OLM's CRDs
(from operator-framework/api, copied beside the binaries at build time), the `olm` and
`operators` namespaces, the global OperatorGroup and the OLMConfig, then starts both
operators as add-on processes of the cluster (pid files and logs in its state
directory; `cluster down` stops them) with the cluster's admin kubeconfig, each serving
/healthz on its own loopback port. Running `install` again restarts whichever of them
is not running.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.devtools.cluster import build, registry
from runner.devtools.cluster import processes as process
from runner.devtools.cluster.components import olm_operators
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.olm import addons, servicedial
from runner.devtools.olm import olmobjects as model
from runner.devtools.olm import steps as api
from runner.devtools.olm.catalogimages import OLMImages, ensure_olm_images
from runner.errors import ClusterError
from runner.k8s import KubeClient
from runner.util.progress import Ticker

Progress = Callable[[str], None]
Obj = dict[str, Any]

# Add-on names of the two operators, in start order.
OPERATORS = ("olm-operator", "catalog-operator")
# The SOCKS5 proxy through which the catalog operator reaches registry pods' Services.
SERVICE_DIAL = "olm-service-dial"
_BINARY = {"olm-operator": "olm", "catalog-operator": "catalog"}


def olm_dir(cluster: LocalCluster) -> Path:
    return cluster.state_dir / "olm"


def _state_file(cluster: LocalCluster) -> Path:
    return olm_dir(cluster) / "state.json"


def load_ports(cluster: LocalCluster) -> dict[str, int]:
    try:
        data = json.loads(_state_file(cluster).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in (data.get("ports") or {}).items()}


def _save_ports(cluster: LocalCluster, ports: dict[str, int]) -> None:
    olm_dir(cluster).mkdir(parents=True, exist_ok=True)
    text = json.dumps({"ports": ports, "version": version()}, indent=2)
    _state_file(cluster).write_text(text, encoding="utf-8")


def version() -> str:
    return olm_operators()["olm"].version


def healthy(cluster: LocalCluster) -> dict[str, bool]:
    """Each operator: running and answering /healthz on its port."""
    ports = load_ports(cluster)
    return addons.healthy(cluster, {name: ports.get(name) for name in OPERATORS}, "/healthz")


def require_running(cluster: LocalCluster) -> None:
    """Fail with what to do when OLM is not installed or one operator is down."""
    if not cluster.is_up():
        raise ClusterError(
            f"no running cluster in {cluster.state_dir}; start one with "
            "`ansible-operator cluster up`, then `ansible-operator olm install`"
        )
    down = [name for name, ok in healthy(cluster).items() if not ok]
    if down:
        raise ClusterError(
            f"OLM is not running on the cluster in {cluster.state_dir} ({', '.join(down)} "
            "down); run `ansible-operator olm install`"
        )


def crd_files(cluster: LocalCluster) -> list[Path]:
    directory = build.olm_crd_dir(olm_operators()["olm"], cluster.cache)
    found = sorted(directory.glob("*.yaml"))
    if not found:
        raise ClusterError(
            f"{directory}: OLM's CRDs are missing; remove {directory.parent} to rebuild OLM"
        )
    return found


def install(cluster: LocalCluster, *, progress: Progress = print) -> float:
    """Install OLM (or restart its stopped operators); return the seconds it took."""
    if not cluster.is_up():
        raise ClusterError(
            f"no running cluster in {cluster.state_dir}; start one with "
            "`ansible-operator cluster up`"
        )
    components = olm_operators()
    binaries = build.ensure_built(components.values(), root=cluster.cache, progress=progress)
    images = None
    local_registry = registry.info(cluster)
    if local_registry is not None:
        # With a registry, OLM's own pods (bundle unpack Jobs, catalog registry pods)
        # can run: they need these images, from the registry the node pulls from.
        images = ensure_olm_images(local_registry.address, cache=cluster.cache, progress=progress)
        _save_images(cluster, images)
    started = time.monotonic()
    crds = crd_files(cluster)
    asyncio.run(_apply_base(cluster, crds, progress))
    ports = load_ports(cluster)
    health = healthy(cluster)
    dial_port = None
    if images is not None:
        dial_port = _ensure_service_dial(cluster, ports, progress)
        if dial_port != ports.get(SERVICE_DIAL):
            health["catalog-operator"] = False  # restart it with the proxy's new port
        ports[SERVICE_DIAL] = dial_port
        _save_ports(cluster, ports)
    for name in OPERATORS:
        if health[name]:
            progress(f"{name} already running")
            continue
        ports[name] = process.free_port()
        _save_ports(cluster, ports)
        _start(cluster, name, binaries[_BINARY[name]], ports[name], progress, images, dial_port)
    with Ticker("waiting for OLM's operators to work"):
        asyncio.run(_wait_working(cluster))
    elapsed = time.monotonic() - started
    progress(f"OLM {version()} running in {elapsed:.1f} s")
    return elapsed


async def _client(cluster: LocalCluster) -> KubeClient:
    return await KubeClient.connect(kubeconfig=str(cluster.kubeconfig))


async def _apply_base(cluster: LocalCluster, crds: list[Path], progress: Progress) -> None:
    client = await _client(cluster)
    try:
        await addons.apply_crds(client, crds, what="OLM", progress=progress)
        for namespace in (model.OLM_NAMESPACE, model.OPERATORS_NAMESPACE):
            if await api.get(client, model.NAMESPACE, namespace, None) is None:
                await client.create(model.NAMESPACE, model.namespace(namespace))
        group = model.operator_group(model.GLOBAL_OPERATOR_GROUP, model.OPERATORS_NAMESPACE, None)
        found = await api.get(
            client, model.OPERATOR_GROUP, model.GLOBAL_OPERATOR_GROUP, model.OPERATORS_NAMESPACE
        )
        if found is None:
            await client.create(model.OPERATOR_GROUP, group)
        if await api.get(client, model.OLM_CONFIG, "cluster", None) is None:
            await client.create(model.OLM_CONFIG, model.olm_config())
    finally:
        await client.close()


def _images_file(cluster: LocalCluster) -> Path:
    return olm_dir(cluster) / "images.json"


def _save_images(cluster: LocalCluster, images: OLMImages) -> None:
    olm_dir(cluster).mkdir(parents=True, exist_ok=True)
    text = json.dumps({"opm": images.opm, "util": images.util}, indent=2)
    _images_file(cluster).write_text(text, encoding="utf-8")


def load_images(cluster: LocalCluster) -> OLMImages | None:
    """The images the catalog operator was started with (None: OLM's defaults, when the
    cluster had no registry at `olm install`)."""
    try:
        data = json.loads(_images_file(cluster).read_text(encoding="utf-8"))
        return OLMImages(opm=str(data["opm"]), util=str(data["util"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _start(
    cluster: LocalCluster,
    name: str,
    binary: Path,
    port: int,
    progress: Progress,
    images: OLMImages | None,
    dial_port: int | None,
) -> None:
    kubeconfig = str(cluster.kubeconfig)
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig,
        "OLM_LISTEN_ADDRESS": f"{process.LOOPBACK}:{port}",
        "OPERATOR_NAMESPACE": model.OLM_NAMESPACE,
        "OPERATOR_NAME": name,
    }
    argv = [str(binary), f"--namespace={model.OLM_NAMESPACE}"]
    if name == "catalog-operator":
        argv.append(f"--kubeconfig={kubeconfig}")
        if images is not None:
            argv += images.catalog_flags()
        if dial_port is not None:
            env.update(servicedial.proxy_environ(dial_port))
    addons.start(
        cluster, name, argv, env, health_port=port, ready_path="/healthz", progress=progress
    )


def _ensure_service_dial(cluster: LocalCluster, ports: dict[str, int], progress: Progress) -> int:
    """Start the service proxy unless it runs; return its port."""
    running = cluster.addons().get(SERVICE_DIAL)
    port = ports.get(SERVICE_DIAL)
    if running is not None and port and process.is_running(running.pid, running.binary):
        return port
    port = process.free_port()
    argv = [
        sys.executable,
        "-m",
        "runner.devtools.olm.servicedial",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--port={port}",
    ]
    progress(f"starting {SERVICE_DIAL} (SOCKS5 {process.LOOPBACK}:{port} to Services' pods)")
    running = cluster.start_addon(SERVICE_DIAL, argv)
    addons.wait_listening(running, port, timeout=30, interval=0.1)
    return port


async def _wait_working(cluster: LocalCluster) -> None:
    """The olm operator reconciles: it fills in the global OperatorGroup's status."""
    client = await _client(cluster)
    try:

        async def reconciled() -> bool:
            group = await api.get(
                client,
                model.OPERATOR_GROUP,
                model.GLOBAL_OPERATOR_GROUP,
                model.OPERATORS_NAMESPACE,
            )
            return bool(group and (group.get("status") or {}).get("lastUpdated"))

        await api.wait_for(
            reconciled, timeout=120, what="OLM to reconcile the global OperatorGroup"
        )
    finally:
        await client.close()


def uninstall(cluster: LocalCluster, *, progress: Progress = print) -> None:
    """Remove OLM: the CSVs left (while OLM still runs to finalize them), the operator
    processes, the objects `install` created and the CRDs, and the state. Bundles run
    with `olm run-bundle` are cleaned up before (`installed.cleanup`), by the caller."""
    addons.remove(
        cluster,
        (*reversed(OPERATORS), SERVICE_DIAL),
        olm_dir(cluster),
        while_running=lambda: _delete_csvs(cluster, progress),
        after_stop=lambda: _delete_base(cluster, progress),
        progress=progress,
    )


async def _delete_csvs(cluster: LocalCluster, progress: Progress) -> None:
    """Delete the CSVs left (OLM, still running, removes its finalizer and what they own)."""
    client = await _client(cluster)
    try:
        for sub in await api.listed(client, model.SUBSCRIPTION, None):
            meta = sub["metadata"]
            await api.delete(client, model.SUBSCRIPTION, meta["name"], meta["namespace"])
        csvs = [
            c
            for c in await api.listed(client, model.CSV, None)
            if "olm.copiedFrom" not in (c["metadata"].get("labels") or {})
        ]
        for csv in csvs:
            meta = csv["metadata"]
            progress(f"deleting CSV {meta['namespace']}/{meta['name']}")
            await api.delete(client, model.CSV, meta["name"], meta["namespace"])
        for csv in csvs:
            meta = csv["metadata"]
            if not await api.wait_gone(
                client, model.CSV, meta["name"], meta["namespace"], timeout=60
            ):
                progress(f"CSV {meta['namespace']}/{meta['name']} still there; removing finalizers")
                await client.patch(
                    model.CSV,
                    name=meta["name"],
                    namespace=meta["namespace"],
                    body={"metadata": {"finalizers": None}},
                )
    finally:
        await client.close()


async def _delete_base(cluster: LocalCluster, progress: Progress) -> None:
    client = await _client(cluster)
    try:
        await api.delete(
            client, model.OPERATOR_GROUP, model.GLOBAL_OPERATOR_GROUP, model.OPERATORS_NAMESPACE
        )
        for namespace in (model.OPERATORS_NAMESPACE, model.OLM_NAMESPACE):
            if await api.delete(client, model.NAMESPACE, namespace, None):
                progress(f"deleting namespace {namespace}")
        await addons.delete_crds(client, crd_files(cluster), progress=progress)
    finally:
        await client.close()


def status_lines(cluster: LocalCluster) -> list[str]:
    ports = load_ports(cluster)
    health = healthy(cluster)
    procs = cluster.addons()
    if not ports and not any(name in procs for name in OPERATORS):
        return [f"OLM is not installed on the cluster in {cluster.state_dir}"]
    lines = [f"OLM {version()} on the cluster in {cluster.state_dir}"]
    for name in OPERATORS:
        proc = procs.get(name)
        state = "running" if health[name] else "NOT RUNNING"
        pid = proc.pid if proc else "-"
        where = f"{process.LOOPBACK}:{ports.get(name, '-')}"
        log = proc.log if proc else "-"
        lines.append(f"  {name:<18} {state:<12} pid {pid!s:<8} health {where:<16} {log}")
    return lines
