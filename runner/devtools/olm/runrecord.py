"""The record of each bundle installed with `olm run-bundle` (OLM v0), kept on disk.

Each run is recorded in `<cluster state>/olm/runs/<namespace>/<package>/run.json`: the
catalog serving it (an opm add-on on a loopback port, or a catalog image), the
Subscription and what we created for it, so that `bundle-upgrade`, `approve`, `status`,
`kubeconfig` and `cleanup` find it again in a later command.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from runner.devtools.cluster import processes as process
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.olm import control, imagerun
from runner.errors import ConfigError
from runner.k8s import KubeClient


@dataclass
class Run:
    """One package installed into one namespace with `olm run-bundle`."""

    namespace: str
    package: str
    channel: str
    approval: str
    install_mode: str
    catalog_source: str
    subscription: str
    opm: str = ""  # the add-on serving the catalog now
    port: int = 0
    generation: int = 0
    operator_group: str | None = None  # the OperatorGroup we created, if any
    namespace_created: bool = False
    bundles: list[str] = field(default_factory=list)
    catalog_image: str = ""  # installed from images: the CatalogSource's image

    @property
    def address(self) -> str:
        if self.catalog_image:
            return imagerun.service_address(self.catalog_source, self.namespace)
        return f"{process.LOOPBACK}:{self.port}"


def runs_dir(cluster: LocalCluster) -> Path:
    return control.olm_dir(cluster) / "runs"


def run_dir(cluster: LocalCluster, namespace: str, package: str) -> Path:
    return runs_dir(cluster) / namespace / package


def load_run(cluster: LocalCluster, namespace: str, package: str) -> Run | None:
    path = run_dir(cluster, namespace, package) / "run.json"
    try:
        return Run(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def save_run(cluster: LocalCluster, run: Run) -> None:
    directory = run_dir(cluster, run.namespace, run.package)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "run.json").write_text(json.dumps(asdict(run), indent=2), encoding="utf-8")


def all_runs(cluster: LocalCluster) -> list[Run]:
    found = []
    for path in sorted(runs_dir(cluster).glob("*/*/run.json")):
        run = load_run(cluster, path.parent.parent.name, path.parent.name)
        if run is not None:
            found.append(run)
    return found


def find_run(cluster: LocalCluster, namespace: str, package: str | None) -> Run:
    """The run of `package` in `namespace`, or the only run there when no package."""
    if package:
        run = load_run(cluster, namespace, package)
        if run is None:
            raise ConfigError(
                f"nothing was installed with `olm run-bundle` for {package} in {namespace}"
            )
        return run
    runs = [r for r in all_runs(cluster) if r.namespace == namespace]
    if len(runs) != 1:
        names = ", ".join(r.package for r in runs) or "none"
        raise ConfigError(f"pass --package: runs in {namespace}: {names}")
    return runs[0]


def addon_name(run: Run) -> str:
    """The name of the opm add-on serving the catalog of `run`'s current generation."""
    return f"opm-{run.namespace}-{run.package}-{run.generation}"


async def connect(cluster: LocalCluster) -> KubeClient:
    return await KubeClient.connect(kubeconfig=str(cluster.kubeconfig))
