"""A file-based catalog served by `opm serve` on a loopback port, as a cluster add-on.

The catalog is written by our own catalog builder (`runner.devtools.packaging.catalog`) with an
empty bundle `image`: every manifest travels in the catalog as an `olm.bundle.object`
property, `opm serve` hands them to OLM in the gRPC Bundle message, and OLM installs
from them without an unpack Job (which would need to pull the bundle image).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from runner.devtools.cluster import build
from runner.devtools.cluster import processes as process
from runner.devtools.cluster.components import tools
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.packaging import catalog
from runner.devtools.packaging.findings import has_errors
from runner.devtools.packaging.loader import LoadedBundle, load_bundle
from runner.devtools.packaging.validate import validate_loaded
from runner.devtools.packaging.write import write_files
from runner.errors import ClusterError, ConfigError

Obj = dict[str, Any]


def load_checked(
    directory: Path, *, skip_validation: bool, warn: Any = print
) -> tuple[LoadedBundle, Obj]:
    """The bundle and its CSV; our validator's errors stop here unless `skip_validation`
    (which lets a broken bundle through so that OLM's own verdict can be seen)."""
    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a bundle directory")
    bundle = load_bundle(directory)
    findings = validate_loaded(bundle)
    if has_errors(findings):
        problems = "\n".join(str(f) for f in findings if f.level == "error")
        if not skip_validation:
            raise ConfigError(
                f"{directory}: the bundle is not valid (pass --skip-validation to hand it "
                f"to OLM anyway):\n{problems}"
            )
        warn(f"warning: {directory} is not valid; handing it to OLM anyway:\n{problems}")
    csv = bundle.csv
    if csv is None:
        raise ConfigError(f"{directory}: needs exactly one ClusterServiceVersion")
    return bundle, csv


def package_of(bundle: LoadedBundle) -> str:
    package = (bundle.annotations or {}).get("operators.operatorframework.io.bundle.package.v1")
    if not package:
        raise ConfigError(f"{bundle.directory}: metadata/annotations.yaml names no package")
    return str(package)


def default_channel(bundle: LoadedBundle) -> str:
    annotations = bundle.annotations or {}
    default = annotations.get("operators.operatorframework.io.bundle.channel.default.v1")
    channels = annotations.get("operators.operatorframework.io.bundle.channels.v1", "")
    first = next((c.strip() for c in channels.split(",") if c.strip()), "")
    channel = default or first
    if not channel:
        raise ConfigError(f"{bundle.directory}: the bundle names no channel; pass --channel")
    return str(channel)


def write_catalog(
    catalog_dir: Path, bundle: LoadedBundle, package: str, *, channel: str, bundle_image: str = ""
) -> list[Obj]:
    """Add `bundle` to `channel` of the catalog in `catalog_dir`; with `bundle_image`
    empty, OLM installs from the embedded manifests, else it unpacks that image."""
    existing = catalog.load_documents(catalog_dir, package=package) if catalog_dir.is_dir() else []
    options = catalog.CatalogOptions(package=package, channel=channel, bundle_image=bundle_image)
    documents = catalog.add_bundle(existing, bundle, options)
    files = {f"{catalog_dir.name}/{package}/index.yaml": catalog.render(documents)}
    write_files(catalog_dir.parent, files)
    return documents


def bundle_names(documents: list[Obj]) -> list[str]:
    return [str(d["name"]) for d in documents if d.get("schema") == "olm.bundle"]


def opm_binary(cluster: LocalCluster, progress: Any = print) -> Path:
    opm = tools()["opm"]
    return build.ensure_built([opm], root=cluster.cache, progress=progress)["opm"]


def start(
    cluster: LocalCluster, name: str, catalog_dir: Path, work: Path, *, progress: Any = print
) -> int:
    """Serve `catalog_dir` as add-on `name` on a free loopback port; return the port once
    opm accepts connections (it listens only after loading the catalog)."""
    binary = opm_binary(cluster, progress)
    port, pprof = process.free_port(), process.free_port()
    work.mkdir(parents=True, exist_ok=True)
    argv = [
        str(binary),
        "serve",
        str(catalog_dir),
        f"--port={port}",
        f"--pprof-addr={process.LOOPBACK}:{pprof}",
        f"--cache-dir={work / f'cache-{port}'}",
        "--cache-enforce-integrity=false",
        f"--termination-log={work / 'termination-log'}",
    ]
    env = {**os.environ, "OPM_SERVE_HOST": process.LOOPBACK}
    running = cluster.start_addon(name, argv, env=env)
    deadline = time.monotonic() + 120
    while not _accepts(port):
        if not process.is_running(running.pid, running.binary):
            raise ClusterError(
                f"opm serve exited; last lines of {running.log}:\n{process.log_tail(running.log)}"
            )
        if time.monotonic() > deadline:
            cluster.stop_addon(name)
            raise ClusterError(f"opm serve did not listen on port {port} within 120 s")
        time.sleep(0.2)
    progress(f"serving {catalog_dir} with opm on {process.LOOPBACK}:{port}")
    return port


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((process.LOOPBACK, port), timeout=1):
            return True
    except OSError:
        return False


def alive(cluster: LocalCluster, name: str) -> bool:
    proc = cluster.addons().get(name)
    return proc is not None and process.is_running(proc.pid, proc.binary)
