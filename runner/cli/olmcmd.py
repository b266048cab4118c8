"""`ansible-operator olm ...` (thin: parse, call `control`, `bundles` or `installed`, print)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import ConfigError

if TYPE_CHECKING:
    from runner.devtools.cluster.local import LocalCluster


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _cluster(args: argparse.Namespace) -> LocalCluster:
    from runner.devtools.cluster.layout import default_state_dir
    from runner.devtools.cluster.local import LocalCluster

    state_dir = Path(args.state_dir).resolve() if args.state_dir else default_state_dir()
    return LocalCluster(state_dir)


def dispatch(args: argparse.Namespace) -> int:
    from runner.devtools.olm import bundles, control, installed, runrecord

    cluster = _cluster(args)
    action = args.action
    if getattr(args, "v1", False):
        return _dispatch_v1(cluster, args)
    if action == "status":
        return _status(cluster, args)
    if action in ("cleanup", "bundle-upgrade", "approve", "kubeconfig") and not args.namespace:
        raise ConfigError(f"olm {action}: --namespace is required (OLM v0)")
    if action == "run-bundle" and not args.namespace:
        raise ConfigError("olm run-bundle: --namespace is required")
    if action == "install":
        control.install(cluster, progress=_progress)
        return 0
    if action == "uninstall":
        for run in runrecord.all_runs(cluster):
            installed.cleanup(cluster, run.namespace, run.package, progress=_progress)
        control.uninstall(cluster, progress=_progress)
        return 0
    if action in ("run-bundle", "bundle-upgrade", "approve"):
        if action == "run-bundle":
            outcome = bundles.run_bundle(
                cluster,
                args.bundle,
                namespace=args.namespace,
                install_mode=args.install_mode,
                approval=args.approval,
                channel=args.channel,
                timeout=args.timeout,
                skip_validation=args.skip_validation,
                progress=_progress,
            )
        elif action == "bundle-upgrade":
            outcome = bundles.bundle_upgrade(
                cluster,
                args.bundle,
                namespace=args.namespace,
                timeout=args.timeout,
                skip_validation=args.skip_validation,
                progress=_progress,
            )
        else:
            outcome = bundles.approve(
                cluster,
                namespace=args.namespace,
                package=args.package,
                timeout=args.timeout,
                progress=_progress,
            )
        print(f"{outcome.csv} {outcome.state} ({outcome.seconds:.1f} s)")
        return 0
    if action == "cleanup":
        installed.cleanup(
            cluster, args.namespace, args.package, keep_crds=args.keep_crds, progress=_progress
        )
        return 0
    if action == "kubeconfig":
        output = Path(args.output) if args.output else None
        if output is None:
            output = control.olm_dir(cluster) / "kubeconfigs" / f"{args.namespace}.kubeconfig"
        path, account = installed.service_account_kubeconfig(
            cluster,
            namespace=args.namespace,
            output=output,
            package=args.package,
            service_account=args.service_account,
            seconds=args.duration,
        )
        _progress(f"kubeconfig for system:serviceaccount:{args.namespace}:{account}")
        print(path)
        return 0
    raise ConfigError(f"unknown olm action {action!r}")


def _status(cluster: LocalCluster, args: argparse.Namespace) -> int:
    """OLM v0's status, and OLM v1's when it is installed (either, or both)."""
    from runner.devtools.olm import control, installed
    from runner.devtools.olm.v1 import bundlerun as v1run
    from runner.devtools.olm.v1 import install as v1control

    lines: list[str] = []
    ok = True
    v0 = bool(control.load_ports(cluster)) or any(n in cluster.addons() for n in control.OPERATORS)
    v1 = v1control.installed(cluster)
    if v0 or not v1:
        lines, ok = installed.status(cluster, namespace=args.namespace)
    if v1:
        v1_lines, v1_ok = v1run.status(cluster)
        lines += ([""] if lines else []) + v1_lines
        ok = ok and v1_ok
    print("\n".join(lines))
    return 0 if ok else 3


def _dispatch_v1(cluster: LocalCluster, args: argparse.Namespace) -> int:
    from runner.devtools.olm.v1 import bundlerun as v1run
    from runner.devtools.olm.v1 import install as v1control

    action = args.action
    if action == "install":
        v1control.install(cluster, progress=_progress)
        return 0
    if action == "uninstall":
        for run in v1run.all_runs(cluster):
            v1run.cleanup(cluster, run.package, progress=_progress)
        v1control.uninstall(cluster, progress=_progress)
        return 0
    if action == "run-bundle":
        if not args.namespace:
            raise ConfigError(
                "olm run-bundle --v1: --namespace (the install namespace) is required"
            )
        outcome = v1run.run_bundle(
            cluster,
            args.bundle,
            namespace=args.namespace,
            channel=args.channel,
            timeout=args.timeout,
            skip_validation=args.skip_validation,
            progress=_progress,
        )
    elif action == "bundle-upgrade":
        outcome = v1run.bundle_upgrade(
            cluster,
            args.bundle,
            package=getattr(args, "package", None),
            timeout=args.timeout,
            skip_validation=args.skip_validation,
            progress=_progress,
        )
    elif action == "cleanup":
        v1run.cleanup(cluster, args.package, progress=_progress)
        return 0
    else:
        raise ConfigError(f"olm {action} has no --v1 form")
    print(f"{outcome.bundle} Installed ({outcome.seconds:.1f} s)")
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `olm install|uninstall|status|run-bundle|bundle-upgrade|approve|cleanup|
    kubeconfig` on the top-level parser."""
    olm = sub.add_parser(
        "olm",
        help="the real Operator Lifecycle Manager on the local cluster; bundles through it",
        description="Run OLM (built from Go modules) against the local cluster and install "
        "bundle directories through it, serving them as file-based catalogs with opm on "
        "loopback ports (no images, no registry), or bundle images from the cluster's "
        "registry. With --v1: OLM v1 (operator-controller, catalogd), installing bundle "
        "images through a ClusterCatalog and a ClusterExtension.",
    )
    olm.add_argument(
        "--state-dir",
        help="the cluster's state directory (default: $ANSIBLE_OPERATOR_CLUSTER_DIR or ./.cluster)",
    )
    actions = olm.add_subparsers(dest="action", required=True, metavar="ACTION")

    def v1(parser: argparse.ArgumentParser, what: str) -> None:
        parser.add_argument("--v1", action="store_true", help=f"OLM v1: {what}")

    install = actions.add_parser(
        "install",
        help="build (first time) and start OLM's olm and catalog operators; apply its CRDs",
    )
    v1(install, "operator-controller and catalogd instead (docs/olm.md)")
    uninstall = actions.add_parser(
        "uninstall", help="clean up every run-bundle, then remove OLM and its CRDs"
    )
    v1(uninstall, "every ClusterExtension and ClusterCatalog, then OLM v1 itself")
    status = actions.add_parser(
        "status", help="OLM's processes; Subscription, InstallPlan and CSV of each bundle run"
    )
    status.add_argument("--namespace", "-n", help="only the runs in this namespace")

    def timeout(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--timeout", type=float, default=300, help="seconds to wait (default: 300)"
        )

    def skip(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--skip-validation",
            action="store_true",
            help="hand an invalid bundle to OLM anyway (to see what OLM says)",
        )

    run = actions.add_parser(
        "run-bundle",
        help="install a bundle directory through OLM (like `operator-sdk run bundle`)",
        description="Serve the bundle as a file-based catalog with opm on a loopback port, "
        "create a CatalogSource, an OperatorGroup (unless one fits) and a Subscription, and "
        "wait until the CSV is Succeeded (or its InstallPlan waits for approval).",
    )
    run.add_argument(
        "bundle",
        help="the bundle directory (e.g. bundle/) or a bundle image in the cluster's "
        "registry (e.g. 127.0.0.1:5000/memcached-operator-bundle:v0.1.0)",
    )
    run.add_argument("--namespace", "-n")
    v1(run, "a ClusterCatalog of the bundle image and a ClusterExtension installing it")
    run.add_argument(
        "--install-mode",
        help="AllNamespaces | OwnNamespace | SingleNamespace=NS | MultiNamespace=NS1,NS2 "
        "(default: AllNamespaces if supported, else OwnNamespace)",
    )
    run.add_argument("--approval", choices=("Automatic", "Manual"), default="Automatic")
    run.add_argument("--channel", help="default: the bundle's default channel")
    timeout(run)
    skip(run)
    upgrade = actions.add_parser(
        "bundle-upgrade",
        help="add a newer bundle to the served catalog; OLM upgrades along `replaces`",
    )
    upgrade.add_argument("bundle", help="the newer bundle directory or bundle image")
    upgrade.add_argument("--namespace", "-n")
    upgrade.add_argument("--package", help="(--v1) default: the package of the bundle")
    v1(upgrade, "move the ClusterCatalog to a catalog with the newer bundle")
    timeout(upgrade)
    skip(upgrade)
    approve = actions.add_parser(
        "approve", help="approve the pending InstallPlan of a Manual subscription; wait"
    )
    approve.add_argument("--namespace", "-n")
    approve.add_argument("--package", help="default: the only run in the namespace")
    timeout(approve)
    cleanup = actions.add_parser("cleanup", help="remove what run-bundle created")
    cleanup.add_argument("--namespace", "-n")
    v1(cleanup, "delete the ClusterExtension and ClusterCatalog of a run-bundle --v1")
    cleanup.add_argument("--package", help="default: the only run in the namespace")
    cleanup.add_argument("--keep-crds", action="store_true", help="keep the owned CRDs")
    kubeconfig = actions.add_parser(
        "kubeconfig",
        help="write a kubeconfig for the service account OLM created for the operator",
        description="Request a token (TokenRequest API) for the service account of the "
        "installed CSV's Deployment and write a kubeconfig with it, to run the operator "
        "locally with exactly the permissions OLM granted.",
    )
    kubeconfig.add_argument("--namespace", "-n")
    kubeconfig.add_argument("--package", help="default: the only run in the namespace")
    kubeconfig.add_argument("--service-account", help="default: the Deployment's")
    kubeconfig.add_argument("--output", "-o", help="default: <state>/olm/kubeconfigs/NS.kubeconfig")
    kubeconfig.add_argument(
        "--duration", type=int, default=3600, help="token lifetime in seconds (default: 3600)"
    )
    olm.set_defaults(handler=dispatch)
