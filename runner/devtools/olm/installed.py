"""What is done with a bundle installed with `olm run-bundle` once it is there: its
status as OLM reports it, a kubeconfig for the service account OLM made for it, and
`cleanup`, which removes everything the run created.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from runner.devtools.cluster.local import LocalCluster
from runner.devtools.olm import control, report, serve, tokens
from runner.devtools.olm import olmobjects as model
from runner.devtools.olm import steps as api
from runner.devtools.olm.installwait import objects, phase, status_lines
from runner.devtools.olm.runrecord import Run, all_runs, connect, find_run, run_dir
from runner.errors import ConfigError
from runner.k8s import KubeClient

Progress = Callable[[str], None]


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
    client = await connect(cluster)
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
    client = await connect(cluster)
    try:
        sub = await api.get(client, model.SUBSCRIPTION, run.subscription, run.namespace)
        status_ = (sub or {}).get("status") or {}
        csv_name = status_.get("currentCSV") or status_.get("installedCSV") or run.bundles[-1]
        sub, plan, csv = await objects(client, run, str(csv_name))
    finally:
        await client.close()
    lines += ["  " + line for line in status_lines(sub, plan, csv)]
    found = report.problem(sub, plan, csv)
    if found is not None:
        lines.append(f"  OLM reports: {found.text}")
    return lines, found is None and phase(csv) == report.CSV_SUCCEEDED and serving == "running"


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
    client = await connect(cluster)
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
