"""The memcached sample installed by OLM from images, as users deploy it: the operator's
image and its bundle images pushed to the local cluster's registry, `olm run-bundle
<bundle image>` (a catalog image served by a registry pod that OLM's catalog operator
runs, the bundle unpacked by OLM's own Job), the operator running as a real pod on the
real node, the sample CR `Successful`, `olm bundle-upgrade <bundle image>` replacing the
pod with the new version's image, and `olm cleanup` leaving nothing.

A private cluster with a registry and a real node (OLM's state is cluster-wide, and the
real node changes the machine): stopped, with everything it changed, even on failure.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from support import images as built
from support.kube import apply, condition, wait_for
from support.operator import REPO

from runner.cli import main
from runner.cluster import images, nodeconfig, registry
from runner.cluster.local import LocalCluster

pytestmark = pytest.mark.timeout(3600)

PACKAGE = "memcached-operator"
NAMESPACE = "memcached-images"
CR_NAMESPACE = "memcached-images-cr"
V1, V2 = f"{PACKAGE}.v0.1.0", f"{PACKAGE}.v0.2.0"
SERVICE_ACCOUNT = f"{PACKAGE}-controller-manager"
SAMPLE = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
TIMINGS: dict[str, float] = {}


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


def _bundle_image(root: Path, registry_address: str, version: str, *extra: str) -> str:
    """Generate the sample's bundle for `version` (deploying the operator image of that
    version from the registry), build its image and push it."""
    operator_image = f"{registry_address}/{PACKAGE}:v{version}"
    output = root / f"v{version}"
    argv = ["bundle", "generate", "--version", version, "--image", operator_image]
    argv += ["--project-dir", str(REPO), "--output-dir", str(output / "bundle"), *extra]
    assert main(argv) == 0
    image = f"{registry_address}/{PACKAGE}-bundle:v{version}"
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
    return result


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

        v2_image = f"{found.address}/{PACKAGE}:v0.2.0"
        old = pod.metadata.name
        started = time.monotonic()
        assert olm(cluster, "bundle-upgrade", bundle_images["0.2.0"], "--namespace", NAMESPACE) == 0
        TIMINGS["bundle-upgrade to v0.2.0 Succeeded"] = time.monotonic() - started
        new = wait_for(lambda: _running_operator(core, v2_image), timeout=180, message="new pod")
        assert new.metadata.name != old
        assert new.spec.node_name.startswith("real-node-")
        TIMINGS["bundle-upgrade to new pod Running"] = time.monotonic() - started
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
    assert "memcacheds.cache.example.com" not in crds
    rbac = client.RbacAuthorizationV1Api(core.api_client)
    owned = [
        (r.metadata.name, (r.metadata.labels or {}).get("olm.owner"))
        for r in [*rbac.list_cluster_role().items, *rbac.list_cluster_role_binding().items]
        if (r.metadata.labels or {}).get("olm.owner", "").startswith(PACKAGE)
    ]
    assert owned == []


def _namespace_exists(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True
