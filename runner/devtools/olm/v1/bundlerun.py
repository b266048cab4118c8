"""Bundle images installed and upgraded through OLM v1: `olm run-bundle --v1`,
`olm bundle-upgrade --v1`, `olm cleanup --v1`, and the v1 part of `olm status`.

`run-bundle --v1 <bundle image>` reads the bundle image (as for OLM v0), checks it with
the `olm-v1` rule suite, writes a file-based catalog with the bundle (its `image` set to
the bundle image), builds the catalog image and pushes it to the cluster's registry,
then creates a `ClusterCatalog` naming that image and, once catalogd serves it, a
`ClusterExtension` for the package and channel. operator-controller resolves the bundle
from catalogd, pulls the bundle image itself, runs its preflight checks (the CRD
upgrade-safety check among them) and applies the manifests. The namespace gets the real
node's placement annotations (see imagerun.py), so the operator's pod runs there.

`bundle-upgrade --v1` adds the newer bundle to the catalog as the channel head, pushes
the new catalog image and moves the ClusterCatalog to it; operator-controller then
upgrades along the catalog's edges, or reports why it will not (a preflight refusal is
shown with operator-controller's message).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from runner.devtools.cluster import registry
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.olm import imagerun, serve
from runner.devtools.olm import olmobjects as model
from runner.devtools.olm import steps as api
from runner.devtools.olm.steps import OLMError
from runner.devtools.olm.v1 import install as v1control
from runner.devtools.olm.v1 import objects as v1model
from runner.devtools.packaging.findings import has_errors
from runner.devtools.packaging.loader import LoadedBundle, load_bundle
from runner.devtools.packaging.validate import validate_loaded
from runner.errors import ClusterError, ConfigError
from runner.k8s import KubeClient
from runner.util.progress import Ticker

Progress = Callable[[str], None]
Obj = dict[str, Any]

# operator-controller retries an error (a failed preflight, a pull) with backoff and
# reports it as Progressing/Retrying; one that lasts this long fails the wait.
SETTLE_SECONDS = 30.0


@dataclass
class V1Run:
    """One package installed with `olm run-bundle --v1`."""

    package: str
    namespace: str
    channel: str
    catalog: str
    extension: str
    catalog_image: str = ""
    namespace_created: bool = False
    bundles: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class V1Outcome:
    bundle: str
    version: str
    seconds: float


def runs_dir(cluster: LocalCluster) -> Path:
    return v1control.v1_dir(cluster) / "runs"


def _run_file(cluster: LocalCluster, package: str) -> Path:
    return runs_dir(cluster) / package / "run.json"


def load_run(cluster: LocalCluster, package: str) -> V1Run | None:
    try:
        data = json.loads(_run_file(cluster, package).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return V1Run(**data)


def save_run(cluster: LocalCluster, run: V1Run) -> None:
    path = _run_file(cluster, run.package)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(run), indent=2), encoding="utf-8")


def all_runs(cluster: LocalCluster) -> list[V1Run]:
    found = []
    for path in sorted(runs_dir(cluster).glob("*/run.json")):
        run = load_run(cluster, path.parent.name)
        if run is not None:
            found.append(run)
    return found


def find_run(cluster: LocalCluster, package: str | None) -> V1Run:
    runs = all_runs(cluster)
    if package is not None:
        runs = [r for r in runs if r.package == package]
    if len(runs) == 1:
        return runs[0]
    if not runs:
        which = f" of {package}" if package else ""
        raise ConfigError(f"no `olm run-bundle --v1`{which} on this cluster")
    names = ", ".join(r.package for r in runs)
    raise ConfigError(f"several packages installed through OLM v1 ({names}); pass --package")


async def _client(cluster: LocalCluster) -> KubeClient:
    return await KubeClient.connect(kubeconfig=str(cluster.kubeconfig))


def load_checked(
    directory: Path, *, skip_validation: bool, progress: Progress
) -> tuple[LoadedBundle, Obj]:
    """The bundle and its CSV, checked with the `olm-v1` suite (errors stop here unless
    `skip_validation`, to see what operator-controller says)."""
    bundle = load_bundle(directory)
    findings = validate_loaded(bundle, suite="olm-v1")
    if has_errors(findings):
        problems = "\n".join(str(f) for f in findings if f.level == "error")
        if not skip_validation:
            raise ConfigError(
                f"the bundle does not fit OLM v1 (pass --skip-validation to hand it to "
                f"OLM v1 anyway):\n{problems}"
            )
        progress(f"warning: the bundle does not fit OLM v1; handing it over anyway:\n{problems}")
    if bundle.csv is None:
        raise ConfigError(f"{directory}: needs exactly one ClusterServiceVersion")
    return bundle, bundle.csv


def _registry_address(cluster: LocalCluster) -> str:
    found = registry.info(cluster)
    if found is None:
        raise ClusterError(
            "OLM v1 installs bundle images: it needs the cluster's registry and a real node "
            f"(`ansible-operator cluster up --registry --real-node`; state {cluster.state_dir})"
        )
    conf = v1control.Files(v1control.v1_dir(cluster)).registries_conf
    known = conf.read_text(encoding="utf-8") if conf.is_file() else ""
    if not found.tls and f'"{found.address}"' not in known:
        raise ClusterError(
            f"OLM v1 was started before the registry at {found.address}: run "
            "`ansible-operator olm install --v1` again (it restarts both components)"
        )
    return found.address


def _pull(cluster: LocalCluster, image: str, progress: Progress) -> Path:
    if not imagerun.is_image_reference(image):
        raise ConfigError(
            f"{image}: OLM v1 installs bundle images, not directories; build and push the "
            "bundle image (`bundle.Dockerfile`) to the cluster's registry first"
        )
    key = hashlib.sha256(image.encode()).hexdigest()[:12]
    target = v1control.v1_dir(cluster) / "bundle-images" / key
    return imagerun.pull_bundle(image, target, progress=progress)


def _pulled_bundle(
    cluster: LocalCluster, image: str, *, skip_validation: bool, progress: Progress
) -> tuple[str, LoadedBundle, Obj]:
    """Once OLM v1 and the registry are known to serve: the registry's address, and the
    bundle image's bundle and CSV, pulled and checked."""
    v1control.require_running(cluster)
    address = _registry_address(cluster)
    bundle, csv = load_checked(
        _pull(cluster, image, progress), skip_validation=skip_validation, progress=progress
    )
    return address, bundle, csv


