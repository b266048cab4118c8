"""Bundles installed through OLM (v0): run-bundle, bundle-upgrade, approve.

A bundle image takes OLM's own path with a catalog image and a registry pod (see
`imagerun.py`). A bundle directory is installed like `operator-sdk run bundle` does,
but without images: the bundle becomes a file-based
catalog (`serve.write_catalog`), `opm serve` serves it on a loopback port, and a
CatalogSource of `sourceType: grpc` points OLM's catalog operator at that address. An
OperatorGroup (unless the namespace has a fitting one) and a Subscription follow; OLM
resolves the Subscription into an InstallPlan, creates the CRDs, the CSV and, from the
CSV, the Deployment, service account and RBAC.

Each run is recorded with its catalog and the opm add-on serving it (`runrecord.py`);
`bundle-upgrade` adds a bundle to that
catalog, starts a new opm on it, moves the CatalogSource to the new address (OLM then
finds the upgrade edge) and stops the old opm. Waiting for OLM to install is
`installwait.py`; status, kubeconfig and cleanup of an installed run are `installed.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from pathlib import Path

from runner.devtools.cluster.local import LocalCluster
from runner.devtools.olm import control, imagerun, installmode, report, serve
from runner.devtools.olm import olmobjects as model
from runner.devtools.olm import steps as api
from runner.devtools.olm.installwait import Outcome, wait_installed
from runner.devtools.olm.runrecord import (
    Run,
    addon_name,
    connect,
    find_run,
    load_run,
    run_dir,
    save_run,
)
from runner.errors import ConfigError
from runner.k8s import KubeClient

Progress = Callable[[str], None]


# -- run-bundle --------------------------------------------------------------------------


def _bundle_source(
    cluster: LocalCluster, source: str | Path, progress: Progress
) -> tuple[Path, str]:
    """The bundle directory and, when `source` is an image reference, that image."""
    if not imagerun.is_image_reference(str(source)):
        return Path(source), ""
    image = str(source)
    imagerun.registry_address(cluster)  # fail early when images cannot be served
    key = hashlib.sha256(image.encode()).hexdigest()[:12]
    target = control.olm_dir(cluster) / "bundle-images" / key
    return imagerun.pull_bundle(image, target, progress=progress), image


def run_bundle(
    cluster: LocalCluster,
    source: str | Path,
    *,
    namespace: str,
    install_mode: str | None = None,
    approval: str = "Automatic",
    channel: str | None = None,
    timeout: float = 300,
    skip_validation: bool = False,
    progress: Progress = print,
) -> Outcome:
    """Install the bundle directory or bundle image `source` into `namespace` through OLM."""
    control.require_running(cluster)
    if approval not in model.APPROVALS:
        raise ConfigError(f"--approval {approval!r}: one of {', '.join(model.APPROVALS)}")
    directory, bundle_image = _bundle_source(cluster, source, progress)
    bundle, csv = serve.load_checked(directory, skip_validation=skip_validation, warn=progress)
    package = serve.package_of(bundle)
    if load_run(cluster, namespace, package) is not None:
        raise ConfigError(
            f"{package} is already installed in {namespace} with `olm run-bundle`; use "
            "`olm bundle-upgrade` or `olm cleanup` first"
        )
    mode = installmode.choose(csv, install_mode)
    run = Run(
        namespace=namespace,
        package=package,
        channel=channel or serve.default_channel(bundle),
        approval=approval,
        install_mode=str(mode),
        catalog_source=model.catalog_source_name(package),
        subscription=model.subscription_name(package),
        generation=1,
    )
    here = run_dir(cluster, namespace, package)
    documents = serve.write_catalog(
        here / "catalog", bundle, package, channel=run.channel, bundle_image=bundle_image
    )
    run.bundles = serve.bundle_names(documents)
    if bundle_image:
        save_run(cluster, run)  # from here on, `olm cleanup` finds whatever was created
        run.catalog_image = imagerun.catalog_image(
            cluster, here / "catalog", package, progress=progress
        )
    else:
        run.opm = addon_name(run)
        save_run(cluster, run)
        run.port = serve.start(
            cluster, run.opm, here / "catalog", here / "serve", progress=progress
        )
    save_run(cluster, run)
    csv_name = str(csv["metadata"]["name"])
    progress(f"installing {csv_name} into {namespace} ({run.install_mode}, {approval})")
    return asyncio.run(_subscribe(cluster, run, csv_name, mode, timeout, progress))


async def _subscribe(
    cluster: LocalCluster,
    run: Run,
    csv_name: str,
    mode: installmode.InstallMode,
    timeout: float,
    progress: Progress,
) -> Outcome:
    client = await connect(cluster)
    try:
        namespace = run.namespace
        # From images, OLM's pods (the registry pod, bundle unpack Jobs) and the
        # operator's run on the real node; only the namespace can place the Jobs.
        annotations = imagerun.real_node_annotations() if run.catalog_image else None
        if await api.get(client, model.NAMESPACE, namespace, None) is None:
            await client.create(model.NAMESPACE, model.namespace(namespace, annotations))
            run.namespace_created = True
            save_run(cluster, run)
        elif annotations:
            await client.patch(
                model.NAMESPACE,
                name=namespace,
                namespace=None,
                body={"metadata": {"annotations": annotations}},
            )
        await _ensure_operator_group(client, cluster, run, mode)
        await _point_catalog_source(client, run, timeout=120)
        subscription = model.subscription(
            run.subscription,
            namespace,
            package=run.package,
            channel=run.channel,
            source=run.catalog_source,
            approval=run.approval,
            starting_csv=csv_name,
            config=imagerun.pod_placement() if run.catalog_image else None,
        )
        await api.apply(client, subscription)
        return await wait_installed(client, run, csv_name, timeout=timeout, progress=progress)
    finally:
        await client.close()


async def _ensure_operator_group(
    client: KubeClient, cluster: LocalCluster, run: Run, mode: installmode.InstallMode
) -> None:
    targets = mode.targets(run.namespace)
    groups = await api.listed(client, model.OPERATOR_GROUP, run.namespace)
    if not groups:
        group = model.operator_group(model.OPERATOR_GROUP_NAME, run.namespace, targets)
        await client.create(model.OPERATOR_GROUP, group)
        run.operator_group = model.OPERATOR_GROUP_NAME
        save_run(cluster, run)
        return
    if len(groups) > 1:
        names = ", ".join(g["metadata"]["name"] for g in groups)
        raise ConfigError(
            f"{run.namespace} has {len(groups)} OperatorGroups ({names}); OLM installs "
            "nothing into a namespace with more than one"
        )
    if not installmode.matches(groups[0], targets):
        found = (groups[0].get("spec") or {}).get("targetNamespaces") or "all namespaces"
        raise ConfigError(
            f"OperatorGroup {groups[0]['metadata']['name']} in {run.namespace} targets "
            f"{found}, which install mode {run.install_mode} does not fit"
        )


async def _point_catalog_source(client: KubeClient, run: Run, *, timeout: float) -> None:
    """Create or move the CatalogSource to `run.address` (or `run.catalog_image`); wait
    until OLM connected (to a registry pod of that image)."""
    source = model.catalog_source(
        run.catalog_source,
        run.namespace,
        address=run.address,
        image=run.catalog_image,
        pod_config=imagerun.pod_placement() if run.catalog_image else None,
        display_name=f"{run.package} (ansible-operator olm run-bundle)",
    )
    await api.apply(client, source)

    async def serving() -> bool:
        if not run.catalog_image:
            return True
        pods, _ = await client.list(
            model.POD,
            namespace=run.namespace,
            label_selector=f"olm.catalogSource={run.catalog_source}",
        )
        return any(model.pod_runs_image(pod, run.catalog_image) for pod in pods)

    async def connected() -> bool:
        found = await api.get(client, model.CATALOG_SOURCE, run.catalog_source, run.namespace)
        state = ((found or {}).get("status") or {}).get("connectionState") or {}
        ready = state.get("address") == run.address and state.get("lastObservedState") == "READY"
        return ready and await serving()

    await api.wait_for(
        connected,
        timeout=timeout,
        what=f"OLM's catalog operator to connect to CatalogSource {run.catalog_source} "
        f"at {run.address}",
    )


# -- bundle-upgrade, approve -------------------------------------------------------------


def bundle_upgrade(
    cluster: LocalCluster,
    source: str | Path,
    *,
    namespace: str,
    timeout: float = 300,
    skip_validation: bool = False,
    progress: Progress = print,
) -> Outcome:
    """Add a newer bundle to the served catalog; OLM upgrades along its `replaces`."""
    control.require_running(cluster)
    directory, bundle_image = _bundle_source(cluster, source, progress)
    bundle, csv = serve.load_checked(directory, skip_validation=skip_validation, warn=progress)
    package = serve.package_of(bundle)
    run = find_run(cluster, namespace, package)
    csv_name = str(csv["metadata"]["name"])
    if csv_name in run.bundles:
        raise ConfigError(f"{csv_name} is already in the catalog of {package} in {namespace}")
    if bool(bundle_image) != bool(run.catalog_image):
        raise ConfigError(
            f"{package} in {namespace} was installed from a bundle "
            f"{'image' if run.catalog_image else 'directory'}; upgrade it with one too"
        )
    here = run_dir(cluster, namespace, package)
    documents = serve.write_catalog(
        here / "catalog", bundle, package, channel=run.channel, bundle_image=bundle_image
    )
    run.bundles = serve.bundle_names(documents)
    old_opm = run.opm
    run.generation += 1
    if bundle_image:
        run.catalog_image = imagerun.catalog_image(
            cluster, here / "catalog", package, progress=progress
        )
    else:
        run.opm = addon_name(run)
        run.port = serve.start(
            cluster, run.opm, here / "catalog", here / "serve", progress=progress
        )
    save_run(cluster, run)
    return asyncio.run(_upgrade(cluster, run, csv_name, old_opm, timeout, progress))


async def _upgrade(
    cluster: LocalCluster,
    run: Run,
    csv_name: str,
    old_opm: str,
    timeout: float,
    progress: Progress,
) -> Outcome:
    client = await connect(cluster)
    try:
        sub = await api.get(client, model.SUBSCRIPTION, run.subscription, run.namespace)
        installed = ((sub or {}).get("status") or {}).get("installedCSV")
        started = time.monotonic()
        await _point_catalog_source(client, run, timeout=120)
        if old_opm:
            cluster.stop_addon(old_opm)
        progress(f"catalog of {run.package} now offers {csv_name}; waiting for OLM to upgrade")
        outcome = await wait_installed(
            client,
            run,
            csv_name,
            timeout=timeout,
            progress=progress,
            replaced=str(installed) if installed and installed != csv_name else None,
        )
        total = time.monotonic() - started
        return Outcome(outcome.csv, outcome.state, total, outcome.install_plan)
    finally:
        await client.close()


def approve(
    cluster: LocalCluster,
    *,
    namespace: str,
    package: str | None = None,
    timeout: float = 300,
    progress: Progress = print,
) -> Outcome:
    """Approve the Subscription's pending InstallPlan and wait for its CSV."""
    control.require_running(cluster)
    run = find_run(cluster, namespace, package)
    return asyncio.run(_approve(cluster, run, timeout, progress))


