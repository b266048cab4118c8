"""The memcached sample installed by OLM from images, as users deploy it: the operator's
image and its bundle images pushed to the local cluster's registry, `olm run-bundle
<bundle image>` (a catalog image served by a registry pod that OLM's catalog operator
runs, the bundle unpacked by OLM's own Job), the operator running as a real pod on the
real node, the sample CR `Successful`, `olm bundle-upgrade <bundle image>` replacing the
pod with the new version's image (one with a validating webhook in its CSV's
`webhookdefinitions`, which the API server then calls in the pod), and `olm cleanup`
leaving nothing.

A private cluster with a registry and a real node (OLM's state is cluster-wide, and the
real node changes the machine): stopped, with everything it changed, even on failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from support import images as built
from support.kube import apply, condition, wait_for
from support.operator import REPO

from runner.cli.main import main
from runner.devtools import images
from runner.devtools.cluster import registry
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.cluster.realnode import nodeconfig
from runner.devtools.olm.steps import OLMError
from runner.devtools.olm.v1 import bundlerun as v1run
from runner.devtools.olm.v1 import objects as v1model

pytestmark = pytest.mark.timeout(3600)

PACKAGE = "memcached-operator"
NAMESPACE = "memcached-images"
CR_NAMESPACE = "memcached-images-cr"
V1, V2 = f"{PACKAGE}.v0.1.0", f"{PACKAGE}.v0.2.0"
SERVICE_ACCOUNT = f"{PACKAGE}-controller-manager"
SAMPLE = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
TIMINGS: dict[str, float] = {}
# v0.2.0 for OLM v0: the sample with a validating webhook role (its image and bundle tag).
WEBHOOKS = "v0.2.0-webhooks"
DENIAL = "spec.size must not be negative, got -1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A private cluster with a registry, a real node and OLM (with its images)."""
    local = LocalCluster(tmp_path_factory.mktemp("olm-images-cluster"))
    try:
        local.up(real_node=True, progress=print)
        registry.start(local, progress=print)
        started = time.monotonic()
        assert olm(local, "install") == 0
        TIMINGS["olm install (with its images)"] = time.monotonic() - started
        yield local
    finally:
        local.down(progress=print)
        print(
            "OLM from images, timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMINGS.items())
        )


def olm(cluster: LocalCluster, *argv: str) -> int:
    return main(["olm", "--state-dir", str(cluster.state_dir), *argv])


@pytest.fixture(scope="module")
def core(cluster: LocalCluster) -> Iterator[client.CoreV1Api]:
    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    yield client.CoreV1Api(api)
    api.close()


def _publish(local: str, remote: str) -> None:
    tagged = subprocess.run(
        ["podman", "tag", local, remote], capture_output=True, text=True, env=built.env()
    )
    assert tagged.returncode == 0, tagged.stderr
    images.push(built.TOOL, remote, cache=built.cache())


def _bundle_image(
    root: Path,
    registry_address: str,
    version: str,
    *extra: str,
    edit: Callable[[Path], None] | None = None,
    project: Path = REPO,
    tag: str = "",
) -> str:
    """Generate the bundle of `project` (the sample) for `version` (deploying the operator
    image of that version, or `tag`, from the registry), `edit` it, build its image and
    push it."""
    tag = tag or f"v{version}"
    operator_image = f"{registry_address}/{PACKAGE}:{tag}"
    output = root / tag
    argv = ["bundle", "generate", "--version", version, "--image", operator_image]
    argv += ["--project-dir", str(project), "--output-dir", str(output / "bundle"), *extra]
    assert main(argv) == 0
    if edit is not None:
        edit(output / "bundle")
    image = f"{registry_address}/{PACKAGE}-bundle:{tag}"
    images.build(
        built.TOOL,
        tag=image,
        dockerfile=str(output / "bundle.Dockerfile"),
        context=str(output),
        cache=built.cache(),
    )
    images.push(built.TOOL, image, cache=built.cache())
    return image


