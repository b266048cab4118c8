"""Bundles installed through OLM: run-bundle, bundle-upgrade, approve, cleanup.

A bundle image takes OLM's own path with a catalog image and a registry pod (see
`imagerun.py`). A bundle directory is installed like `operator-sdk run bundle` does,
but without images: the bundle becomes a file-based
catalog (`serve.write_catalog`), `opm serve` serves it on a loopback port, and a
CatalogSource of `sourceType: grpc` points OLM's catalog operator at that address. An
OperatorGroup (unless the namespace has a fitting one) and a Subscription follow; OLM
resolves the Subscription into an InstallPlan, creates the CRDs, the CSV and, from the
CSV, the Deployment, service account and RBAC.

Each run is recorded in `<cluster state>/olm/runs/<namespace>/<package>/run.json` with
its catalog and the opm add-on serving it; `bundle-upgrade` adds a bundle to that
catalog, starts a new opm on it, moves the CatalogSource to the new address (OLM then
finds the upgrade edge) and stops the old opm.
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

import yaml

from runner.cluster import process
from runner.cluster.local import LocalCluster
from runner.errors import ConfigError
from runner.k8s import KubeClient
from runner.olm import api, control, imagerun, installmode, model, report, serve, tokens
from runner.olm.api import OLMError
from runner.progress import Ticker

Progress = Callable[[str], None]
Obj = dict[str, Any]

# A problem OLM reports that is not (yet) final, e.g. a requirement not met, fails the
# wait once it has lasted this long (unless the problem says how long it may take).
SETTLE_SECONDS = 45.0


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


@dataclass(frozen=True)
class Outcome:
    """Where an installation stands when `run-bundle`, `bundle-upgrade` or `approve` return."""

    csv: str
    state: str  # "Succeeded" or "RequiresApproval"
    seconds: float
    install_plan: str | None = None


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


def _addon_name(run: Run) -> str:
    return f"opm-{run.namespace}-{run.package}-{run.generation}"


async def _client(cluster: LocalCluster) -> KubeClient:
    return await KubeClient.connect(kubeconfig=str(cluster.kubeconfig))


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
        run.opm = _addon_name(run)
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
    client = await _client(cluster)
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


async def _objects(
    client: KubeClient, run: Run, csv_name: str
) -> tuple[Obj | None, Obj | None, Obj | None]:
    sub = await api.get(client, model.SUBSCRIPTION, run.subscription, run.namespace)
    plan_name = (((sub or {}).get("status") or {}).get("installPlanRef") or {}).get("name")
    plan = None
    if plan_name:
        plan = await api.get(client, model.INSTALL_PLAN, str(plan_name), run.namespace)
    csv = await api.get(client, model.CSV, csv_name, run.namespace)
    return sub, plan, csv


def _phase(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


async def wait_installed(
    client: KubeClient,
    run: Run,
    csv_name: str,
    *,
    timeout: float,
    progress: Progress,
    replaced: str | None = None,
) -> Outcome:
    """Wait until CSV `csv_name` is Succeeded, its InstallPlan Complete (and `replaced`
    gone), or the InstallPlan waits for approval; OLMError with OLM's reason when it
    fails."""
    with Ticker(f"waiting for CSV {csv_name}") as ticker:
        wrapped = ticker.wrap(progress)
        return await _wait_installed(
            client, run, csv_name, timeout=timeout, progress=wrapped, replaced=replaced
        )


async def _wait_installed(
    client: KubeClient,
    run: Run,
    csv_name: str,
    *,
    timeout: float,
    progress: Progress,
    replaced: str | None,
) -> Outcome:
    started = time.monotonic()
    seen: dict[str, str] = {}
    problem_since: float | None = None
    while True:
        sub, plan, csv = await _objects(client, run, csv_name)
        old = await api.get(client, model.CSV, replaced, run.namespace) if replaced else None
        for name, obj in ((csv_name, csv), (replaced, old)):
            if name and obj is not None and seen.get(name) != _phase(obj):
                seen[name] = _phase(obj)
                progress(f"CSV {name}: {seen[name] or '(no phase yet)'}")
        plan_csvs = ((plan or {}).get("spec") or {}).get("clusterServiceVersionNames") or []
        elapsed = time.monotonic() - started
        plan_name = str(plan["metadata"]["name"]) if plan else None
        # The InstallPlan turns Complete a moment after the CSV it created Succeeded.
        plan_done = csv_name not in plan_csvs or _phase(plan) == "Complete"
        if _phase(csv) == report.CSV_SUCCEEDED and old is None and plan_done:
            progress(f"{csv_name} Succeeded after {elapsed:.1f} s")
            return Outcome(csv_name, report.CSV_SUCCEEDED, elapsed, plan_name)
        if csv_name in plan_csvs and report.waiting_for_approval(sub, plan):
            progress(
                f"InstallPlan {plan_name} for {csv_name} waits for approval: "
                f"`ansible-operator olm approve --namespace {run.namespace}`"
            )
            return Outcome(csv_name, "RequiresApproval", elapsed, plan_name)
        found = report.problem(sub, plan if csv_name in plan_csvs else None, csv)
        if found is None:
            problem_since = None
        else:
            problem_since = problem_since or time.monotonic()
            patience = found.settle_seconds or SETTLE_SECONDS
            if found.final or time.monotonic() - problem_since > patience:
                raise OLMError(f"OLM reports: {found.text}")
        if elapsed > timeout:
            lines = _lines(sub, plan, csv)
            raise OLMError(
                f"{csv_name} not Succeeded after {timeout:.0f} s; OLM says:\n" + "\n".join(lines)
            )
        await asyncio.sleep(0.5)


def _lines(sub: Obj | None, plan: Obj | None, csv: Obj | None) -> list[str]:
    lines: list[str] = []
    if sub is not None:
        lines += report.subscription_lines(sub)
    if plan is not None:
        lines += report.install_plan_lines(plan)
    if csv is not None:
        lines += report.csv_lines(csv)
    return lines or ["(no Subscription, InstallPlan or CSV yet)"]


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
        run.opm = _addon_name(run)
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
    client = await _client(cluster)
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
    client = await _client(cluster)
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


# -- cleanup -----------------------------------------------------------------------------


def cleanup(
    cluster: LocalCluster,
    namespace: str,
    package: str | None = None,
    *,
    keep_crds: bool = False,
    progress: Progress = print,
) -> None:
    """Remove what `run-bundle` created: Subscription, CSVs (and so what OLM made from
    them), the CRDs they own (unless `keep_crds`), CatalogSource, our OperatorGroup, the
    namespace if we created it, the opm process and the run's state."""
    run = find_run(cluster, namespace, package)
    if cluster.is_up():
        asyncio.run(_cleanup(cluster, run, keep_crds, progress))
    for name in [
        a for a in cluster.addons() if a.startswith(f"opm-{run.namespace}-{run.package}-")
    ]:
        cluster.stop_addon(name)
    shutil.rmtree(run_dir(cluster, run.namespace, run.package), ignore_errors=True)
    progress(f"cleaned up {run.package} in {run.namespace}")


