"""Bundle images along OLM's own path: the pure parts."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

from runner.devtools.olm import imagerun
from runner.devtools.olm import olmobjects as model


def test_namespace_annotations_place_every_pod_on_the_real_node() -> None:
    annotations = imagerun.real_node_annotations()
    selector = annotations["scheduler.alpha.kubernetes.io/node-selector"]
    assert selector == "ansible-operator.local/real-node=true"
    tolerations = json.loads(annotations["scheduler.alpha.kubernetes.io/defaultTolerations"])
    assert tolerations == [
        {"key": "ansible-operator.local/real-node", "operator": "Exists", "effect": "NoSchedule"}
    ]


def test_catalog_source_from_an_image_runs_its_pod_on_the_real_node() -> None:
    source = model.catalog_source(
        "p-catalog",
        "ns",
        display_name="p",
        image="127.0.0.1:5000/p-catalog:abc",
        pod_config=imagerun.pod_placement(),
    )
    spec = source["spec"]
    assert "address" not in spec
    assert spec["image"] == "127.0.0.1:5000/p-catalog:abc"
    assert spec["grpcPodConfig"]["nodeSelector"] == {"ansible-operator.local/real-node": "true"}
    assert spec["grpcPodConfig"]["securityContextConfig"] == "restricted"
    sub = model.subscription(
        "s",
        "ns",
        package="p",
        channel="alpha",
        source="p-catalog",
        approval="Automatic",
        starting_csv=None,
        config=imagerun.pod_placement(),
    )
    assert sub["spec"]["config"]["tolerations"][0]["key"] == "ansible-operator.local/real-node"


def test_loopback_bundle_images_are_copied_over_plain_http(tmp_path: Path) -> None:
    argv = imagerun.copy_argv("127.0.0.1:5000/b:v1", tmp_path)
    assert "--src-tls-verify=false" in argv
    assert argv[-1] == f"oci:{tmp_path}:bundle"
    assert "--src-tls-verify=false" not in imagerun.copy_argv("quay.io/x/b:v1", tmp_path)


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _blob(layout: Path, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return f"sha256:{digest}"


def test_layers_are_applied_in_order_keeping_only_the_bundle(tmp_path: Path) -> None:
    layout = tmp_path / "layout"
    first = _blob(layout, _tar({"manifests/csv.yaml": b"old", "etc/passwd": b"x"}))
    second = _blob(layout, _tar({"manifests/csv.yaml": b"new", "metadata/a.yaml": b"a"}))
    manifest = json.dumps({"layers": [{"digest": first}, {"digest": second}]}).encode()
    index = {"manifests": [{"digest": _blob(layout, manifest)}]}
    (layout / "index.json").write_text(json.dumps(index), encoding="utf-8")
    target = tmp_path / "bundle"
    target.mkdir()
    imagerun.unpack_layers(layout, target)
    assert (target / "manifests" / "csv.yaml").read_bytes() == b"new"
    assert (target / "metadata" / "a.yaml").read_bytes() == b"a"
    assert not (target / "etc").exists()


def test_registry_pod_must_run_the_image_and_be_ready() -> None:
    pod = {
        "spec": {"containers": [{"image": "i:2"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    assert model.pod_runs_image(pod, "i:2")
    assert not model.pod_runs_image(pod, "i:1")
    pod["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    assert not model.pod_runs_image(pod, "i:2")


def test_an_existing_path_is_a_directory_bundle(tmp_path: Path) -> None:
    assert not imagerun.is_image_reference(str(tmp_path))
    assert imagerun.is_image_reference("127.0.0.1:5000/p-bundle:v0.1.0")