async def _approve(cluster: LocalCluster, run: Run, timeout: float, progress: Progress) -> Outcome:
    client = await connect(cluster)
    try:
        sub = await api.get(client, model.SUBSCRIPTION, run.subscription, run.namespace)
        status = (sub or {}).get("status") or {}
        plan_name = (status.get("installPlanRef") or {}).get("name")
        plan = (
            await api.get(client, model.INSTALL_PLAN, str(plan_name), run.namespace)
            if plan_name
            else None
        )
        if plan is None or not report.waiting_for_approval(sub, plan):
            raise ConfigError(
                f"no InstallPlan waits for approval in {run.namespace} for {run.package}"
            )
        csv_name = str((plan["spec"].get("clusterServiceVersionNames") or ["?"])[0])
        started = time.monotonic()
        await client.patch(
            model.INSTALL_PLAN,
            name=str(plan_name),
            namespace=run.namespace,
            body={"spec": {"approved": True}},
        )
        progress(f"approved InstallPlan {plan_name} for {csv_name}")
        installed = status.get("installedCSV")
        outcome = await wait_installed(
            client,
            run,
            csv_name,
            timeout=timeout,
            progress=progress,
            replaced=str(installed) if installed and installed != csv_name else None,
        )
        return Outcome(outcome.csv, outcome.state, time.monotonic() - started, outcome.install_plan)
    finally:
        await client.close()