async def _cleanup(cluster: LocalCluster, run: Run, keep_crds: bool, progress: Progress) -> None:
    client = await _client(cluster)
    try:
        sub = await api.get(client, model.SUBSCRIPTION, run.subscription, run.namespace)
        status = (sub or {}).get("status") or {}
        names = set(run.bundles) | {
            str(status[k]) for k in ("installedCSV", "currentCSV") if status.get(k)
        }
        csvs = [
            c for n in sorted(names) if (c := await api.get(client, model.CSV, n, run.namespace))
        ]
        crds = sorted(
            {
                str(owned.get("name"))
                for csv in csvs
                for owned in ((csv.get("spec") or {}).get("customresourcedefinitions") or {}).get(
                    "owned"
                )
                or []
            }
        )
        await api.delete(client, model.SUBSCRIPTION, run.subscription, run.namespace)
        for csv in csvs:
            name = csv["metadata"]["name"]
            progress(f"deleting CSV {run.namespace}/{name}")
            await api.delete(client, model.CSV, name, run.namespace)
        for csv in csvs:
            name = csv["metadata"]["name"]
            if not await api.wait_gone(client, model.CSV, name, run.namespace, timeout=60):
                progress(f"CSV {name} still there after 60 s; removing its finalizers")
                await client.patch(
                    model.CSV,
                    name=name,
                    namespace=run.namespace,
                    body={"metadata": {"finalizers": None}},
                )
        # `names`, not only the CSVs left: a replaced CSV's objects may outlive it.
        await _delete_owned_cluster_rbac(client, run, names, progress)
        await api.delete(client, model.CATALOG_SOURCE, run.catalog_source, run.namespace)
        if run.operator_group:
            await api.delete(client, model.OPERATOR_GROUP, run.operator_group, run.namespace)
        if not keep_crds:
            for crd in crds:
                if await api.delete(client, model.CRD, crd, None):
                    progress(f"deleting CRD {crd}")
        if run.namespace_created and await api.delete(client, model.NAMESPACE, run.namespace, None):
            progress(f"deleting namespace {run.namespace}")
    finally:
        await client.close()