@pytest.fixture(scope="module")
def bundle_images(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    found = registry.info(cluster)
    assert found is not None
    started = time.monotonic()
    operator = built.sample_image()  # cached by the digest of its inputs
    TIMINGS["operator image (build or cache hit)"] = time.monotonic() - started
    for version in ("0.1.0", "0.2.0"):
        _publish(operator, f"{found.address}/{PACKAGE}:v{version}")
    root = tmp_path_factory.mktemp("olm-image-bundles")
    started = time.monotonic()
    result = {
        "0.1.0": _bundle_image(root, found.address, "0.1.0"),
        "0.2.0": _bundle_image(root, found.address, "0.2.0", "--replaces", V1),
    }
    TIMINGS["two bundle images built and pushed"] = time.monotonic() - started
    started = time.monotonic()
    project = _webhook_project(root / "webhook-project")
    _publish(_webhook_operator_image(operator, project), f"{found.address}/{PACKAGE}:{WEBHOOKS}")
    result[WEBHOOKS] = _bundle_image(
        root, found.address, "0.2.0", "--replaces", V1, project=project, tag=WEBHOOKS
    )
    TIMINGS["webhook operator and bundle images built and pushed"] = time.monotonic() - started
    return result


def _webhook_project(project: Path) -> Path:
    """The sample with a validating webhook written by `create webhook` (its role denies
    a negative size with DENIAL)."""
    project.mkdir(parents=True)
    for name in ("PROJECT", "watches.yaml", "requirements.yml", "roles", "playbooks", "config"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, project / name)
        else:
            shutil.copy(source, project / name)
    shutil.copy(REPO / "sample.Dockerfile", project / "Dockerfile")
    argv = ["create", "webhook", "--group", "cache", "--version", "v1alpha1"]
    argv += ["--kind", "Memcached", "--programmatic-validation"]
    cwd = Path.cwd()
    os.chdir(project)
    try:
        assert main(argv) == 0
    finally:
        os.chdir(cwd)
    return project


def _webhook_operator_image(sample: str, project: Path) -> str:
    """The sample's operator image with the project's webhooks.yaml and roles on top."""
    tag = f"{sample}-webhooks"
    (project / "webhooks.Dockerfile").write_text(
        f"FROM {sample}\n"
        "COPY --chown=1001:0 webhooks.yaml ${HOME}/webhooks.yaml\n"
        "COPY --chown=1001:0 roles/ ${HOME}/roles/\n"
    )
    images.build(
        built.TOOL,
        tag=tag,
        dockerfile=str(project / "webhooks.Dockerfile"),
        context=str(project),
        cache=built.cache(),
    )
    return tag


def _operator_pods(core: client.CoreV1Api) -> list[Any]:
    pods = core.list_namespaced_pod(NAMESPACE, label_selector="control-plane=controller-manager")
    return [p for p in pods.items if p.metadata.deletion_timestamp is None]


def _running_operator(core: client.CoreV1Api, image: str) -> Any:
    """The one operator pod, Running from `image` (None while that is not so)."""
    pods = _operator_pods(core)
    if len(pods) != 1 or pods[0].spec.containers[0].image != image:
        return None
    return pods[0] if pods[0].status.phase == "Running" else None


def _started_at(pod: Any) -> datetime:
    statuses = pod.status.container_statuses or []
    return statuses[0].state.running.started_at


def test_operator_installed_from_images_runs_on_the_real_node_and_upgrades(
    cluster: LocalCluster, core: client.CoreV1Api, bundle_images: dict[str, str]
) -> None:
    found = registry.info(cluster)
    assert found is not None
    custom = client.CustomObjectsApi(core.api_client)
    dyn = DynamicClient(core.api_client)
    try:
        wall_start = datetime.now().astimezone()
        started = time.monotonic()
        assert olm(cluster, "run-bundle", bundle_images["0.1.0"], "--namespace", NAMESPACE) == 0
        TIMINGS["run-bundle to CSV Succeeded"] = time.monotonic() - started

        v1_image = f"{found.address}/{PACKAGE}:v0.1.0"
        pod = wait_for(lambda: _running_operator(core, v1_image), timeout=180, message="pod")
        TIMINGS["run-bundle to operator pod Running"] = (
            _started_at(pod) - wall_start
        ).total_seconds()
        assert pod.spec.node_name.startswith("real-node-")
        assert pod.spec.service_account_name == SERVICE_ACCOUNT
        assert not pod.spec.host_network

        # OLM's own path: the catalog's registry pod from the catalog image, and the
        # bundle unpacked by a Job from OLM's opm and util images, all on the real node.
        source = custom.get_namespaced_custom_object(
            "operators.coreos.com", "v1alpha1", NAMESPACE, "catalogsources", f"{PACKAGE}-catalog"
        )
        assert source["spec"]["image"].startswith(f"{found.address}/{PACKAGE}-catalog:")
        assert "address" not in source["spec"]
        registry_pods = core.list_namespaced_pod(
            NAMESPACE, label_selector=f"olm.catalogSource={PACKAGE}-catalog"
        ).items
        assert registry_pods
        assert all(p.spec.node_name.startswith("real-node-") for p in registry_pods)
        unpack_pods = [
            p
            for p in core.list_namespaced_pod(NAMESPACE).items
            if any(c.name == "util" for c in p.spec.init_containers or [])
        ]
        assert unpack_pods, "no bundle unpack Job pod"
        assert all(p.status.phase == "Succeeded" for p in unpack_pods)
        assert all(p.spec.node_name.startswith("real-node-") for p in unpack_pods)
        toleration = nodeconfig.TOLERATION
        assert any(t.key == toleration["key"] for t in pod.spec.tolerations)

        core.create_namespace({"metadata": {"name": CR_NAMESPACE}})
        apply(dyn, SAMPLE, namespace=CR_NAMESPACE)
        memcacheds = dyn.resources.get(api_version="cache.example.com/v1alpha1", kind="Memcached")

        def successful() -> bool:
            found = condition(
                memcacheds.get(name="memcached-sample", namespace=CR_NAMESPACE), "Successful"
            )
            return bool(found and found.get("status") == "True")

        wait_for(successful, timeout=180, message="the sample CR Successful")
        TIMINGS["run-bundle to CR Successful"] = time.monotonic() - started

        # v0.2.0 adds a validating webhook (the CSV's webhookdefinitions): OLM makes its
        # Service, certificate and configuration; the API server calls the role in the pod.
        v2_image = f"{found.address}/{PACKAGE}:{WEBHOOKS}"
        old = pod.metadata.name
        started = time.monotonic()
        argv = ["bundle-upgrade", bundle_images[WEBHOOKS], "--namespace", NAMESPACE]
        assert olm(cluster, *argv) == 0
        TIMINGS["bundle-upgrade to v0.2.0 Succeeded"] = time.monotonic() - started
        new = wait_for(lambda: _running_operator(core, v2_image), timeout=180, message="new pod")
        assert new.metadata.name != old
        assert new.spec.node_name.startswith("real-node-")
        TIMINGS["bundle-upgrade to new pod Running"] = time.monotonic() - started
        message = wait_for(
            lambda: _denied(memcacheds, CR_NAMESPACE), timeout=120, message="denied by the role"
        )
        assert DENIAL in message, message
        TIMINGS["bundle-upgrade to the first denial by the webhook role"] = (
            time.monotonic() - started
        )
    finally:
        if _namespace_exists(core, CR_NAMESPACE):
            # While the operator still runs, so that the CR's finalizer is handled.
            custom.delete_collection_namespaced_custom_object(
                "cache.example.com", "v1alpha1", CR_NAMESPACE, "memcacheds"
            )
            wait_for(
                lambda: (
                    not custom.list_namespaced_custom_object(
                        "cache.example.com", "v1alpha1", CR_NAMESPACE, "memcacheds"
                    )["items"]
                ),
                timeout=120,
                message="the CR's finalizer ran",
            )
            core.delete_namespace(CR_NAMESPACE)
        assert olm(cluster, "cleanup", "--namespace", NAMESPACE) == 0

    # cleanup leaves nothing: the namespace (and with it every pod, Job and the
    # registry pod), the CRD, the CSVs' cluster roles.
    wait_for(lambda: not _namespace_exists(core, NAMESPACE), timeout=180, message="ns gone")
    extensions = client.ApiextensionsV1Api(core.api_client)
    crds = [c.metadata.name for c in extensions.list_custom_resource_definition().items]
    # `cleanup --v1` returns only once the extension's CRDs are gone.
    assert "memcacheds.cache.example.com" not in crds
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    owned = [
        (r.metadata.name, (r.metadata.labels or {}).get("olm.owner"))
        for r in [*rbac.list_cluster_role().items, *rbac.list_cluster_role_binding().items]
        if (r.metadata.labels or {}).get("olm.owner", "").startswith(PACKAGE)
    ]
    assert owned == []


def _denied(memcacheds: Any, namespace: str) -> str:
    """The API server's denial of a Memcached with a negative size ("" while it is
    admitted: the webhook is not registered yet)."""
    body = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "negative", "namespace": namespace},
        "spec": {"size": -1},
    }
    try:
        memcacheds.create(body=body, namespace=namespace)
    except client.ApiException as exc:
        if DENIAL in str(exc.body):
            return str(exc.body)
        print(f"not (yet) denied by the role: {exc.status} {exc.body}")
        return ""
    memcacheds.delete(name="negative", namespace=namespace)
    return ""


