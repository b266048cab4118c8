"""The local image registry: CNCF Distribution's `registry`, built from its Go module and
run as an add-on of the local cluster on a loopback port.

Plain HTTP by default (container tools treat it as insecure: `--tls-verify=false` for
podman, loopback is allowed by docker and containerd's `--plain-http`), or HTTPS with a
certificate signed by the cluster's CA. Its storage is `<state dir>/registry/storage`,
so `cluster down` removes the images with the rest of the cluster's state; `registry.json`
says where it listens (for `cluster status` and the Makefile's REGISTRY).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runner.devtools.cluster import build, certs
from runner.devtools.cluster import processes as process
from runner.devtools.cluster.components import registry
from runner.devtools.cluster.layout import PKI
from runner.devtools.cluster.local import LocalCluster
from runner.errors import ClusterError

Progress = Callable[[str], None]
ADDON = "registry"


@dataclass(frozen=True)
class RegistryInfo:
    """Where the running registry listens."""

    host: str
    port: int
    tls: bool
    ca_file: str | None = None

    @property
    def address(self) -> str:
        """`host:port`, the prefix of image names pushed there."""
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}"


def config(
    *, port: int, debug_port: int, storage: Path, tls: tuple[Path, Path] | None
) -> dict[str, Any]:
    """The registry's configuration: loopback only, filesystem storage, deletes allowed
    (so tests can clean up), its debug server (health, metrics) on loopback too."""
    http: dict[str, Any] = {
        "addr": f"{process.LOOPBACK}:{port}",
        "debug": {"addr": f"{process.LOOPBACK}:{debug_port}"},
        "headers": {"X-Content-Type-Options": ["nosniff"]},
    }
    if tls is not None:
        http["tls"] = {"certificate": str(tls[0]), "key": str(tls[1])}
    return {
        "version": 0.1,
        "log": {"level": "info", "fields": {"service": "registry"}},
        "storage": {
            "filesystem": {"rootdirectory": str(storage)},
            "delete": {"enabled": True},
            "maintenance": {"uploadpurging": {"enabled": False}},
        },
        "http": http,
    }


def _info_file(cluster: LocalCluster) -> Path:
    return cluster.state_dir / "registry.json"


def info(cluster: LocalCluster) -> RegistryInfo | None:
    """The registry recorded for this cluster, when its process still runs."""
    try:
        raw = json.loads(_info_file(cluster).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    running = cluster.addons().get(ADDON)
    if running is None or not process.is_running(running.pid, running.binary):
        return None
    return RegistryInfo(raw["host"], raw["port"], raw["tls"], raw.get("ca_file"))


def start(
    cluster: LocalCluster,
    *,
    tls: bool = False,
    port: int | None = None,
    progress: Progress = print,
) -> RegistryInfo:
    """Start the registry beside an up cluster (or return the one already running)."""
    if not cluster.is_up():
        raise ClusterError(
            f"no cluster running in {cluster.state_dir}; start one with "
            "`ansible-operator cluster up --registry`"
        )
    running = info(cluster)
    if running is not None and running.tls == tls and port in (None, running.port):
        return running
    binary = build.ensure_built([registry()], root=cluster.cache, progress=progress)["registry"]
    if port and process.port_in_use(port):
        raise ClusterError(f"port {port} on {process.LOOPBACK} is already in use")
    directory = cluster.state_dir / "registry"
    directory.mkdir(parents=True, exist_ok=True)
    port = port or process.free_port()
    tls_files = None
    ca_file = None
    if tls:
        pki = PKI.under(cluster.state_dir / "pki")
        tls_files = (directory / "tls.crt", directory / "tls.key")
        certs.ensure_serving_cert(pki, *tls_files, common_name="registry", ips=(process.LOOPBACK,))
        ca_file = str(pki.ca_cert)
    config_file = directory / "config.yml"
    document = config(
        port=port, debug_port=process.free_port(), storage=directory / "storage", tls=tls_files
    )
    config_file.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    result = RegistryInfo(process.LOOPBACK, port, tls, ca_file)
    proc = cluster.start_addon(ADDON, [str(binary), "serve", str(config_file)])
    endpoint = process.Endpoint(result.url, ca_file=Path(ca_file) if ca_file else None)
    try:
        process.wait_until_ready(proc, endpoint, "/v2/", timeout=30)
    except ClusterError:
        cluster.stop_addon(ADDON)
        raise
    _info_file(cluster).write_text(json.dumps(vars(result), indent=2), encoding="utf-8")
    # A real node started before the registry learns of it now (a node started later
    # reads registry.json itself).
    node = cluster.real_node
    if node.is_running():
        node.use_registry(port, ca_file=ca_file)
    progress(f"registry ready at {result.url} (images: {result.address}/<name>:<tag>)")
    return result


def stop(cluster: LocalCluster) -> bool:
    """Stop the registry (its storage stays until `cluster down`)."""
    _info_file(cluster).unlink(missing_ok=True)
    return cluster.stop_addon(ADDON)