async def _delete_owned_cluster_rbac(
    client: KubeClient, run: Run, csv_names: set[str], progress: Progress
) -> None:
    """ClusterRoles and -Bindings OLM labelled as owned by the run's CSVs (the bundle's
    own cluster-scoped manifests among them), which OLM's garbage collection removes
    only some time after the CSVs are gone: `cleanup` leaves nothing behind."""
    # They carry only `olm.managed` and `olm.owner` (the CSV's name), no namespace.
    selector = "olm.managed=true"
    for gvk in (model.CLUSTER_ROLE_BINDING, model.CLUSTER_ROLE):
        found, _ = await client.list(gvk, namespace=None, label_selector=selector)
        for obj in found:
            owner = (obj["metadata"].get("labels") or {}).get("olm.owner")
            if owner in csv_names and await api.delete(client, gvk, obj["metadata"]["name"], None):
                progress(f"deleting {gvk.kind} {obj['metadata']['name']}")


# -- status, kubeconfig ------------------------------------------------------------------


def status(cluster: LocalCluster, *, namespace: str | None = None) -> tuple[list[str], bool]:
    """OLM's processes, then every run (in `namespace`): the Subscription, InstallPlan
    and CSV as OLM reports them; and whether everything is healthy and Succeeded."""
    lines = control.status_lines(cluster)
    health = control.healthy(cluster)
    ok = all(health.values())
    runs = [r for r in all_runs(cluster) if namespace is None or r.namespace == namespace]
    if not runs:
        lines.append("no bundles installed with `olm run-bundle`")
        return lines, ok
    if not cluster.is_up():
        return [*lines, f"no running cluster in {cluster.state_dir}"], False
    for run in runs:
        run_lines, run_ok = asyncio.run(_run_status(cluster, run))
        lines += ["", *run_lines]
        ok = ok and run_ok
    return lines, ok


async def _run_status(cluster: LocalCluster, run: Run) -> tuple[list[str], bool]:
    if run.catalog_image:
        serving = "running"  # OLM runs the registry pod; its problems show as OLM's
        where = f"image {run.catalog_image} (registry pod at {run.address})"
    else:
        serving = "running" if serve.alive(cluster, run.opm) else "NOT RUNNING"
        where = f"served by opm on {run.address} ({serving})"
    lines = [
        f"{run.package} in {run.namespace} ({run.install_mode}): catalog "
        f"{run.catalog_source} {where}; bundles {', '.join(run.bundles)}"
    ]
    client = await _client(cluster)
    try:
        sub = await api.get(client, model.SUBSCRIPTION, run.subscription, run.namespace)
        status_ = (sub or {}).get("status") or {}
        csv_name = status_.get("currentCSV") or status_.get("installedCSV") or run.bundles[-1]
        sub, plan, csv = await _objects(client, run, str(csv_name))
    finally:
        await client.close()
    lines += ["  " + line for line in _lines(sub, plan, csv)]
    found = report.problem(sub, plan, csv)
    if found is not None:
        lines.append(f"  OLM reports: {found.text}")
    return lines, found is None and _phase(csv) == report.CSV_SUCCEEDED and serving == "running"


def service_account_kubeconfig(
    cluster: LocalCluster,
    *,
    namespace: str,
    output: Path,
    package: str | None = None,
    service_account: str | None = None,
    seconds: int = 3600,
) -> tuple[Path, str]:
    """Write a kubeconfig for the service account OLM created for the installed CSV's
    Deployment (or `service_account`); return its path and the account name."""
    run = find_run(cluster, namespace, package)
    return asyncio.run(_write_kubeconfig(cluster, run, output, service_account, seconds))


async def _write_kubeconfig(
    cluster: LocalCluster, run: Run, output: Path, service_account: str | None, seconds: int
) -> tuple[Path, str]:
    client = await _client(cluster)
    try:
        sub = await api.get(client, model.SUBSCRIPTION, run.subscription, run.namespace)
        installed = ((sub or {}).get("status") or {}).get("installedCSV")
        if not service_account:
            csv = (
                await api.get(client, model.CSV, str(installed), run.namespace)
                if installed
                else None
            )
            if csv is None:
                raise ConfigError(f"no CSV installed for {run.package} in {run.namespace} yet")
            service_account = model.deployment_service_accounts(csv)[0]
        token = await api.service_account_token(
            client, run.namespace, service_account, seconds=seconds
        )
    finally:
        await client.close()
    admin = yaml.safe_load(cluster.kubeconfig.read_text(encoding="utf-8"))
    config = tokens.service_account_kubeconfig(
        admin, namespace=run.namespace, service_account=service_account, token=token
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    output.chmod(0o600)
    return output, service_account
