"""Rules for one ClusterServiceVersion (pure): fields, names, versions, examples,
install modes, images.

Each rule returns findings naming the field and the offending value. Errors are what
OLM or operator-framework/api would refuse; warnings are what they accept but
operator-sdk warns about (no examples for an API, no minKubeVersion).
"""

from __future__ import annotations

import json
from typing import Any

from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging import versions
from runner.devtools.packaging.findings import Finding, error, warning
from runner.devtools.packaging.kustomize import image_name
from runner.structs import bodies

Obj = dict[str, Any]


def image_problem(image: str) -> str | None:
    """Why an image reference is not pinned (untagged or :latest), or None."""
    if not image:
        return "the image is empty"
    if "@sha256:" in image:
        return None
    if image_name(image) == image:
        return f"image {image!r} has no tag (it means :latest)"
    if image.endswith(":latest"):
        return f"image {image!r} uses the :latest tag"
    return None


def owned_keys(csv: Obj) -> list[tuple[str, str, str, str]]:
    """(crd name, group, version, kind) of each owned CRD description."""
    owned = ((csv.get("spec") or {}).get("customresourcedefinitions") or {}).get("owned") or []
    keys = []
    for entry in owned:
        name = str(entry.get("name", ""))
        keys.append(
            (name, name.partition(".")[2], str(entry.get("version", "")), str(entry.get("kind")))
        )
    return keys


def _names(file: str, csv: Obj, package: str | None) -> list[Finding]:
    found: list[Finding] = []
    meta, spec = bodies.metadata(csv), csv.get("spec") or {}
    if csv.get("apiVersion") != olm.CSV_API_VERSION:
        found.append(
            error(
                file, "apiVersion", f"must be {olm.CSV_API_VERSION}, is {csv.get('apiVersion')!r}"
            )
        )
    name = str(meta.get("name", ""))
    problem = versions.name_error(name)
    if problem:
        found.append(error(file, "metadata.name", f"{name!r}: {problem}"))
    version = spec.get("version")
    if version in (None, ""):
        found.append(error(file, "spec.version", "required field missing"))
    elif not versions.is_semver(str(version)):
        found.append(error(file, "spec.version", f"{version!r} is not a semantic version"))
    elif package and name != f"{package}.v{version}":
        found.append(
            error(
                file, "metadata.name", f"{name!r} must be {package}.v{version} (package.vVERSION)"
            )
        )
    if not spec.get("displayName"):
        found.append(error(file, "spec.displayName", "required field missing"))
    replaces = spec.get("replaces")
    if replaces:
        problem = versions.name_error(str(replaces))
        parsed = versions.split_csv_name(str(replaces))
        if problem:
            found.append(error(file, "spec.replaces", f"{replaces!r}: {problem}"))
        elif (
            parsed
            and versions.is_semver(parsed[1])
            and versions.is_semver(str(version))
            and versions.Version(parsed[1]) >= versions.Version(str(version))
        ):
            found.append(
                error(file, "spec.replaces", f"{replaces!r} is not older than version {version}")
            )
    skip_range = (meta.get("annotations") or {}).get(olm.SKIP_RANGE)
    if skip_range is not None:
        problem = versions.range_error(str(skip_range))
        if problem:
            found.append(error(file, f"metadata.annotations[{olm.SKIP_RANGE}]", problem))
    return found


def _annotation_case(file: str, csv: Obj) -> list[Finding]:
    found = []
    known = {key.lower(): key for key in olm.CASE_SENSITIVE_ANNOTATIONS}
    for key in bodies.annotations(csv):
        expected = known.get(str(key).lower())
        if expected and key != expected:
            found.append(
                error(file, f"metadata.annotations[{key}]", f"wrong case; OLM reads {expected}")
            )
    return found


def _examples(file: str, csv: Obj) -> list[Finding]:
    field = f"metadata.annotations[{olm.ALM_EXAMPLES}]"
    annotations = bodies.annotations(csv)
    raw = annotations.get(olm.ALM_EXAMPLES, annotations.get("olm.examples"))
    if raw is None:
        return [warning(file, field, "no examples: the console shows no sample to create")]
    try:
        examples = json.loads(raw) if str(raw).strip() else []
    except json.JSONDecodeError as exc:
        return [error(file, field, f"not valid JSON: {exc}")]
    if not isinstance(examples, list):
        return [error(file, field, "must be a JSON list of objects")]
    provided = {(group, version, kind) for _, group, version, kind in owned_keys(csv)}
    found: list[Finding] = []
    seen = set()
    for index, example in enumerate(examples):
        if (
            not isinstance(example, dict)
            or not example.get("apiVersion")
            or not example.get("kind")
        ):
            found.append(error(file, f"{field}[{index}]", "needs apiVersion and kind"))
            continue
        group, _, version = str(example["apiVersion"]).rpartition("/")
        gvk = (group, version, str(example["kind"]))
        seen.add(gvk)
        if gvk not in provided:
            found.append(
                error(
                    file,
                    f"{field}[{index}]",
                    f"{example['apiVersion']} {example['kind']} is not an owned CRD version",
                )
            )
    for group, version, kind in sorted(provided - seen):
        found.append(warning(file, field, f"owned API {group}/{version} {kind} has no example"))
    return found


