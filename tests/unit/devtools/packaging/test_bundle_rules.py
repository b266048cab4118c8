"""Every rule of `bundle validate`, each with a bundle broken in exactly that way."""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.bundles import GUESTBOOK_CSV, edit_yaml

from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging.validate import validate_bundle

Break = Callable[[Path], None]
CRD_FILE = "manifests/web.example.com_guestbooks.yaml"
ANNOTATIONS = "metadata/annotations.yaml"


def csv(change: Callable[[dict[str, Any]], None]) -> Break:
    return lambda bundle: edit_yaml(bundle / GUESTBOOK_CSV, change)


def crd(change: Callable[[dict[str, Any]], None]) -> Break:
    return lambda bundle: edit_yaml(bundle / CRD_FILE, change)


def annotation(key: str, value: str | None) -> Break:
    def change(data: dict[str, Any]) -> None:
        if value is None:
            data["annotations"].pop(key)
        else:
            data["annotations"][key] = value

    return lambda bundle: edit_yaml(bundle / ANNOTATIONS, change)


def write(relative: str, text: str) -> Break:
    def apply(bundle: Path) -> None:
        (bundle / relative).parent.mkdir(parents=True, exist_ok=True)
        (bundle / relative).write_text(text)

    return apply


def remove(relative: str) -> Break:
    def apply(bundle: Path) -> None:
        path = bundle / relative
        shutil.rmtree(path) if path.is_dir() else path.unlink()

    return apply


def dockerfile(old: str, new: str) -> Break:
    def apply(bundle: Path) -> None:
        path = bundle.parent / "bundle.Dockerfile"
        path.write_text(path.read_text().replace(old, new))

    return apply


def container(key: str, value: Any) -> Break:
    def change(data: dict[str, Any]) -> None:
        pod = data["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]
        pod["containers"][0][key] = value

    return csv(change)


def annotate(key: str, value: str) -> Break:
    return csv(lambda d: d["metadata"]["annotations"].__setitem__(key, value))


def example(value: str) -> Break:
    return annotate("alm-examples", value)


def modes(change: Callable[[list[dict[str, Any]]], None]) -> Break:
    return csv(lambda d: change(d["spec"]["installModes"]))


def set_spec(key: str, value: Any) -> Break:
    return csv(lambda d: d["spec"].__setitem__(key, value))


def pop_spec(key: str) -> Break:
    return csv(lambda d: d["spec"].pop(key))


def owned(key: str, value: Any) -> Break:
    return csv(lambda d: d["spec"]["customresourcedefinitions"]["owned"][0].__setitem__(key, value))


def crd_version(key: str, value: Any) -> Break:
    return crd(lambda d: d["spec"]["versions"][0].__setitem__(key, value))


def big_configmap(size: int) -> Break:
    data = base64.b64encode(os.urandom(size)).decode()
    text = yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"x": data}}
    )
    return write("manifests/big_v1_configmap.yaml", text)


WRONG_CASE_SKIP_RANGE = "olm.skiprange"
SA = {"apiVersion": "v1", "kind": "ServiceAccount"}

