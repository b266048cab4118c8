"""The memcached sample through the real Operator Lifecycle Manager, on a private local
cluster (OLM's state is cluster-wide, so the shared test cluster is left alone).

OLM's `olm` and `catalog` operators (built from operator-lifecycle-manager v0.46.0) run
as local processes; each bundle directory is served as a file-based catalog by
`opm serve` on a loopback port, its manifests embedded so that no unpack Job (and no
image) is needed. Pods are kwok's, so the operator itself is then run here as a local
process with a token of the service account OLM created for its Deployment.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError
from support.bundles import REPO, edit_yaml
from support.kube import condition, documents, wait_for
from support.operator import OperatorProcess

from runner.cli.main import main
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.olm import bundles, installwait, runrecord
from runner.errors import ClusterError

pytestmark = pytest.mark.timeout(3600)  # a cold build of OLM takes many minutes

PACKAGE = "memcached-operator"
CSV_FILE = f"manifests/{PACKAGE}.clusterserviceversion.yaml"
CRD_FILE = "manifests/cache.example.com_memcacheds.yaml"
CRD_NAME = "memcacheds.cache.example.com"
SERVICE_ACCOUNT = f"{PACKAGE}-controller-manager"
SAMPLE = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
V1, V2 = f"{PACKAGE}.v0.1.0", f"{PACKAGE}.v0.2.0"
TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A private cluster with OLM installed; everything stopped afterwards."""
    from runner.devtools.cluster import build
    from runner.devtools.cluster.components import olm_operators, tools

    wanted = [*olm_operators().values(), tools()["opm"]]
    if build.missing(wanted, build.cache_root()):
        try:
            build.check_go(c.module for c in wanted)
        except ClusterError as exc:
            pytest.skip(f"cannot build OLM and opm from Go modules: {exc}")
    local = LocalCluster(tmp_path_factory.mktemp("olm-cluster"))
    try:
        local.up(progress=print)
        started = time.monotonic()
        assert olm(local, "install") == 0
        TIMINGS["olm install"] = time.monotonic() - started
        yield local
    finally:
        local.down(progress=print)
        print("OLM timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMINGS.items()))


def olm(cluster: LocalCluster, *argv: str) -> int:
    return main(["olm", "--state-dir", str(cluster.state_dir), *argv])


@pytest.fixture(scope="module")
def dyn(cluster: LocalCluster) -> Iterator[DynamicClient]:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    yield DynamicClient(api)
    api.close()


def _generate(root: Path, version: str, *extra: str) -> Path:
    output = root / "bundle"
    image = f"example.com/memcached-operator:v{version}"
    argv = ["bundle", "generate", "--version", version, "--image", image]
    assert main([*argv, "--project-dir", str(REPO), "--output-dir", str(output), *extra]) == 0
    return output


@pytest.fixture(scope="module")
def bundle_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("olm-bundles")
    return {
        "0.1.0": _generate(root / "v0.1.0", "0.1.0"),
        "0.2.0": _generate(root / "v0.2.0", "0.2.0", "--replaces", V1),
    }


def resource(dyn: DynamicClient, api_version: str, kind: str) -> Any:
    return dyn.resources.get(api_version=api_version, kind=kind)


def csvs(dyn: DynamicClient) -> Any:
    return resource(dyn, "operators.coreos.com/v1alpha1", "ClusterServiceVersion")


def get(res: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = res.get(name=name, namespace=namespace).to_dict()
    except NotFoundError:
        return None
    return found


@contextlib.contextmanager
def installed(cluster: LocalCluster, dyn: DynamicClient, namespace: str) -> Iterator[str]:
    """Yields `namespace`; afterwards `olm cleanup` removes the run, its CRD and namespace."""
    try:
        yield namespace
    finally:
        if runrecord.load_run(cluster, namespace, PACKAGE) is not None:
            assert olm(cluster, "cleanup", "--namespace", namespace) == 0
        namespaces = resource(dyn, "v1", "Namespace")
        wait_for(lambda: get(namespaces, namespace) is None, timeout=120, message="ns gone")
        crds = resource(dyn, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
        wait_for(lambda: get(crds, CRD_NAME) is None, timeout=120, message="CRD gone")


class PhaseRecorder:
    """Every phase each CSV in a namespace goes through, from a watch (so short phases
    such as Replacing and Deleting are seen, not only what a poll happens to catch)."""

    def __init__(self, dyn: DynamicClient, namespace: str) -> None:
        self.phases: dict[str, list[str]] = {}
        self._dyn, self._namespace = dyn, namespace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        version = None  # resumed from, so no change between two watch calls is missed
        while not self._stop.is_set():
            try:
                stream = csvs(self._dyn).watch(
                    namespace=self._namespace, timeout=3, resource_version=version
                )
                for event in stream:
                    obj = event["raw_object"]
                    version = obj["metadata"].get("resourceVersion", version)
                    name = obj["metadata"]["name"]
                    phase = (obj.get("status") or {}).get("phase")
                    seen = self.phases.setdefault(name, [])
                    if event["type"] == "DELETED":
                        phase = "(deleted)"
                    if phase and (not seen or seen[-1] != phase):
                        seen.append(phase)
                    if self._stop.is_set():
                        return
            except Exception:  # e.g. 410 Gone: start over from a fresh list
                version = None

    def stop(self) -> dict[str, list[str]]:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.phases


def can(dyn: DynamicClient, namespace: str, verb: str, group: str, plural: str) -> bool:
    """Whether OLM's grants let the operator's service account do `verb` on `plural`."""
    review = resource(dyn, "authorization.k8s.io/v1", "SubjectAccessReview").create(
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": verb,
                    "group": group,
                    "resource": plural,
                },
            },
        }
    )
    return bool(review.status.allowed)


