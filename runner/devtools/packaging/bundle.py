"""Render a registry+v1 bundle as {relative path: file content} (pure).

Layout, as `operator-sdk generate bundle` writes it (paths relative to the directory that
holds the bundle directory, usually the project root):

    bundle.Dockerfile                              FROM scratch, LABELs, COPY lines
    bundle/manifests/<package>.clusterserviceversion.yaml
    bundle/manifests/<group>_<plural>.yaml         one per CRD
    bundle/manifests/<name>_<group>_<version>_<kind>.yaml   extra RBAC, Services, ...
    bundle/metadata/annotations.yaml
    bundle/tests/scorecard/config.yaml

The LABELs of bundle.Dockerfile are exactly the keys and values of annotations.yaml, in
the same order. Extra objects lose `metadata.namespace`: OLM installs them into the
namespace of the operator group.
"""

from __future__ import annotations

import copy
from typing import Any

from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging.csv import BundleOptions, build_csv
from runner.devtools.packaging.projectconfig import Obj, ProjectInputs, group_of, name_of
from runner.devtools.packaging.rbac import split_permissions
from runner.devtools.packaging.webhookdefs import bundle_inputs
from runner.errors import ConfigError
from runner.util import yamlwriter
from runner.util.yamlwriter import CANONICAL

DOCKERFILE = "bundle.Dockerfile"


def bundle_annotations(options: BundleOptions, *, layout: str) -> dict[str, str]:
    """annotations.yaml's mapping, in the order it is written."""
    return {
        olm.MEDIATYPE: olm.MEDIATYPE_REGISTRY_V1,
        olm.MANIFESTS: olm.MANIFESTS_DIR,
        olm.METADATA: olm.METADATA_DIR,
        olm.PACKAGE: options.package,
        olm.CHANNELS: ",".join(options.channels),
        olm.DEFAULT_CHANNEL: options.default_channel or options.channels[0],
        olm.METRICS_BUILDER: olm.BUILDER_VALUE,
        olm.METRICS_MEDIATYPE: "metrics+v1",
        olm.METRICS_LAYOUT: layout,
        olm.TEST_MEDIATYPE: "scorecard+v1",
        olm.TEST_CONFIG: olm.SCORECARD_DIR,
    }


_SECTIONS = (
    ("Core bundle annotations.", "operators.operatorframework.io.bundle."),
    ("Annotations for the tool that built the bundle.", "operators.operatorframework.io.metrics."),
    ("Annotations for testing.", "operators.operatorframework.io.test."),
)


def _sections(values: dict[str, str]) -> list[tuple[str, list[tuple[str, str]]]]:
    return [
        (title, [(k, v) for k, v in values.items() if k.startswith(prefix)])
        for title, prefix in _SECTIONS
    ]


def _scalar(value: str) -> str:
    return yamlwriter.dump(value, style=CANONICAL).removesuffix("\n...\n").rstrip("\n")


def annotations_yaml(values: dict[str, str]) -> str:
    lines = ["annotations:"]
    for title, items in _sections(values):
        if items:
            lines += ["", f"  # {title}"] if len(lines) > 1 else [f"  # {title}"]
            lines += [f"  {key}: {_scalar(value)}" for key, value in items]
    return "\n".join(lines) + "\n"


def dockerfile(values: dict[str, str], *, bundle_dir: str = "bundle") -> str:
    lines = ["FROM scratch", ""]
    for title, items in _sections(values):
        if items:
            lines += [
                f"# {title.replace('annotations', 'labels').replace('Annotations', 'Labels')}"
            ]
            lines += [f"LABEL {key}={value}" for key, value in items] + [""]
    lines += [
        "# Copy files to locations specified by labels.",
        f"COPY {bundle_dir}/manifests /manifests/",
        f"COPY {bundle_dir}/metadata /metadata/",
        f"COPY {bundle_dir}/tests/scorecard /tests/scorecard/",
    ]
    return "\n".join(lines) + "\n"


def default_scorecard() -> Obj:
    def test(suite: str, name: str) -> dict[str, Any]:
        return {
            "entrypoint": ["scorecard-test", name],
            "image": olm.SCORECARD_IMAGE,
            "labels": {"suite": suite, "test": f"{name}-test"},
            "storage": {"spec": {"mountPath": {}}},
        }

    olm_tests = [
        "olm-bundle-validation",
        "olm-crds-have-validation",
        "olm-crds-have-resources",
        "olm-spec-descriptors",
        "olm-status-descriptors",
    ]
    return {
        "apiVersion": "scorecard.operatorframework.io/v1alpha3",
        "kind": "Configuration",
        "metadata": {"name": "config"},
        "stages": [
            {
                "parallel": True,
                "tests": [test("basic", "basic-check-spec")]
                + [test("olm", name) for name in olm_tests],
            }
        ],
        "storage": {"spec": {"mountPath": {}}},
    }


def crd_file_name(crd: Obj) -> str:
    spec = crd.get("spec") or {}
    return f"{spec.get('group')}_{(spec.get('names') or {}).get('plural')}.yaml"


def manifest_file_name(obj: Obj) -> str:
    """operator-sdk's `<name>_<group>_<version>_<kind>.yaml` (no group for core kinds)."""
    parts = [name_of(obj), *str(obj.get("apiVersion", "")).split("/")]
    return "_".join([*parts, str(obj.get("kind", "")).lower()]) + ".yaml"


def _without_namespace(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    (obj.get("metadata") or {}).pop("namespace", None)
    return obj


def render_bundle(
    inputs: ProjectInputs, options: BundleOptions, *, bundle_dir: str = "bundle"
) -> dict[str, str]:
    """Every file of the bundle, keyed by path relative to the bundle's parent directory."""
    split = split_permissions(inputs)
    csv = build_csv(inputs, options, split)
    inputs = bundle_inputs(inputs)  # OLM provides the webhooks' objects (webhookdefs.py)
    manifests: dict[str, str] = {
        f"{options.package}.clusterserviceversion.yaml": yamlwriter.dump(csv, style=CANONICAL),
    }
    for crd in inputs.crds:
        manifests[crd_file_name(crd)] = yamlwriter.dump(_without_namespace(crd), style=CANONICAL)
    for obj in [*split.extras, *inputs.others]:
        kind = str(obj.get("kind", ""))
        if kind not in olm.SUPPORTED_KINDS:
            raise ConfigError(
                f"{kind} {name_of(obj)!r} ({group_of(obj) or 'core'}): a registry+v1 bundle "
                "cannot carry this kind; remove it from config/manifests"
            )
        file_name = manifest_file_name(obj)
        if file_name in manifests:
            raise ConfigError(f"two manifests would both be written to {file_name}")
        manifests[file_name] = yamlwriter.dump(_without_namespace(obj), style=CANONICAL)
    values = bundle_annotations(options, layout=inputs.layout)
    files = {f"{bundle_dir}/manifests/{name}": text for name, text in sorted(manifests.items())}
    files[f"{bundle_dir}/metadata/annotations.yaml"] = annotations_yaml(values)
    files[f"{bundle_dir}/tests/scorecard/config.yaml"] = yamlwriter.dump(
        inputs.scorecard if inputs.scorecard is not None else default_scorecard(), style=CANONICAL
    )
    files[DOCKERFILE] = dockerfile(values, bundle_dir=bundle_dir)
    return files
