"""The images as users ship them, built here with podman: the runtime image (non-root,
read-only root file system, tini as PID 1, the slim set of collections), the sample's
image reconciling a Memcached CR from a container, collections a project lists being
installed without Ansible Galaxy, and images pushed to and pulled from the local
cluster's registry on loopback.

Images are built once per change of their inputs (support.images); a warm run only
starts containers.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dockerfile_parse import DockerfileParser
from support import images as built
from support.cluster_cli import cluster_cli
from support.kube import apply, condition, wait_for
from support.operator import REPO

from runner.devtools import images
from runner.devtools.cluster import processes as process
from runner.devtools.cluster import registry
from runner.devtools.cluster.local import LocalCluster

SAMPLE_CR = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
MAX_RUNTIME_BYTES = 450 * 1000 * 1000
LISTED = [
    line.split("#")[0].strip()
    for line in (REPO / "image" / "collections.txt").read_text().splitlines()
    if line.split("#")[0].strip()
]
# what the default ansible-core line's `ansible` release has (cloud.common is in 11.x)
SHIPPED = [name.rstrip("?") for name in LISTED]


@pytest.fixture(scope="module")
def runtime() -> str:
    return built.runtime_image()


@pytest.fixture(scope="module")
def sample() -> str:
    return built.sample_image()


def run(image: str, *args: str, options: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """A throw-away container as it runs in a pod: read-only root, an emptyDir-like /tmp.
    No network: podman's default bridge would add firewall chains and turn on IP
    forwarding on the machine, and these checks need none."""
    isolated = ("--rm", "--network", "none", "--read-only", "--tmpfs", "/tmp")
    return subprocess.run(
        ["podman", "run", *isolated, *options, image, *args],
        capture_output=True,
        text=True,
        env=built.env(),
        timeout=120,
        check=False,
    )


def test_runtime_image_is_slim(runtime: str) -> None:
    layers = built.layers(runtime)
    print("\n".join(f"{size / 1e6:8.1f} MB  {made[:110]}" for size, made in layers))
    total = built.size(runtime)
    print(f"total {total / 1e6:.1f} MB")
    assert total <= MAX_RUNTIME_BYTES
    config = built.podman("image", "inspect", "--format", "{{.Config.User}}", runtime).strip()
    assert config == "1001"


def test_runs_as_1001_on_a_read_only_root(runtime: str) -> None:
    script = (
        "id -u; test -w /tmp && echo tmp-writable; "
        "touch /opt/ansible/x 2>/dev/null || echo home-read-only; "
        "touch /usr/x 2>/dev/null || echo root-read-only"
    )
    result = run(runtime, "-c", script, options=("--entrypoint", "/bin/sh"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "1001",
        "tmp-writable",
        "home-read-only",
        "root-read-only",
    ]
    entry = built.podman("image", "inspect", "--format", "{{json .Config.Entrypoint}}", runtime)
    assert entry.strip().startswith('["/usr/bin/tini","--","ansible-operator","run"')


def test_version_names_ansible_core_and_the_collections(runtime: str) -> None:
    result = run(runtime, "version", options=("--entrypoint", "ansible-operator"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    dockerfile = DockerfileParser(str(REPO / "Dockerfile"))
    default = dockerfile.args["ANSIBLE_CORE"]
    core = re.search(r"^ansible-core version: (\S+) \(supported\)$", out, re.M)
    assert default and core, out
    assert core[1].startswith(default + "."), out
    for name in ("kubernetes.core", "operator_sdk.util"):
        found = re.search(rf"^{re.escape(name)} collection version: (\S+) \((\S+)\)$", out, re.M)
        assert found, out
        assert found[2].startswith("/usr/share/ansible/collections/ansible_collections/"), out
    # exactly the collections the image means to ship, nothing else of `ansible`
    listed = run(
        runtime,
        "collection",
        "list",
        "--format",
        "json",
        # its cache goes to /tmp, the only writable place
        options=("--entrypoint", "ansible-galaxy", "--env", "ANSIBLE_GALAXY_CACHE_DIR=/tmp/g"),
    )
    assert listed.returncode == 0, listed.stderr
    names = {name for found in json.loads(listed.stdout).values() for name in found}
    assert names == {*SHIPPED, "operator_sdk.util"}


def test_a_project_adds_collections_without_galaxy(runtime: str, tmp_path: Path) -> None:
    """A project's requirements.yml naming what the image ships installs with no network
    at all (the build runs with --network none), as operator-sdk projects' images do."""
    (tmp_path / "requirements.yml").write_text(
        "collections:\n"
        "  - name: kubernetes.core\n"
        "  - name: operator_sdk.util\n"
        '    version: "0.5.0"\n'
        "  - name: community.docker\n"
    )
    (tmp_path / "Dockerfile").write_text(
        f"FROM {runtime}\n"
        "COPY --chown=1001:0 requirements.yml ${HOME}/requirements.yml\n"
        "RUN ansible-galaxy collection install -r ${HOME}/requirements.yml \\\n"
        " && chmod -R ug+rwx ${HOME}/.ansible\n"
    )
    tag = "localhost/ansible-operator-test-project:offline"
    try:
        out = built.podman("build", "--network", "none", "-t", tag, str(tmp_path), timeout=300)
        assert "Nothing to do. All requested collections are already installed" in out
    finally:
        built.podman("rmi", "--force", tag, check=False)