def _write_catalog(cluster: LocalCluster, run: V1Run, bundle: LoadedBundle, image: str) -> Path:
    """Write the run's file-based catalog with `bundle` (as `image`) added; its directory."""
    catalog = runs_dir(cluster) / run.package / "catalog"
    documents = serve.write_catalog(
        catalog, bundle, run.package, channel=run.channel, bundle_image=image
    )
    run.bundles = serve.bundle_names(documents)
    return catalog


def _csv_version(csv: Obj) -> str:
    return str((csv.get("spec") or {}).get("version") or "")


def run_bundle(
    cluster: LocalCluster,
    image: str,
    *,
    namespace: str,
    channel: str | None = None,
    timeout: float = 300,
    skip_validation: bool = False,
    progress: Progress = print,
) -> V1Outcome:
    """Install the bundle image's package into `namespace` through OLM v1."""
    address, bundle, csv = _pulled_bundle(
        cluster, image, skip_validation=skip_validation, progress=progress
    )
    package = serve.package_of(bundle)
    if load_run(cluster, package) is not None:
        raise ConfigError(
            f"{package} is already installed with `olm run-bundle --v1`; use "
            "`olm bundle-upgrade --v1` or `olm cleanup --v1` first"
        )
    run = V1Run(
        package=package,
        namespace=namespace,
        channel=channel or serve.default_channel(bundle),
        catalog=v1model.catalog_name(package),
        extension=v1model.extension_name(package),
    )
    catalog = _write_catalog(cluster, run, bundle, image)
    save_run(cluster, run)  # from here on, `olm cleanup --v1` finds whatever was created
    run.catalog_image = imagerun.catalog_image(
        cluster, catalog, package, address=address, progress=progress
    )
    save_run(cluster, run)
    version = _csv_version(csv)
    progress(f"installing {csv['metadata']['name']} into {namespace} through OLM v1")
    return asyncio.run(_install(cluster, run, version, timeout, progress))