def _namespace_exists(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


# -- OLM v1 ------------------------------------------------------------------------------
# The same operator, bundle images and catalog format through OLM v1 (operator-controller
# and catalogd), on the same cluster, after the OLM v0 test above has cleaned up.

V1_NAMESPACE = "memcached-olmv1"
V1_CR_NAMESPACE = "memcached-olmv1-cr"
V1_GROUP = "olm.operatorframework.io"


def _cluster_scoped_crd(bundle: Path) -> None:
    """An incompatible CRD change: the Memcached kind moves from Namespaced to Cluster."""
    path = bundle / "manifests" / "cache.example.com_memcacheds.yaml"
    path.write_text(path.read_text().replace("scope: Namespaced", "scope: Cluster"))


def _v1_object(custom: client.CustomObjectsApi, plural: str, name: str) -> Any:
    try:
        return custom.get_cluster_custom_object(V1_GROUP, "v1", plural, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_the_same_bundles_install_and_upgrade_through_olm_v1(
    cluster: LocalCluster,
    core: client.CoreV1Api,
    bundle_images: dict[str, str],
    tmp_path: Path,
) -> None:
    found = registry.info(cluster)
    assert found is not None
    custom = client.CustomObjectsApi(core.api_client)
    dyn = DynamicClient(core.api_client)
    _publish(f"{found.address}/{PACKAGE}:v0.2.0", f"{found.address}/{PACKAGE}:v0.3.0")
    incompatible = _bundle_image(
        tmp_path, found.address, "0.3.0", "--replaces", V2, edit=_cluster_scoped_crd
    )
    started = time.monotonic()
    assert olm(cluster, "install", "--v1") == 0
    TIMINGS["olm install --v1 (binaries cached)"] = time.monotonic() - started
    try:
        started = time.monotonic()
        argv = ["run-bundle", "--v1", bundle_images["0.1.0"], "--namespace", V1_NAMESPACE]
        assert olm(cluster, *argv) == 0
        TIMINGS["v1: run-bundle to ClusterExtension Installed"] = time.monotonic() - started

        catalog = _v1_object(custom, "clustercatalogs", f"{PACKAGE}-catalog")
        assert catalog["spec"]["source"]["image"]["ref"].startswith(
            f"{found.address}/{PACKAGE}-catalog:"
        )
        # catalogd's webhook (registered at a loopback URL) labelled it.
        labels = catalog["metadata"]["labels"]
        assert labels["olm.operatorframework.io/metadata.name"] == f"{PACKAGE}-catalog"
        assert v1model.is_true(catalog, "Serving")
        extension = _v1_object(custom, "clusterextensions", PACKAGE)
        assert v1model.is_true(extension, "Installed")
        assert extension["status"]["install"]["bundle"]["version"] == "0.1.0"

        v1_image = f"{found.address}/{PACKAGE}:v0.1.0"
        pod = wait_for(
            lambda: _running_operator_in(core, V1_NAMESPACE, v1_image),
            timeout=180,
            message="operator pod (OLM v1)",
        )
        assert pod.spec.node_name.startswith("real-node-")
        TIMINGS["v1: run-bundle to operator pod Running"] = time.monotonic() - started

        core.create_namespace({"metadata": {"name": V1_CR_NAMESPACE}})
        apply(dyn, SAMPLE, namespace=V1_CR_NAMESPACE)
        memcacheds = dyn.resources.get(api_version="cache.example.com/v1alpha1", kind="Memcached")

        def successful() -> bool:
            got = condition(
                memcacheds.get(name="memcached-sample", namespace=V1_CR_NAMESPACE), "Successful"
            )
            return bool(got and got.get("status") == "True")

        wait_for(successful, timeout=180, message="the sample CR Successful (OLM v1)")
        created = datetime.fromisoformat(extension["metadata"]["creationTimestamp"])
        TIMINGS["v1: ClusterExtension created to CR Successful"] = (
            datetime.now().astimezone() - created
        ).total_seconds()

        v2_image = f"{found.address}/{PACKAGE}:v0.2.0"
        started = time.monotonic()
        argv = ["bundle-upgrade", "--v1", bundle_images["0.2.0"]]
        assert olm(cluster, *argv) == 0
        TIMINGS["v1: bundle-upgrade to v0.2.0 Installed"] = time.monotonic() - started
        new = wait_for(
            lambda: _running_operator_in(core, V1_NAMESPACE, v2_image),
            timeout=180,
            message="the v0.2.0 pod (OLM v1)",
        )
        assert new.metadata.name != pod.metadata.name

        # The CRD upgrade-safety preflight refuses v0.3.0 (Memcached made cluster-scoped),
        # and the refusal carries operator-controller's message; v0.2.0 stays.
        started = time.monotonic()
        with pytest.raises(OLMError) as refused:
            v1run.bundle_upgrade(cluster, incompatible, timeout=240, progress=print)
        TIMINGS["v1: bundle-upgrade to the CRD change refused"] = time.monotonic() - started
        message = str(refused.value)
        print(f"OLM v1 refused v0.3.0: {message}")
        assert "memcacheds.cache.example.com" in message
        assert "scope" in message.lower()
        extension = _v1_object(custom, "clusterextensions", PACKAGE)
        assert extension["status"]["install"]["bundle"]["version"] == "0.2.0"
        assert main(["olm", "--state-dir", str(cluster.state_dir), "status"]) == 3
    finally:
        if _namespace_exists(core, V1_CR_NAMESPACE):
            custom.delete_collection_namespaced_custom_object(
                "cache.example.com", "v1alpha1", V1_CR_NAMESPACE, "memcacheds"
            )
            wait_for(
                lambda: (
                    not custom.list_namespaced_custom_object(
                        "cache.example.com", "v1alpha1", V1_CR_NAMESPACE, "memcacheds"
                    )["items"]
                ),
                timeout=120,
                message="the CR's finalizer ran (OLM v1)",
            )
            core.delete_namespace(V1_CR_NAMESPACE)
        if v1run.all_runs(cluster):
            assert olm(cluster, "cleanup", "--v1") == 0
        assert olm(cluster, "uninstall", "--v1") == 0

    # cleanup and uninstall leave nothing: the namespace (with its pods), the CRD, the
    # bundle's cluster roles, both OLM v1 kinds, catalogd's webhook, olmv1-system.
    wait_for(lambda: not _namespace_exists(core, V1_NAMESPACE), timeout=180, message="ns gone")
    wait_for(
        lambda: not _namespace_exists(core, "olmv1-system"), timeout=180, message="olmv1-system"
    )
    extensions = client.ApiextensionsV1Api(core.api_client)
    crds = [c.metadata.name for c in extensions.list_custom_resource_definition().items]
    # `cleanup --v1` returns only once the extension's CRDs are gone.
    assert "memcacheds.cache.example.com" not in crds
    assert not [c for c in crds if c.endswith(V1_GROUP)]
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    left = [r.metadata.name for r in rbac.list_cluster_role().items]
    assert not [name for name in left if name.startswith(f"{PACKAGE}-memcached")]
    admission = client.AdmissionregistrationV1Api(core.api_client)
    hooks = [h.metadata.name for h in admission.list_mutating_webhook_configuration().items]
    assert "catalogd-mutating-webhook-configuration" not in hooks
    assert not [n for n in ("catalogd", "operator-controller") if n in cluster.addons()]


def _running_operator_in(core: client.CoreV1Api, namespace: str, image: str) -> Any:
    pods = core.list_namespaced_pod(namespace, label_selector="control-plane=controller-manager")
    live = [p for p in pods.items if p.metadata.deletion_timestamp is None]
    if len(live) != 1 or live[0].spec.containers[0].image != image:
        return None
    return live[0] if live[0].status.phase == "Running" else None