def _install_modes(file: str, csv: Obj) -> list[Finding]:
    modes = (csv.get("spec") or {}).get("installModes")
    field = "spec.installModes"
    if not modes:
        return [error(file, field, "install modes not found")]
    found: list[Finding] = []
    types = [str(m.get("type")) for m in modes if isinstance(m, dict)]
    for mode_type in sorted({t for t in types if types.count(t) > 1}):
        found.append(error(file, field, f"duplicate install mode {mode_type}"))
    for mode_type in sorted(set(types) - set(olm.INSTALL_MODE_TYPES)):
        found.append(error(file, field, f"unknown install mode type {mode_type!r}"))
    missing = [t for t in olm.INSTALL_MODE_TYPES if t not in types]
    if missing:
        found.append(error(file, field, f"missing install mode(s) {', '.join(missing)}"))
    if not any(isinstance(m, dict) and m.get("supported") is True for m in modes):
        found.append(error(file, field, "none of the install modes is supported"))
    return found


def _min_kube(file: str, csv: Obj) -> list[Finding]:
    value = (csv.get("spec") or {}).get("minKubeVersion")
    if not value:
        return [warning(file, "spec.minKubeVersion", "not set; OLM installs on any version")]
    if not versions.is_semver(str(value)):
        return [error(file, "spec.minKubeVersion", f"{value!r} is not a semantic version")]
    return []


def _install(file: str, csv: Obj) -> list[Finding]:
    install = (csv.get("spec") or {}).get("install")
    if not isinstance(install, dict):
        return [error(file, "spec.install", "required field missing")]
    found: list[Finding] = []
    if install.get("strategy") != "deployment":
        found.append(
            error(
                file,
                "spec.install.strategy",
                f"must be 'deployment', is {install.get('strategy')!r}",
            )
        )
    deployments = (install.get("spec") or {}).get("deployments") or []
    if not deployments:
        found.append(error(file, "spec.install.spec.deployments", "no deployments"))
    for index, deployment in enumerate(deployments):
        field = f"spec.install.spec.deployments[{index}]"
        if not deployment.get("name"):
            found.append(error(file, f"{field}.name", "required field missing"))
        pod = (((deployment.get("spec") or {}).get("template") or {}).get("spec")) or {}
        containers = pod.get("containers") or []
        if not containers:
            found.append(error(file, f"{field}.spec.template.spec.containers", "no containers"))
        for number, container in enumerate([*containers, *(pod.get("initContainers") or [])]):
            problem = image_problem(str(container.get("image") or ""))
            if problem:
                name = container.get("name", number)
                found.append(error(file, f"{field} container {name!r}", problem))
    for index, related in enumerate((csv.get("spec") or {}).get("relatedImages") or []):
        problem = image_problem(str(related.get("image") or ""))
        if problem:
            found.append(error(file, f"spec.relatedImages[{index}]", problem))
    image = bodies.annotations(csv).get(olm.CONTAINER_IMAGE)
    if image is not None:
        problem = image_problem(str(image))
        if problem:
            found.append(error(file, f"metadata.annotations[{olm.CONTAINER_IMAGE}]", problem))
    return found


def _owned(file: str, csv: Obj) -> list[Finding]:
    found = []
    for index, (name, group, version, kind) in enumerate(owned_keys(csv)):
        field = f"spec.customresourcedefinitions.owned[{index}]"
        if not name or not group:
            found.append(error(file, f"{field}.name", f"{name!r} is not PLURAL.GROUP"))
        if not version or kind in ("", "None"):
            found.append(error(file, field, "name, version and kind are required"))
    return found


def check_csv(file: str, csv: Obj, *, package: str | None) -> list[Finding]:
    """Every CSV rule; `package` is the bundle's package annotation (if readable)."""
    return [
        *_names(file, csv, package),
        *_annotation_case(file, csv),
        *_examples(file, csv),
        *_install_modes(file, csv),
        *_min_kube(file, csv),
        *_install(file, csv),
        *_owned(file, csv),
    ]