async def _install(
    cluster: LocalCluster, run: V1Run, version: str, timeout: float, progress: Progress
) -> V1Outcome:
    started = time.monotonic()
    client = await _client(cluster)
    try:
        if await api.get(client, model.NAMESPACE, run.namespace, None) is None:
            body = model.namespace(run.namespace, imagerun.real_node_annotations())
            await client.create(model.NAMESPACE, body)
            run.namespace_created = True
            save_run(cluster, run)
        else:
            annotations = imagerun.real_node_annotations()
            await client.patch(
                model.NAMESPACE,
                name=run.namespace,
                namespace=None,
                body={"metadata": {"annotations": annotations}},
            )
        await _point_catalog(client, run, timeout=timeout, progress=progress)
        extension = v1model.cluster_extension(
            run.extension,
            package=run.package,
            namespace=run.namespace,
            channel=run.channel,
            catalog=run.catalog,
        )
        progress(f"creating ClusterExtension {run.extension}")
        await api.apply(client, extension)
        return await _wait_installed(client, run, version, started, timeout)
    finally:
        await client.close()


async def _point_catalog(
    client: KubeClient, run: V1Run, *, timeout: float, progress: Progress
) -> None:
    progress(f"ClusterCatalog {run.catalog} -> {run.catalog_image}")
    await api.apply(client, v1model.cluster_catalog(run.catalog, run.catalog_image))

    async def serving() -> bool:
        found = await api.get(client, v1model.CLUSTER_CATALOG, run.catalog, None)
        return v1model.catalog_serving(found, run.catalog_image)

    with Ticker(f"waiting for catalogd to serve {run.catalog}"):
        try:
            await api.wait_for(serving, timeout=timeout, what=f"ClusterCatalog {run.catalog}")
        except OLMError as exc:
            found = await api.get(client, v1model.CLUSTER_CATALOG, run.catalog, None)
            detail = "\n".join(v1model.status_lines("ClusterCatalog", found or {}))
            raise OLMError(f"{exc}\n{detail}") from exc


async def _wait_installed(
    client: KubeClient, run: V1Run, version: str, started: float, timeout: float
) -> V1Outcome:
    """Until the extension reports `version` installed; fail with operator-controller's
    message when it keeps retrying (a refused preflight, a bundle it cannot pull)."""
    retrying_since: float | None = None
    last = v1model.extension_state(None)
    deadline = started + timeout
    with Ticker(f"waiting for ClusterExtension {run.extension} to install {version}"):
        while True:
            found = await api.get(client, v1model.CLUSTER_EXTENSION, run.extension, None)
            last = v1model.extension_state(found)
            if last.installed and last.installed_version == version and not last.retrying:
                return V1Outcome(str(last.installed_bundle), version, time.monotonic() - started)
            now = time.monotonic()
            if last.retrying:
                retrying_since = retrying_since or now
                if last.refused or now - retrying_since > SETTLE_SECONDS:
                    raise OLMError(
                        f"OLM v1 did not install {run.package} {version}: "
                        f"{last.progressing_reason}: {last.message}"
                    )
            else:
                retrying_since = None
            if now > deadline:
                raise OLMError(
                    f"timed out after {timeout:.0f} s waiting for ClusterExtension "
                    f"{run.extension} to install {version} (installed: "
                    f"{last.installed_version or 'nothing'}; {last.message})"
                )
            await asyncio.sleep(0.5)


def bundle_upgrade(
    cluster: LocalCluster,
    image: str,
    *,
    package: str | None = None,
    timeout: float = 300,
    skip_validation: bool = False,
    progress: Progress = print,
) -> V1Outcome:
    """Add a newer bundle image to the run's catalog; OLM v1 upgrades to it."""
    address, bundle, csv = _pulled_bundle(
        cluster, image, skip_validation=skip_validation, progress=progress
    )
    run = find_run(cluster, package or serve.package_of(bundle))
    csv_name = str(csv["metadata"]["name"])
    if csv_name in run.bundles:
        raise ConfigError(f"{csv_name} is already in the catalog of {run.package}")
    catalog = _write_catalog(cluster, run, bundle, image)
    run.catalog_image = imagerun.catalog_image(
        cluster, catalog, run.package, address=address, progress=progress
    )
    save_run(cluster, run)
    version = _csv_version(csv)
    return asyncio.run(_upgrade(cluster, run, version, timeout, progress))