def test_subscribe_install_then_upgrade_through_replaces(
    cluster: LocalCluster, dyn: DynamicClient, bundle_dirs: dict[str, Path], capsys: Any
) -> None:
    with installed(cluster, dyn, "olm-auto") as ns:
        outcome = bundles.run_bundle(cluster, bundle_dirs["0.1.0"], namespace=ns)
        TIMINGS["subscription -> CSV Succeeded"] = outcome.seconds
        assert (outcome.csv, outcome.state) == (V1, "Succeeded")

        plan = get(
            resource(dyn, "operators.coreos.com/v1alpha1", "InstallPlan"),
            str(outcome.install_plan),
            ns,
        )
        assert plan is not None and plan["status"]["phase"] == "Complete"
        assert plan["spec"]["approval"] == "Automatic"
        crd = get(resource(dyn, "apiextensions.k8s.io/v1", "CustomResourceDefinition"), CRD_NAME)
        assert crd is not None and crd["spec"]["group"] == "cache.example.com"
        deployment = get(
            resource(dyn, "apps/v1", "Deployment"), f"{PACKAGE}-controller-manager", ns
        )
        assert deployment is not None
        available = condition_of(deployment, "Available")
        assert available is not None and available["status"] == "True", deployment["status"]
        assert get(resource(dyn, "v1", "ServiceAccount"), SERVICE_ACCOUNT, ns) is not None
        # RBAC from the CSV: clusterPermissions and permissions, bound to the account.
        assert can(dyn, ns, "create", "cache.example.com", "memcacheds")
        assert can(dyn, ns, "patch", "cache.example.com", "memcacheds/status")
        assert can(dyn, ns, "create", "apps", "deployments")
        assert can(dyn, ns, "create", "coordination.k8s.io", "leases")
        assert not can(dyn, ns, "delete", "", "namespaces")
        owned = resource(dyn, "rbac.authorization.k8s.io/v1", "ClusterRole").get(
            label_selector=f"olm.owner={V1}"
        )
        assert owned.items, "OLM created no ClusterRole for the CSV's clusterPermissions"

        capsys.readouterr()
        assert olm(cluster, "status", "--namespace", ns) == 0
        out = capsys.readouterr().out
        assert f"CSV {V1}: phase Succeeded" in out
        assert "InstallPlan" in out and "phase Complete" in out

        recorder = PhaseRecorder(dyn, ns)
        upgrade = bundles.bundle_upgrade(cluster, bundle_dirs["0.2.0"], namespace=ns)
        TIMINGS["upgrade (catalog gains v0.2.0 -> v0.2.0 Succeeded, v0.1.0 gone)"] = upgrade.seconds
        # The watch may deliver the last events a moment after the upgrade returned.
        with contextlib.suppress(AssertionError):
            wait_for(
                lambda: (
                    (recorder.phases.get(V1) or [""])[-1] == "(deleted)"
                    and (recorder.phases.get(V2) or [""])[-1] == "Succeeded"
                ),
                timeout=15,
                message="last CSV events",
            )
        phases = recorder.stop()
        print(f"CSV phases during the upgrade: {phases}")
        assert (upgrade.csv, upgrade.state) == (V2, "Succeeded")
        assert get(csvs(dyn), V1, ns) is None
        assert "Replacing" in phases.get(V1, []), phases
        assert phases[V1][-1] in ("Deleting", "(deleted)"), phases
        assert phases.get(V2, [])[-1] == "Succeeded", phases
        sub = get(
            resource(dyn, "operators.coreos.com/v1alpha1", "Subscription"), f"{PACKAGE}-sub", ns
        )
        assert sub is not None and sub["status"]["installedCSV"] == V2