@pytest.fixture
def readable_kubeconfig(kubeconfig: Path, tmp_path: Path) -> Path:
    """The test cluster's kubeconfig, readable by the container's uid 1001."""
    copy = tmp_path / "kube" / "config"
    copy.parent.mkdir()
    shutil.copy(kubeconfig, copy)
    copy.chmod(0o644)
    return copy


@pytest.fixture
def operator_container(
    sample: str, readable_kubeconfig: Path, namespace: str, memcached_crd: Any
) -> Iterator[str]:
    """The sample's image run as its Deployment would run it, on the host network."""
    name = f"memcached-operator-{namespace}"
    args = ["--proxy-port", "0", "--metrics-bind-address", "0"]
    args += ["--health-probe-bind-address", "0", "--user-metrics-bind-address", "127.0.0.1:0"]
    built.podman(
        "run",
        "--detach",
        "--name",
        name,
        "--network",
        "host",
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--volume",
        f"{readable_kubeconfig}:/var/run/kube/config:ro",
        "--env",
        "KUBECONFIG=/var/run/kube/config",
        "--env",
        f"WATCH_NAMESPACE={namespace}",
        sample,
        *args,
    )
    try:
        yield name
    finally:
        print(built.podman("logs", name, check=False)[-5000:])
        built.podman("rm", "--force", "--time", "0", name, check=False)


def test_sample_image_reconciles_and_stops_on_sigterm(
    dyn: Any, memcached_crd: Any, namespace: str, operator_container: str
) -> None:
    pid1 = built.podman("exec", operator_container, "cat", "/proc/1/comm").strip()
    assert pid1 == "tini"
    apply(dyn, SAMPLE_CR, namespace=namespace)
    wait_for(
        lambda: (
            (
                condition(
                    memcached_crd.get(name="memcached-sample", namespace=namespace), "Successful"
                )
                or {}
            ).get("status")
            == "True"
        ),
        timeout=120,
        message="memcached-sample Successful",
    )
    grace = 20
    started = time.monotonic()
    built.podman("stop", "--time", str(grace), operator_container, timeout=grace + 30)
    stopped_in = time.monotonic() - started
    state = built.podman(
        "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", operator_container
    ).split()
    print(f"stopped in {stopped_in:.1f} s, exit code {state[1]}")
    assert state[0] == "false"
    assert state[1] != "137", "killed after the grace period instead of stopping on SIGTERM"
    assert stopped_in < grace


@pytest.fixture
def registry_cluster(tmp_path: Path) -> Iterator[Path]:
    """A private cluster (the shared one's add-ons are not ours to start or stop)."""
    state_dir = tmp_path / "cluster"
    yield state_dir
    LocalCluster(state_dir).down()