async def _upgrade(
    cluster: LocalCluster, run: V1Run, version: str, timeout: float, progress: Progress
) -> V1Outcome:
    started = time.monotonic()
    client = await _client(cluster)
    try:
        await _point_catalog(client, run, timeout=timeout, progress=progress)
        return await _wait_installed(client, run, version, started, timeout)
    finally:
        await client.close()


def cleanup(cluster: LocalCluster, package: str | None, *, progress: Progress = print) -> None:
    """Delete the ClusterExtension (operator-controller removes what it installed, the
    CRDs included), the ClusterCatalog and the namespace if `run-bundle` created it."""
    run = find_run(cluster, package)
    if cluster.is_up():
        asyncio.run(_cleanup(cluster, run, progress))
    shutil.rmtree(runs_dir(cluster) / run.package, ignore_errors=True)


async def _cleanup(cluster: LocalCluster, run: V1Run, progress: Progress) -> None:
    client = await _client(cluster)
    try:
        # The CRDs go after the extension, each once its custom resources are removed;
        # `cleanup` returns when they are gone, so a new install never meets a dying CRD.
        owned = f"{v1model.OWNER_NAME_LABEL}={run.extension}"
        crds = await api.listed(client, model.CRD, None, label_selector=owned)
        if await api.delete(client, v1model.CLUSTER_EXTENSION, run.extension, None):
            progress(f"deleting ClusterExtension {run.extension}")
            if not await api.wait_gone(
                client, v1model.CLUSTER_EXTENSION, run.extension, None, timeout=180
            ):
                raise OLMError(
                    f"ClusterExtension {run.extension} was not removed within 180 s; "
                    "see operator-controller's log (`olm status`)"
                )
        for crd in crds:
            name = str(crd["metadata"]["name"])
            if not await api.wait_gone(client, model.CRD, name, None, timeout=120):
                raise OLMError(
                    f"CustomResourceDefinition {name} was not removed within 120 s; "
                    "are custom resources with finalizers left?"
                )
        if await api.delete(client, v1model.CLUSTER_CATALOG, run.catalog, None):
            progress(f"deleting ClusterCatalog {run.catalog}")
            await api.wait_gone(client, v1model.CLUSTER_CATALOG, run.catalog, None, timeout=60)
        if run.namespace_created and await api.delete(client, model.NAMESPACE, run.namespace, None):
            progress(f"deleting namespace {run.namespace}")
    finally:
        await client.close()


def status(cluster: LocalCluster) -> tuple[list[str], bool]:
    """OLM v1's processes, every ClusterCatalog and ClusterExtension with its conditions,
    and whether everything runs and every extension is installed."""
    lines = v1control.status_lines(cluster)
    ok = all(v1control.healthy(cluster).values())
    if not cluster.is_up():
        return [*lines, f"no running cluster in {cluster.state_dir}"], False
    catalogs, extensions = asyncio.run(_objects(cluster))
    for catalog in catalogs:
        lines += v1model.status_lines("ClusterCatalog", catalog)
        ok = ok and v1model.is_true(catalog, "Serving")
    for extension in extensions:
        lines += v1model.status_lines("ClusterExtension", extension)
        ok = ok and v1model.healthy_extension(extension)
    if not catalogs and not extensions:
        lines.append("  no ClusterCatalog or ClusterExtension")
    return lines, ok


async def _objects(cluster: LocalCluster) -> tuple[list[Obj], list[Obj]]:
    client = await _client(cluster)
    try:
        catalogs = await api.listed(client, v1model.CLUSTER_CATALOG, None)
        extensions = await api.listed(client, v1model.CLUSTER_EXTENSION, None)
        return catalogs, extensions
    finally:
        await client.close()