CASES = [
    # layout and objects
    pytest.param(
        write("manifests/sub/x.yaml", "{}"), "error", "manifests/sub", "subdirectory", id="subdir"
    ),
    pytest.param(
        write("manifests/.hidden", "x"), "error", "manifests/.hidden", "hidden", id="hidden"
    ),
    pytest.param(remove("manifests"), "error", "manifests/", "missing", id="no-manifests"),
    pytest.param(remove("metadata"), "error", "metadata/", "missing", id="no-metadata"),
    pytest.param(
        write("manifests/x.yaml", "a: [b"),
        "error",
        "manifests/x.yaml",
        "not valid YAML",
        id="bad-yaml",
    ),
    pytest.param(
        write("manifests/x.yaml", "a: 1\n---\nb: 2\n"),
        "error",
        "manifests/x.yaml",
        "one object",
        id="two-docs",
    ),
    pytest.param(
        write("manifests/x.yaml", "metadata: {name: x}\n"),
        "error",
        "manifests/x.yaml",
        "apiVersion and kind",
        id="no-kind",
    ),
    pytest.param(
        write("manifests/x.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"),
        "error",
        "manifests/x.yaml",
        "not allowed",
        id="unsupported-kind",
    ),
    pytest.param(
        write("manifests/x.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n"),
        "error",
        "manifests/x.yaml",
        "required field missing",
        id="no-name",
    ),
    pytest.param(
        write(
            "manifests/x.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, labels: {a: 'b c'}}\n",
        ),
        "error",
        "manifests/x.yaml",
        "invalid",
        id="bad-label",
    ),
    pytest.param(
        remove(GUESTBOOK_CSV), "error", "manifests/", "no ClusterServiceVersion", id="no-csv"
    ),
    pytest.param(
        lambda b: shutil.copy(b / GUESTBOOK_CSV, b / "manifests/copy.clusterserviceversion.yaml"),
        "error",
        "manifests/",
        "2 ClusterServiceVersions",
        id="two-csvs",
    ),
    pytest.param(big_configmap(1_200_000), "error", "manifests/", "> 1 MiB", id="too-big"),
    pytest.param(
        big_configmap(960_000), "warning", "manifests/", "near 1 MiB", id="nearly-too-big"
    ),
    # metadata/annotations.yaml
    pytest.param(remove(ANNOTATIONS), "error", ANNOTATIONS, "missing", id="no-annotations"),
    pytest.param(
        write(ANNOTATIONS, "annotations: [x"),
        "error",
        ANNOTATIONS,
        "not valid YAML",
        id="bad-annotations-yaml",
    ),
    pytest.param(
        write(ANNOTATIONS, "labels: {}\n"),
        "error",
        ANNOTATIONS,
        "no `annotations`",
        id="no-annotations-map",
    ),
    pytest.param(
        annotation(olm.PACKAGE, None), "error", ANNOTATIONS, "missing annotation", id="no-package"
    ),
    pytest.param(
        annotation(olm.MEDIATYPE, "plain+v0"),
        "error",
        ANNOTATIONS,
        "must be 'registry+v1'",
        id="mediatype",
    ),
    pytest.param(
        annotation(olm.MANIFESTS, "manifests"),
        "error",
        ANNOTATIONS,
        "must be 'manifests/'",
        id="manifests-dir",
    ),
    pytest.param(
        annotation(olm.METADATA, "meta/"),
        "error",
        ANNOTATIONS,
        "must be 'metadata/'",
        id="metadata-dir",
    ),
    pytest.param(
        annotation(olm.PACKAGE, " "), "error", ANNOTATIONS, "must not be empty", id="empty-package"
    ),
    pytest.param(
        annotation(olm.CHANNELS, ""),
        "error",
        ANNOTATIONS,
        "at least one channel",
        id="empty-channels",
    ),
    pytest.param(
        annotation(olm.DEFAULT_CHANNEL, ""),
        "error",
        ANNOTATIONS,
        "must not be empty",
        id="empty-default",
    ),
    pytest.param(
        annotation(olm.DEFAULT_CHANNEL, "stable"),
        "error",
        ANNOTATIONS,
        "not one of the channels",
        id="default-not-a-channel",
    ),
    # bundle.Dockerfile
    pytest.param(
        lambda b: (b.parent / "bundle.Dockerfile").unlink(),
        "warning",
        "bundle.Dockerfile",
        "not found",
        id="no-dockerfile",
    ),
    pytest.param(
        dockerfile("LABEL operators", "LABEL broken\nLABEL operators"),
        "error",
        "bundle.Dockerfile",
        "not key=value",
        id="bad-label-syntax",
    ),
    pytest.param(
        dockerfile("channels.v1=alpha", "channels.v1=beta"),
        "error",
        "bundle.Dockerfile",
        "differs",
        id="label-differs",
    ),
    pytest.param(
        dockerfile(
            "LABEL operators.operatorframework.io.bundle.package.v1=guestbook-operator\n", ""
        ),
        "error",
        "bundle.Dockerfile",
        "missing",
        id="label-missing",
    ),
    pytest.param(
        dockerfile(
            "FROM scratch\n", "FROM scratch\nLABEL operators.operatorframework.io.extra=x\n"
        ),
        "error",
        "bundle.Dockerfile",
        "not in metadata",
        id="label-extra",
    ),
    # the CSV: names and versions
    pytest.param(
        csv(lambda d: d.__setitem__("apiVersion", "v1")),
        "error",
        GUESTBOOK_CSV,
        "must be operators.coreos.com/v1alpha1",
        id="csv-apiversion",
    ),
    pytest.param(
        csv(lambda d: d["metadata"].__setitem__("name", "Guest_Book.v1.2.3")),
        "error",
        GUESTBOOK_CSV,
        "DNS-1123",
        id="csv-name-format",
    ),
    pytest.param(
        csv(lambda d: d["metadata"].__setitem__("name", "other.v1.2.3")),
        "error",
        GUESTBOOK_CSV,
        "must be guestbook-operator.v1.2.3",
        id="csv-name-package",
    ),
    pytest.param(
        pop_spec("version"), "error", GUESTBOOK_CSV, "required field missing", id="no-version"
    ),
    pytest.param(
        set_spec("version", "v1.2"),
        "error",
        GUESTBOOK_CSV,
        "not a semantic version",
        id="bad-version",
    ),
    pytest.param(
        pop_spec("displayName"),
        "error",
        GUESTBOOK_CSV,
        "required field missing",
        id="no-display-name",
    ),
    pytest.param(
        set_spec("replaces", "Bad_Name"), "error", GUESTBOOK_CSV, "DNS-1123", id="replaces-format"
    ),
    pytest.param(
        set_spec("replaces", "guestbook-operator.v2.0.0"),
        "error",
        GUESTBOOK_CSV,
        "not older",
        id="replaces-newer",
    ),
    pytest.param(
        annotate(olm.SKIP_RANGE, "soon"), "error", GUESTBOOK_CSV, "comparison", id="bad-skip-range"
    ),
    pytest.param(
        annotate(WRONG_CASE_SKIP_RANGE, ">=1.0.0"),
        "error",
        GUESTBOOK_CSV,
        "wrong case",
        id="annotation-case",
    ),
    # examples
    pytest.param(
        csv(lambda d: d["metadata"]["annotations"].pop("alm-examples")),
        "warning",
        GUESTBOOK_CSV,
        "no examples",
        id="no-examples",
    ),
    pytest.param(
        example('[{"apiVersion": '), "error", GUESTBOOK_CSV, "not valid JSON", id="examples-json"
    ),
    pytest.param(example('{"a": 1}'), "error", GUESTBOOK_CSV, "JSON list", id="examples-not-list"),
    pytest.param(
        example('[{"kind": "Guestbook"}]'),
        "error",
        GUESTBOOK_CSV,
        "needs apiVersion and kind",
        id="example-no-apiversion",
    ),
    pytest.param(
        example('[{"apiVersion": "x.io/v1", "kind": "X"}]'),
        "error",
        GUESTBOOK_CSV,
        "not an owned CRD",
        id="example-not-owned",
    ),
    pytest.param(
        example("[]"), "warning", GUESTBOOK_CSV, "has no example", id="owned-without-example"
    ),
    # install modes
    pytest.param(
        pop_spec("installModes"),
        "error",
        GUESTBOOK_CSV,
        "install modes not found",
        id="no-install-modes",
    ),
    pytest.param(
        modes(lambda m: m.append(dict(m[3]))),
        "error",
        GUESTBOOK_CSV,
        "duplicate install mode",
        id="duplicate-mode",
    ),
    pytest.param(
        modes(lambda m: m.append({"type": "Cluster", "supported": True})),
        "error",
        GUESTBOOK_CSV,
        "unknown install mode",
        id="unknown-mode",
    ),
    pytest.param(
        modes(lambda m: m.pop(0)),
        "error",
        GUESTBOOK_CSV,
        "missing install mode(s) OwnNamespace",
        id="missing-mode",
    ),
    pytest.param(
        modes(lambda m: [x.__setitem__("supported", False) for x in m]),
        "error",
        GUESTBOOK_CSV,
        "none of the install modes",
        id="none-supported",
    ),
    pytest.param(pop_spec("minKubeVersion"), "warning", GUESTBOOK_CSV, "not set", id="no-min-kube"),
    pytest.param(
        set_spec("minKubeVersion", "1.25"),
        "error",
        GUESTBOOK_CSV,
        "not a semantic version",
        id="bad-min-kube",
    ),
    # install strategy and images
    pytest.param(
        pop_spec("install"), "error", GUESTBOOK_CSV, "required field missing", id="no-install"
    ),
    pytest.param(
        csv(lambda d: d["spec"]["install"].__setitem__("strategy", "helm")),
        "error",
        GUESTBOOK_CSV,
        "must be 'deployment'",
        id="strategy",
    ),
    pytest.param(
        csv(lambda d: d["spec"]["install"]["spec"].__setitem__("deployments", [])),
        "error",
        GUESTBOOK_CSV,
        "no deployments",
        id="no-deployments",
    ),
    pytest.param(
        csv(lambda d: d["spec"]["install"]["spec"]["deployments"][0].pop("name")),
        "error",
        GUESTBOOK_CSV,
        "required field missing",
        id="deployment-name",
    ),
    pytest.param(
        csv(
            lambda d: d["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"][
                "spec"
            ].__setitem__("containers", [])
        ),
        "error",
        GUESTBOOK_CSV,
        "no containers",
        id="no-containers",
    ),
    pytest.param(
        container("image", "example.com/op:latest"),
        "error",
        GUESTBOOK_CSV,
        ":latest",
        id="latest-image",
    ),
    pytest.param(
        container("image", "example.com/op"), "error", GUESTBOOK_CSV, "no tag", id="untagged-image"
    ),
    pytest.param(container("image", ""), "error", GUESTBOOK_CSV, "empty", id="no-image"),
    pytest.param(
        set_spec("relatedImages", [{"name": "r", "image": "redis"}]),
        "error",
        GUESTBOOK_CSV,
        "no tag",
        id="related-untagged",
    ),
    pytest.param(
        annotate("containerImage", "example.com/op:latest"),
        "error",
        GUESTBOOK_CSV,
        ":latest",
        id="container-image-annotation",
    ),
    # owned CRDs against the CRD manifests
    pytest.param(
        owned("name", "guestbooks"), "error", GUESTBOOK_CSV, "PLURAL.GROUP", id="owned-name-format"
    ),
    pytest.param(
        owned("version", "v9"), "error", GUESTBOOK_CSV, "not served", id="owned-version-not-served"
    ),
    pytest.param(
        owned("version", "v1beta1"),
        "error",
        GUESTBOOK_CSV,
        "not served",
        id="owned-version-unserved",
    ),
    pytest.param(
        owned("name", "books.web.example.com"),
        "error",
        GUESTBOOK_CSV,
        "defines 'guestbooks.web.example.com'",
        id="owned-name-mismatch",
    ),
    pytest.param(
        remove(CRD_FILE), "error", GUESTBOOK_CSV, "not found in manifests", id="owned-crd-missing"
    ),
    pytest.param(
        csv(lambda d: d["spec"]["customresourcedefinitions"].__setitem__("owned", [])),
        "error",
        CRD_FILE,
        "not owned by the CSV",
        id="crd-not-owned",
    ),
    pytest.param(
        lambda b: shutil.copy(b / CRD_FILE, b / "manifests/copy.yaml"),
        "error",
        CRD_FILE,
        "duplicate CRD",
        id="duplicate-crd",
    ),
    pytest.param(
        crd(lambda d: d.__setitem__("apiVersion", "apiextensions.k8s.io/v1beta1")),
        "error",
        CRD_FILE,
        "use apiextensions.k8s.io/v1",
        id="crd-v1beta1",
    ),
    pytest.param(
        crd(lambda d: d["spec"]["names"].pop("plural")),
        "error",
        CRD_FILE,
        "names.plural",
        id="crd-no-plural",
    ),
    pytest.param(
        crd(lambda d: d["metadata"].__setitem__("name", "x.web.example.com")),
        "error",
        CRD_FILE,
        "must be guestbooks.web.example.com",
        id="crd-name",
    ),
    pytest.param(
        crd(lambda d: d["spec"].__setitem__("versions", [])),
        "error",
        CRD_FILE,
        "at least one version",
        id="crd-no-versions",
    ),
    pytest.param(
        crd_version("storage", False), "error", CRD_FILE, "storage version", id="crd-storage"
    ),
    pytest.param(
        crd(lambda d: d["spec"]["versions"][0].pop("schema")),
        "error",
        CRD_FILE,
        "openAPIV3Schema",
        id="crd-schema",
    ),
    # service accounts
    pytest.param(
        write(
            "manifests/sa.yaml",
            yaml.safe_dump({**SA, "metadata": {"name": "guestbook-operator-controller-manager"}}),
        ),
        "error",
        "manifests/sa.yaml",
        "created by OLM",
        id="service-account-clash",
    ),
]


def test_generated_bundle_is_clean(bundle_dir: Path, guestbook: Path) -> None:
    assert validate_bundle(bundle_dir, project=guestbook) == []


@pytest.mark.parametrize(("breaks", "level", "file", "message"), CASES)
def test_rule(bundle_dir: Path, breaks: Break, level: str, file: str, message: str) -> None:
    breaks(bundle_dir)
    findings = validate_bundle(bundle_dir)
    matching = [f for f in findings if f.level == level and f.file == file and message in f.message]
    assert matching, "\n".join(map(str, findings)) or "no findings"