# Two image builds, pushes, a registry restarted with TLS and `cluster down`: over 300 s
# on a loaded 2-core machine (measured: cut off at `down`).
@pytest.mark.timeout(900)
def test_push_and_pull_through_the_loopback_registry(
    registry_cluster: Path, runtime: str, tmp_path: Path
) -> None:
    up = cluster_cli(registry_cluster, "up", "--registry")
    assert up.returncode == 0, up.stderr
    cluster = LocalCluster(registry_cluster)
    serving = registry.info(cluster)
    assert serving is not None and serving.host == "127.0.0.1" and not serving.tls
    status = cluster_cli(registry_cluster, "status")
    assert f"registry {serving.url}" in status.stdout

    # the real-node runtime and OLM pull by name from here
    pushed = f"{serving.address}/ansible-operator:test"
    built.podman("tag", runtime, pushed)
    try:
        images.push("podman", pushed, cache=built.cache())
        built.podman("rmi", pushed)
        built.podman("pull", "--tls-verify=false", pushed)
        assert built.podman("image", "inspect", "--format", "{{.Id}}", pushed) == built.podman(
            "image", "inspect", "--format", "{{.Id}}", runtime
        )
    finally:
        built.podman("rmi", "--force", pushed, check=False)

    # the bundle and catalog images OLM installs from, built with podman (the catalog on
    # an opm image made here) and pushed there too
    bundle_image = f"{serving.address}/memcached-operator-bundle:v0.1.0"
    catalog_image = f"{serving.address}/memcached-operator-catalog:v0.1.0"
    context = tmp_path / "catalog-context"
    generate = subprocess.run(
        [
            sys.executable,
            "-m",
            "runner.cli",
            "catalog",
            "generate",
            "--bundle",
            str(REPO / "bundle"),
            "--output",
            str(context / "catalog"),
            "--bundle-image",
            bundle_image,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert generate.returncode == 0, generate.stderr
    try:
        images.build(
            "podman",
            tag=bundle_image,
            dockerfile=str(REPO / "bundle.Dockerfile"),
            context=str(REPO),
            cache=built.cache(),
        )
        images.build(
            "podman",
            tag=catalog_image,
            dockerfile=str(context / "catalog.Dockerfile"),
            context=str(context),
            cache=built.cache(),
            build_args={"OPM_IMAGE": images.LOCAL_BASE},
        )
        for image in (bundle_image, catalog_image):
            images.push("podman", image, cache=built.cache())
    finally:
        built.podman("rmi", "--force", bundle_image, catalog_image, check=False)
    listed = json.loads(process.Endpoint(serving.url).request("/v2/_catalog")[1])
    assert set(listed["repositories"]) == {
        "ansible-operator",
        "memcached-operator-bundle",
        "memcached-operator-catalog",
    }

    # started alone on an up cluster: the same registry (idempotent), then stopped, then
    # down removes the process and its storage
    again = cluster_cli(registry_cluster, "registry")
    assert again.returncode == 0 and again.stdout.strip() == serving.address
    # restarted with TLS from the cluster's CA: verified HTTPS, the same storage
    secure = cluster_cli(registry_cluster, "registry", "--tls")
    assert secure.returncode == 0, secure.stderr
    tls = registry.info(cluster)
    assert tls is not None and tls.tls and tls.ca_file
    assert tls.ca_file == str(registry_cluster / "pki" / "ca.crt")
    https = process.Endpoint(tls.url, ca_file=Path(tls.ca_file))
    assert json.loads(https.request("/v2/_catalog")[1])["repositories"] == sorted(
        listed["repositories"]
    )
    assert not process.Endpoint(f"http://{tls.address}").ok("/v2/")
    addon = cluster.addons()[registry.ADDON]
    storage = registry_cluster / "registry" / "storage"
    assert any(storage.rglob("*"))
    down = cluster_cli(registry_cluster, "down")
    assert down.returncode == 0, down.stderr
    assert not process.is_running(addon.pid, addon.binary)
    assert not registry_cluster.exists()
