"""Bundles installed from images, along OLM's own path.

`olm run-bundle <bundle image>` (and `bundle-upgrade <bundle image>`) do what
`operator-sdk run bundle` does on a cluster with a registry:

- the bundle image's `manifests/` and `metadata/` are read (skopeo copies the image into
  an OCI layout; its layers are unpacked here) to validate the bundle and learn its
  package, channel and CSV;
- the run's file-based catalog gets the bundle with `image` set to the bundle image, and
  a catalog image is built from it on the opm image made here (`catalog.Dockerfile`,
  `opm serve /configs`), tagged with a digest of the catalog and pushed to the cluster's
  registry;
- the CatalogSource names that image: OLM's catalog operator starts the registry pod
  itself (on the real node, through `grpcPodConfig`) and dials its Service (through
  `olm-service-dial`, see `servicedial.py`); to install, it unpacks the bundle image with
  a Job (`--opmImage`, `--util-image`) in the CatalogSource's namespace.

OLM lets a Subscription (`spec.config`) and a CatalogSource (`spec.grpcPodConfig`) carry a
node selector and tolerations, but not its bundle unpack Jobs: the namespace gets the
annotations of the API server's PodNodeSelector and PodTolerationRestriction admission
plugins, which give every pod created in it the real node's selector and toleration.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.devtools import images
from runner.devtools.cluster import registry
from runner.devtools.cluster.local import LocalCluster
from runner.devtools.cluster.realnode import nodeconfig
from runner.devtools.olm import control
from runner.devtools.olm.catalogimages import container_tool
from runner.devtools.packaging import catalog
from runner.errors import ClusterError, ConfigError

Progress = Callable[[str], None]
Obj = dict[str, Any]

NODE_SELECTOR_ANNOTATION = "scheduler.alpha.kubernetes.io/node-selector"
TOLERATIONS_ANNOTATION = "scheduler.alpha.kubernetes.io/defaultTolerations"
# What OLM's registry pods listen on (the Service's port).
REGISTRY_PORT = 50051
_BUNDLE_DIRS = ("manifests", "metadata")


def is_image_reference(source: str) -> bool:
    """A bundle argument that is not a directory here is an image reference."""
    return not Path(source).exists()


def real_node_annotations() -> dict[str, str]:
    """Namespace annotations that put every pod of the namespace on the real node."""
    selector = ",".join(f"{k}={v}" for k, v in nodeconfig.NODE_SELECTOR.items())
    return {
        NODE_SELECTOR_ANNOTATION: selector,
        TOLERATIONS_ANNOTATION: json.dumps([nodeconfig.TOLERATION]),
    }


def pod_placement() -> Obj:
    """The node selector and toleration of the real node, as OLM's `config` and
    `grpcPodConfig` take them."""
    return {
        "nodeSelector": dict(nodeconfig.NODE_SELECTOR),
        "tolerations": [dict(nodeconfig.TOLERATION)],
    }


def registry_address(cluster: LocalCluster) -> str:
    """The cluster's registry, where catalog images go; OLM must have been installed
    with its images (which needs that registry)."""
    found = registry.info(cluster)
    if found is None:
        raise ClusterError(
            f"installing a bundle image needs the cluster's registry and a real node: "
            f"`ansible-operator cluster up --registry --real-node` (state {cluster.state_dir})"
        )
    if control.load_images(cluster) is None:
        raise ClusterError(
            "OLM was installed before the cluster had a registry: run "
            "`ansible-operator olm uninstall` and `ansible-operator olm install` again"
        )
    return found.address


def copy_argv(image: str, layout: Path) -> list[str]:
    argv = ["skopeo", "copy"]
    if images.is_loopback_registry(image):
        argv.append("--src-tls-verify=false")
    return [*argv, f"docker://{image}", f"oci:{layout}:bundle"]


def _blob(layout: Path, digest: str) -> Path:
    algorithm, _, value = digest.partition(":")
    return layout / "blobs" / algorithm / value


def unpack_layers(layout: Path, target: Path) -> None:
    """Apply the image's layers in order, keeping only the bundle's directories."""
    index = json.loads((layout / "index.json").read_text(encoding="utf-8"))
    manifest = json.loads(_blob(layout, index["manifests"][0]["digest"]).read_text("utf-8"))
    for layer in manifest["layers"]:
        with tarfile.open(_blob(layout, layer["digest"]), mode="r:*") as tar:
            members = []
            for member in tar.getmembers():
                name = member.name.lstrip("./")
                top = name.split("/", 1)[0]
                if top not in _BUNDLE_DIRS or "/.wh." in f"/{name}":
                    continue
                member.name = name
                members.append(member)
            tar.extractall(target, members=members, filter="data")


def pull_bundle(image: str, target: Path, *, progress: Progress) -> Path:
    """The bundle image's `manifests/` and `metadata/` in `target` (a new directory)."""
    if shutil.which("skopeo") is None:
        raise ClusterError("skopeo is not installed (apt-get install -y skopeo)")
    progress(f"reading the bundle image {image}")
    with tempfile.TemporaryDirectory(prefix="bundle-image-") as work:
        layout = Path(work) / "layout"
        copied = subprocess.run(copy_argv(image, layout), capture_output=True, text=True)
        if copied.returncode != 0:
            raise ConfigError(f"cannot pull the bundle image {image}: {copied.stderr.strip()}")
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        unpack_layers(layout, target)
    if not (target / "manifests").is_dir():
        raise ConfigError(f"{image}: not a bundle image (no /manifests directory)")
    return target


def catalog_digest(catalog_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in catalog_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(catalog_dir)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def catalog_image(
    cluster: LocalCluster,
    catalog_dir: Path,
    package: str,
    *,
    address: str | None = None,
    progress: Progress,
) -> str:
    """Build the catalog image of `catalog_dir` on the opm image made here and push it to
    the registry at `address` (default: the cluster's, for OLM v0 installed with its
    images); its tag is a digest of the catalog."""
    address = address or registry_address(cluster)
    tool = container_tool()
    name = f"{address}/{package}-catalog:{catalog_digest(catalog_dir)}"
    dockerfile = catalog_dir.parent / "catalog.Dockerfile"
    dockerfile.write_text(catalog.catalog_dockerfile(catalog_dir.name), encoding="utf-8")
    images.build(
        tool,
        tag=name,
        dockerfile=str(dockerfile),
        context=str(catalog_dir.parent),
        cache=cluster.cache,
        build_args={"OPM_IMAGE": images.LOCAL_BASE},
        progress=progress,
    )
    images.push(tool, name, cache=cluster.cache, progress=progress)
    return name


def service_address(catalog_source: str, namespace: str) -> str:
    """The address OLM's catalog operator dials for a CatalogSource with an image."""
    return f"{catalog_source}.{namespace}.svc:{REGISTRY_PORT}"