def condition_of(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def test_manual_approval_waits_until_approved(
    cluster: LocalCluster, dyn: DynamicClient, bundle_dirs: dict[str, Path]
) -> None:
    with installed(cluster, dyn, "olm-manual") as ns:
        outcome = bundles.run_bundle(
            cluster,
            bundle_dirs["0.1.0"],
            namespace=ns,
            approval="Manual",
            install_mode="OwnNamespace",
        )
        assert outcome.state == "RequiresApproval"
        plans = resource(dyn, "operators.coreos.com/v1alpha1", "InstallPlan")
        time.sleep(5)  # nothing happens while the plan waits
        plan = get(plans, str(outcome.install_plan), ns)
        assert plan is not None and plan["status"]["phase"] == "RequiresApproval"
        assert plan["spec"]["approved"] is False
        assert get(csvs(dyn), V1, ns) is None

        assert olm(cluster, "approve", "--namespace", ns) == 0
        csv = get(csvs(dyn), V1, ns)
        assert csv is not None and csv["status"]["phase"] == "Succeeded"
        plan = get(plans, str(outcome.install_plan), ns)
        assert plan is not None and plan["status"]["phase"] == "Complete"


def test_a_bundle_without_its_crd_fails_with_olms_reason(
    cluster: LocalCluster,
    dyn: DynamicClient,
    bundle_dirs: dict[str, Path],
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # run-bundle reports a problem OLM may still recover from (RequirementsNotMet) once
    # it has lasted SETTLE_SECONDS (45 s: under load a requirement can go missing for a
    # moment during an upgrade); this bundle never recovers, so a shorter wait reports
    # the same reason sooner.
    monkeypatch.setattr(installwait, "SETTLE_SECONDS", 20.0)
    broken = tmp_path / "bundle"
    shutil.copytree(bundle_dirs["0.1.0"], broken)
    (broken / CRD_FILE).unlink()
    crds = resource(dyn, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    assert get(crds, CRD_NAME) is None, "an earlier test left the CRD behind"
    with installed(cluster, dyn, "olm-broken") as ns:
        capsys.readouterr()
        # Our validator refuses it; --skip-validation hands it to OLM anyway.
        assert olm(cluster, "run-bundle", str(broken), "--namespace", ns) == 1
        assert "owned" in capsys.readouterr().err
        argv = ["run-bundle", str(broken), "--namespace", ns, "--skip-validation"]
        assert olm(cluster, *argv, "--install-mode", "OwnNamespace", "--timeout", "180") == 1
        err = capsys.readouterr().err
        assert "OLM reports" in err and "RequirementsNotMet" in err, err
        assert CRD_NAME in err, err
        assert olm(cluster, "status", "--namespace", ns) == 3
        out = capsys.readouterr().out
        assert f"CSV {V1}: phase Pending (RequirementsNotMet" in out, out
        assert f"CustomResourceDefinition {CRD_NAME} NotPresent" in out, out


def _drop_services(bundle: Path) -> None:
    def change(csv: dict[str, Any]) -> None:
        for grant in csv["spec"]["install"]["spec"]["clusterPermissions"]:
            for rule in grant["rules"]:
                if "services" in rule["resources"]:
                    rule["resources"].remove("services")

    edit_yaml(bundle / CSV_FILE, change)


@pytest.mark.parametrize(
    "breaks",
    [pytest.param(None, id="csv-as-generated"), pytest.param(_drop_services, id="no-services")],
)
def test_the_operator_runs_with_what_olm_granted(
    cluster: LocalCluster,
    dyn: DynamicClient,
    bundle_dirs: dict[str, Path],
    tmp_path: Path,
    breaks: Callable[[Path], None] | None,
) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(bundle_dirs["0.1.0"], bundle)
    if breaks is not None:
        breaks(bundle)
    with installed(cluster, dyn, f"olm-grants-{'broken' if breaks else 'ok'}") as ns:
        outcome = bundles.run_bundle(
            cluster, bundle, namespace=ns, install_mode="OwnNamespace", skip_validation=True
        )
        assert outcome.state == "Succeeded"
        sa_kubeconfig = tmp_path / "sa.kubeconfig"
        argv = ["kubeconfig", "--namespace", ns, "--output", str(sa_kubeconfig)]
        assert olm(cluster, *argv) == 0
        assert "token" in yaml.safe_load(sa_kubeconfig.read_text())["users"][0]["user"]
        # Run it as OLM's Deployment would: its args (not the fixed ports) and the
        # namespaces OLM put into the pod template's olm.targetNamespaces annotation.
        deployment = get(
            resource(dyn, "apps/v1", "Deployment"), f"{PACKAGE}-controller-manager", ns
        )
        assert deployment is not None
        pod = deployment["spec"]["template"]
        (manager,) = [c for c in pod["spec"]["containers"] if c["name"] == "manager"]
        args = [a for a in manager.get("args") or [] if "bind-address" not in a]
        args.append(f"--leader-election-namespace={ns}")
        env = {"WATCH_NAMESPACE": pod["metadata"]["annotations"]["olm.targetNamespaces"]}
        env.update({e["name"]: e["value"] for e in manager.get("env") or [] if "value" in e})
        assert env["WATCH_NAMESPACE"] == ns
        operator = OperatorProcess(
            REPO, kubeconfig=sa_kubeconfig, log=tmp_path / "operator.log", args=args, env=env
        )
        memcacheds = None
        try:
            memcacheds = resource(dyn, "cache.example.com/v1alpha1", "Memcached")
            memcacheds.create(body=documents(SAMPLE)[0], namespace=ns)

            def settled() -> dict[str, Any] | None:
                cr = memcacheds.get(name="memcached-sample", namespace=ns)
                for kind in ("Successful", "Failure"):
                    found = condition(cr, kind)
                    if found and found["status"] == "True":
                        return found
                return None

            result = wait_for(settled, timeout=180, message="memcached-sample reconciled")
            if breaks is None:
                assert result["type"] == "Successful", (
                    "the operator, running with exactly the permissions OLM granted "
                    f"{SERVICE_ACCOUNT} from the CSV, failed to reconcile the sample: "
                    f"{result.get('message')}"
                )
                memcacheds.delete(name="memcached-sample", namespace=ns)
                wait_for(
                    lambda: get(memcacheds, "memcached-sample", ns) is None,
                    timeout=120,
                    message="the finalizer ran with OLM's grants",
                )
            else:
                assert result["type"] == "Failure"
                message = result["message"].lower()
                assert "forbidden" in message and "services" in message, message
                print(f"without the services rule the operator reports: {result['message']}")
        finally:
            operator.stop()
            print(operator.log()[-3000:])
            if memcacheds is not None and get(memcacheds, "memcached-sample", ns) is not None:
                memcacheds.patch(
                    name="memcached-sample",
                    namespace=ns,
                    body={"metadata": {"finalizers": []}},
                    content_type="application/merge-patch+json",
                )
                with contextlib.suppress(NotFoundError):
                    memcacheds.delete(name="memcached-sample", namespace=ns)


def test_uninstall_removes_olm(cluster: LocalCluster, dyn: DynamicClient, capsys: Any) -> None:
    assert olm(cluster, "uninstall") == 0
    assert not [name for name in cluster.addons() if name.endswith("operator")]
    crds = resource(dyn, "apiextensions.k8s.io/v1", "CustomResourceDefinition")
    wait_for(
        lambda: get(crds, "clusterserviceversions.operators.coreos.com") is None,
        timeout=120,
        message="OLM's CRDs deleted",
    )
    assert olm(cluster, "status") == 3
    assert "OLM is not installed" in capsys.readouterr().out
    core = client.CoreV1Api(dyn.client)
    wait_for(
        lambda: not {"olm", "operators"} & {n.metadata.name for n in core.list_namespace().items},
        timeout=120,
        message="the olm and operators namespaces deleted",
    )
