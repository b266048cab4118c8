"""What OLM v0's operators and OLM v1's components share as add-on processes of the
local cluster: applying and removing their CRDs, starting one and waiting until it is
ready or listens, and telling which of them are healthy."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from runner.devtools.cluster import processes as process
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.olm import olmobjects as model
from runner.devtools.olm import steps as api
from runner.errors import ClusterError
from runner.k8s import KubeClient
from runner.util.progress import Ticker

Progress = Callable[[str], None]


def healthy(
    cluster: LocalCluster, health_ports: Mapping[str, int | None], path: str
) -> dict[str, bool]:
    """Each add-on named in `health_ports`: running and answering `path` on its port."""
    addons = cluster.addons()
    result = {}
    for name, port in health_ports.items():
        proc = addons.get(name)
        alive = proc is not None and process.is_running(proc.pid, proc.binary)
        endpoint = process.Endpoint(f"http://{process.LOOPBACK}:{port}")
        result[name] = bool(alive and port and endpoint.ok(path))
    return result


def start(
    cluster: LocalCluster,
    name: str,
    argv: list[str],
    env: Mapping[str, str],
    *,
    health_port: int,
    ready_path: str,
    progress: Progress,
    tick: bool = False,
) -> None:
    """Start add-on `name` and wait until it answers `ready_path` on its health port."""
    progress(f"starting {name} (health {process.LOOPBACK}:{health_port})")
    running = cluster.start_addon(name, argv, env=env)
    endpoint = process.Endpoint(f"http://{process.LOOPBACK}:{health_port}")
    waiting = Ticker(f"waiting for {name} to be ready") if tick else contextlib.nullcontext()
    with waiting:
        process.wait_until_ready(running, endpoint, ready_path, timeout=120)


def wait_listening(
    running: process.RunningProcess, port: int, *, timeout: float, interval: float
) -> None:
    """Until `running` listens on `port`; fails when it exits or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not process.port_in_use(port):
        if time.monotonic() > deadline or not process.is_running(running.pid, running.binary):
            raise ClusterError(
                f"{running.name} did not listen on {process.LOOPBACK}:{port}; see {running.log}"
            )
        time.sleep(interval)


async def apply_crds(
    client: KubeClient, crds: list[Path], *, what: str, progress: Progress
) -> None:
    """Apply every CRD in the files `crds` and wait until each is Established."""
    progress(f"applying {len(crds)} {what} CRDs")
    names = []
    for path in crds:
        for crd in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if crd:
                await api.apply(client, crd)
                names.append(str(crd["metadata"]["name"]))
    for name in names:

        async def established(crd_name: str = name) -> bool:
            crd = await api.get(client, model.CRD, crd_name, None)
            return crd is not None and model.crd_established(crd)

        await api.wait_for(established, timeout=60, what=f"CRD {name} Established")


async def delete_crds(client: KubeClient, crds: list[Path], *, progress: Progress) -> None:
    """Delete every CRD in the files `crds` that still exists."""
    for path in crds:
        for crd in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if crd and await api.delete(client, model.CRD, crd["metadata"]["name"], None):
                progress(f"deleting CRD {crd['metadata']['name']}")


def remove(
    cluster: LocalCluster,
    names: Sequence[str],
    state_dir: Path,
    *,
    while_running: Callable[[], Coroutine[Any, Any, None]],
    after_stop: Callable[[], Coroutine[Any, Any, None]],
    progress: Progress,
) -> None:
    """Run `while_running` (removing what the add-ons must finalize themselves), stop the
    add-ons `names` in that order, run `after_stop`, then delete `state_dir`. The API
    calls are skipped when the cluster is gone."""
    if cluster.kubeconfig.is_file() and cluster.is_up():
        asyncio.run(while_running())
    for name in names:
        if cluster.stop_addon(name):
            progress(f"stopped {name}")
    if cluster.kubeconfig.is_file() and cluster.is_up():
        asyncio.run(after_stop())
    shutil.rmtree(state_dir, ignore_errors=True)
