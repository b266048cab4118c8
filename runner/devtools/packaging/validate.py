"""`bundle validate`: our checks of a registry+v1 bundle, with operator-sdk's levels.

Errors are what OLM, operator-registry or operator-framework/api refuse (and a few
things they let through but that break an install or an upgrade: a default channel that
is not a channel, labels that disagree with annotations.yaml, unpinned images, RBAC
that does not cover what the roles do); warnings are accepted but worth a look. The
rules on the CSV itself live in csvcheck.py, the RBAC scan in rbaccheck.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.devtools.packaging import csvcheck, olmv1check, rbaccheck
from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging.findings import Finding, error, warning
from runner.devtools.packaging.loader import LoadedBundle, load_bundle
from runner.errors import ConfigError
from runner.structs import bodies

Obj = dict[str, Any]
ANNOTATIONS_FILE = "metadata/annotations.yaml"
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")  # fmt: skip
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _annotations(bundle: LoadedBundle) -> list[Finding]:
    if bundle.annotations is None:
        return [error(ANNOTATIONS_FILE, "", bundle.annotations_error or "missing")]
    values = bundle.annotations
    found = [
        error(ANNOTATIONS_FILE, key, "missing annotation")
        for key in olm.REQUIRED_ANNOTATIONS
        if key not in values
    ]
    expected = {
        olm.MEDIATYPE: olm.MEDIATYPE_REGISTRY_V1,
        olm.MANIFESTS: olm.MANIFESTS_DIR,
        olm.METADATA: olm.METADATA_DIR,
    }
    for key, value in expected.items():
        if key in values and values[key] != value:
            found.append(error(ANNOTATIONS_FILE, key, f"must be {value!r}, is {values[key]!r}"))
    if olm.PACKAGE in values and not values[olm.PACKAGE].strip():
        found.append(error(ANNOTATIONS_FILE, olm.PACKAGE, "must not be empty"))
    channels = [c.strip() for c in values.get(olm.CHANNELS, "").split(",") if c.strip()]
    if olm.CHANNELS in values and not channels:
        found.append(error(ANNOTATIONS_FILE, olm.CHANNELS, "must name at least one channel"))
    default = values.get(olm.DEFAULT_CHANNEL)
    if default is not None and not default.strip():
        found.append(error(ANNOTATIONS_FILE, olm.DEFAULT_CHANNEL, "must not be empty"))
    elif default is not None and channels and default not in channels:
        found.append(
            error(
                ANNOTATIONS_FILE,
                olm.DEFAULT_CHANNEL,
                f"{default!r} is not one of the channels {','.join(channels)}",
            )
        )
    return found


def _dockerfile(bundle: LoadedBundle) -> list[Finding]:
    if bundle.dockerfile_error:
        return [error("bundle.Dockerfile", "", bundle.dockerfile_error)]
    if bundle.labels is None:
        return [
            warning("bundle.Dockerfile", "", "not found next to the bundle; labels not compared")
        ]
    if bundle.annotations is None:
        return []
    name = bundle.dockerfile.name if bundle.dockerfile else "bundle.Dockerfile"
    found = []
    for key, value in bundle.annotations.items():
        if key not in bundle.labels:
            found.append(error(name, f"LABEL {key}", f"missing; annotations.yaml has {value!r}"))
        elif bundle.labels[key] != value:
            found.append(
                error(
                    name,
                    f"LABEL {key}",
                    f"{bundle.labels[key]!r} differs from annotations.yaml's {value!r}",
                )
            )
    for key in bundle.labels:
        if key.startswith("operators.operatorframework.io") and key not in bundle.annotations:
            found.append(error(name, f"LABEL {key}", "not in metadata/annotations.yaml"))
    return found


def _objects(bundle: LoadedBundle) -> list[Finding]:
    found = [error(file, "", problem) for file, problem in bundle.layout_errors]
    for manifest in bundle.manifests:
        if manifest.error:
            found.append(error(manifest.file, "", manifest.error))
            continue
        obj = manifest.obj or {}
        kind = obj.get("kind")
        if not obj.get("apiVersion") or not kind:
            found.append(error(manifest.file, "", "apiVersion and kind are required"))
            continue
        if kind not in olm.SUPPORTED_KINDS:
            found.append(
                error(manifest.file, "kind", f"{kind} is not allowed in a registry+v1 bundle")
            )
        meta = bodies.metadata(obj)
        if not meta.get("name") and not meta.get("generateName"):
            found.append(error(manifest.file, "metadata.name", "required field missing"))
        for key, value in (meta.get("labels") or {}).items():
            if not _LABEL_KEY.match(str(key)) or not _LABEL_VALUE.match(str(value)):
                found.append(error(manifest.file, f"metadata.labels[{key}]", f"invalid: {value!r}"))
    csvs = bundle.csvs
    if not csvs:
        found.append(error("manifests/", "", "no ClusterServiceVersion in the bundle"))
    elif len(csvs) > 1:
        found.append(error("manifests/", "", f"{len(csvs)} ClusterServiceVersions; keep one"))
    if bundle.compressed_size > olm.MAX_BUNDLE_BYTES:
        found.append(error("manifests/", "", f"compressed size {bundle.compressed_size} > 1 MiB"))
    elif bundle.compressed_size > olm.MAX_BUNDLE_BYTES * olm.WARN_BUNDLE_FRACTION:
        found.append(
            warning("manifests/", "", f"compressed size {bundle.compressed_size} near 1 MiB")
        )
    return found


def _crd_structure(file: str, crd: Obj) -> list[Finding]:
    found = []
    if crd.get("apiVersion") != "apiextensions.k8s.io/v1":
        found.append(
            error(file, "apiVersion", f"{crd.get('apiVersion')!r}: use apiextensions.k8s.io/v1")
        )
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not group or not plural or not kind:
        found.append(error(file, "spec", "group, names.plural and names.kind are required"))
    elif bodies.metadata(crd).get("name") != f"{plural}.{group}":
        found.append(error(file, "metadata.name", f"must be {plural}.{group}"))
    crd_versions = spec.get("versions") or []
    if not crd_versions:
        found.append(error(file, "spec.versions", "at least one version is required"))
    if sum(1 for v in crd_versions if v.get("storage")) != 1:
        found.append(
            error(file, "spec.versions", "exactly one version must be the storage version")
        )
    for index, version in enumerate(crd_versions):
        if not (version.get("schema") or {}).get("openAPIV3Schema"):
            found.append(
                error(file, f"spec.versions[{index}].schema", "openAPIV3Schema is required")
            )
    return found


def _crds(bundle: LoadedBundle, csv_file: str, csv: Obj) -> list[Finding]:
    found: list[Finding] = []
    by_key: dict[tuple[str, str], tuple[str, Obj]] = {}
    for file, crd in bundle.crds:
        found += _crd_structure(file, crd)
        spec = crd.get("spec") or {}
        key = (str(spec.get("group")), str((spec.get("names") or {}).get("kind")))
        if key in by_key:
            found.append(error(file, "", f"duplicate CRD for {key[0]} {key[1]}"))
        by_key[key] = (file, crd)
    owned_group_kinds = set()
    for index, (name, group, version, kind) in enumerate(csvcheck.owned_keys(csv)):
        field = f"spec.customresourcedefinitions.owned[{index}]"
        owned_group_kinds.add((group, kind))
        if (group, kind) not in by_key:
            found.append(
                error(csv_file, field, f"owned CRD {name} ({kind}) not found in manifests/")
            )
            continue
        crd_file, crd = by_key[(group, kind)]
        if bodies.metadata(crd).get("name") != name:
            found.append(
                error(
                    csv_file,
                    f"{field}.name",
                    f"{name!r} but {crd_file} defines {crd['metadata'].get('name')!r}",
                )
            )
        served = [
            v.get("name") for v in (crd.get("spec") or {}).get("versions") or [] if v.get("served")
        ]
        if version not in served:
            found.append(
                error(
                    csv_file,
                    f"{field}.version",
                    f"{version!r} is not served by {crd_file} "
                    f"(served: {', '.join(map(str, served)) or 'none'})",
                )
            )
    for (group, kind), (file, _) in sorted(by_key.items()):
        if (group, kind) not in owned_group_kinds:
            found.append(
                error(file, "", f"CRD {group} {kind} is in the bundle but not owned by the CSV")
            )
    return found


def _service_accounts(bundle: LoadedBundle, csv: Obj) -> list[Finding]:
    deployments = (((csv.get("spec") or {}).get("install") or {}).get("spec") or {}).get(
        "deployments"
    ) or []
    accounts = {
        str(
            (((d.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "serviceAccountName"
            )
            or "default"
        )
        for d in deployments
    }
    return [
        error(
            file,
            "metadata.name",
            f"ServiceAccount {sa['metadata'].get('name')!r} is created by OLM from the CSV; "
            "remove this manifest",
        )
        for file, sa in bundle.objects("ServiceAccount")
        if bodies.metadata(sa).get("name") in accounts
    ]


def _rbac(bundle: LoadedBundle, csv: Obj, project: Path) -> list[Finding]:
    strategy = ((csv.get("spec") or {}).get("install") or {}).get("spec") or {}
    rules = [
        rule
        for entry in [
            *(strategy.get("permissions") or []),
            *(strategy.get("clusterPermissions") or []),
        ]
        for rule in entry.get("rules") or []
    ]
    plurals = {}
    for _, crd in bundle.crds:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        plurals[(str(spec.get("group")), str(names.get("kind")))] = str(names.get("plural"))
    return rbaccheck.check_uses(rbaccheck.scan_project(project), rules, plurals)


# The rule suites a user selects (`bundle validate --suite`): OLM v0's rules on the
# registry+v1 format, and those plus what OLM v1 refuses (olmv1check.py).
SUITES = ("olm-v0", "olm-v1")


def validate_loaded(
    bundle: LoadedBundle,
    *,
    project: Path | None = None,
    suite: str = "olm-v0",
    others: Iterable[LoadedBundle] = (),
) -> list[Finding]:
    """Every rule of `suite` on a loaded bundle; `project` (with watches.yaml, roles/)
    adds the RBAC scan; `others` are bundles of other extensions (the `olm-v1` suite
    refuses objects shared with them)."""
    if suite not in SUITES:
        raise ConfigError(f"--suite {suite!r}: one of {', '.join(SUITES)}")
    found = [*_objects(bundle), *_annotations(bundle), *_dockerfile(bundle)]
    if suite == "olm-v1":
        found += olmv1check.check_bundle(bundle, others)
    package = (bundle.annotations or {}).get(olm.PACKAGE)
    for file, csv in bundle.csvs:
        found += csvcheck.check_csv(file, csv, package=package)
        found += _crds(bundle, file, csv)
        found += _service_accounts(bundle, csv)
        if project is not None:
            found += _rbac(bundle, csv, project)
    return sorted(set(found), key=lambda f: (f.level != "error", f.file, f.field, f.message))


def default_project(directory: Path) -> Path | None:
    """The project a bundle directory came from: its parent, when that has watches.yaml."""
    parent = directory.resolve().parent
    return parent if (parent / "watches.yaml").is_file() else None


def validate_bundle(
    directory: Path,
    *,
    project: Path | None = None,
    dockerfile: Path | None = None,
    suite: str = "olm-v0",
    others: Iterable[Path] = (),
) -> list[Finding]:
    other_bundles = [load_bundle(path) for path in others]
    return validate_loaded(
        load_bundle(directory, dockerfile=dockerfile),
        project=project,
        suite=suite,
        others=other_bundles,
    )
