"""Render a kustomization tree the way `kustomize build` does, for the fields operator
projects use.

operator-sdk's `make bundle` pipes `kustomize build config/manifests` into its bundle
generator; the name prefix and namespace of `config/default` and the scorecard patches
only exist after that build. We render the same tree without the kustomize binary:
`resources` (files and directories), `namespace`, `namePrefix`, `nameSuffix`, `labels`,
`commonLabels`, `commonAnnotations`, `patches`, `patchesStrategicMerge`,
`patchesJson6902` and `images`, applied in kustomize's order, then name references
(role bindings, service accounts, config maps, secrets) follow renamed objects. Any
other field is an error rather than a silently different result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.devtools.packaging import patches, yamlio
from runner.errors import ConfigError
from runner.structs import bodies
from runner.util.labelselector import parse_label_selector_string

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
_SUPPORTED = {
    "apiVersion",
    "kind",
    "metadata",
    "resources",
    "bases",
    "namespace",
    "namePrefix",
    "nameSuffix",
    "labels",
    "commonLabels",
    "commonAnnotations",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "images",
    # Read by kustomize for name references of webhook Services (config/webhook,
    # config/crd after `create webhook`); a bundle leaves those objects to OLM
    # (webhookdefs.py), so they change nothing here.
    "configurations",
}
# kustomize never prefixes or suffixes these names (nor sets a namespace on cluster kinds).
_KEEP_NAME = {"CustomResourceDefinition", "APIService", "Namespace"}
_CLUSTER_KINDS = {
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "Namespace",
    "PersistentVolume",
    "PriorityClass",
    "StorageClass",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
}
_WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


@dataclass
class Resource:
    """One object and the name it had when first read (name references use it)."""

    obj: dict[str, Any]
    original_name: str = ""
    original_namespace: str = ""
    renamed: bool = field(default=False)

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def name(self) -> str:
        return str(bodies.metadata(self.obj).get("name", ""))


def kustomization_file(directory: Path) -> Path | None:
    for name in KUSTOMIZATION_FILES:
        if (directory / name).is_file():
            return directory / name
    return None


def build(directory: Path) -> list[dict[str, Any]]:
    """The objects `kustomize build directory` prints, in the same order."""
    resources = _build(directory.resolve(), stack=())
    _fix_name_references(resources)
    return [r.obj for r in resources]


def _build(directory: Path, *, stack: tuple[Path, ...]) -> list[Resource]:
    if directory in stack:
        raise ConfigError(f"{directory}: kustomization includes itself")
    path = kustomization_file(directory)
    if path is None:
        raise ConfigError(f"{directory}: no kustomization.yaml")
    spec = yamlio.load_one(path) or {}
    if not isinstance(spec, dict):
        raise ConfigError(f"{path}: expected a mapping")
    unknown = sorted(set(spec) - _SUPPORTED)
    if unknown:
        raise ConfigError(
            f"{path}: unsupported kustomization field(s) {', '.join(unknown)}; "
            "render the manifests with kustomize instead"
        )
    resources: list[Resource] = []
    for entry in [*spec.get("bases", []), *spec.get("resources", [])]:
        target = (directory / str(entry)).resolve()
        if target.is_dir():
            resources += _build(target, stack=(*stack, directory))
        elif target.is_file():
            resources += [_new(obj, target) for obj in yamlio.load_all(target)]
        else:
            raise ConfigError(f"{path}: resource {entry!r} does not exist")
    _apply(spec, resources, directory=directory, source=path)
    return resources


def _new(obj: Any, source: Path) -> Resource:
    if not isinstance(obj, dict) or "kind" not in obj:
        raise ConfigError(f"{source}: every document must be an object with a `kind`")
    meta = obj.setdefault("metadata", {})
    return Resource(obj, str(meta.get("name", "")), str(meta.get("namespace", "")))


def _apply(
    spec: dict[str, Any], resources: list[Resource], *, directory: Path, source: Path
) -> None:
    for entry in spec.get("patchesStrategicMerge", []):
        _patch(resources, _patch_body(directory, {"path": entry}, source), None, source)
    for entry in spec.get("patches", []):
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: every `patches` entry must be a mapping")
        _patch(resources, _patch_body(directory, entry, source), entry.get("target"), source)
    if "namespace" in spec:
        _set_namespace(resources, str(spec["namespace"]))
    prefix, suffix = str(spec.get("namePrefix", "")), str(spec.get("nameSuffix", ""))
    if prefix or suffix:
        for resource in resources:
            if resource.kind not in _KEEP_NAME:
                resource.obj["metadata"]["name"] = prefix + resource.name + suffix
                resource.renamed = True
    for entry in spec.get("labels", []):
        _add_labels(
            resources,
            dict(entry.get("pairs", {})),
            selectors=bool(entry.get("includeSelectors")),
            templates=bool(entry.get("includeTemplates") or entry.get("includeSelectors")),
        )
    if spec.get("commonLabels"):
        _add_labels(resources, dict(spec["commonLabels"]), selectors=True, templates=True)
    if spec.get("commonAnnotations"):
        for resource in resources:
            _merge_map(resource.obj, ("metadata", "annotations"), spec["commonAnnotations"])
            if resource.kind in _WORKLOADS:
                _merge_map(
                    resource.obj,
                    ("spec", "template", "metadata", "annotations"),
                    spec["commonAnnotations"],
                )
    for entry in spec.get("patchesJson6902", []):
        _patch(resources, _patch_body(directory, entry, source), entry.get("target"), source)
    for image in spec.get("images", []):
        _set_image(resources, image)


def _patch_body(directory: Path, entry: dict[str, Any], source: Path) -> Any:
    if "patch" in entry:
        documents = yamlio.load_all_text(str(entry["patch"]), source=f"{source} (inline patch)")
    elif "path" in entry:
        documents = yamlio.load_all(directory / str(entry["path"]))
    else:
        raise ConfigError(f"{source}: a patch needs `path` or `patch`")
    if len(documents) != 1:
        raise ConfigError(f"{source}: each patch must hold exactly one document")
    return documents[0]


def _patch(
    resources: list[Resource], body: Any, target: dict[str, Any] | None, source: Path
) -> None:
    if isinstance(body, list):
        if not target:
            raise ConfigError(f"{source}: a JSON 6902 patch needs a `target`")
        for resource in _select(resources, target, source):
            resource.obj = patches.json6902(resource.obj, body)
        return
    if not isinstance(body, dict):
        raise ConfigError(f"{source}: a patch must be a mapping or a list of operations")
    if target is None:
        meta = body.get("metadata", {})
        target = {"kind": body.get("kind"), "name": meta.get("name")}
    for resource in _select(resources, target, source):
        resource.obj = patches.strategic_merge(resource.obj, body)


def _matches(pattern: Any, value: str) -> bool:
    return pattern in (None, "") or re.fullmatch(str(pattern), value) is not None


def _select(resources: list[Resource], target: dict[str, Any], source: Path) -> list[Resource]:
    # The target's labelSelector has the API server's syntax, as in kustomize itself.
    try:
        selector = parse_label_selector_string(str(target.get("labelSelector") or ""))
    except ValueError as err:
        raise ConfigError(f"{source}: patch target: {err}") from None
    selected = []
    for resource in resources:
        api_version = str(resource.obj.get("apiVersion", ""))
        group, _, version = api_version.rpartition("/")
        if (
            _matches(target.get("kind"), resource.kind)
            and _matches(target.get("name"), resource.name)
            and _matches(target.get("group"), group)
            and _matches(target.get("version"), version)
            and _matches(
                target.get("namespace"), str(bodies.metadata(resource.obj).get("namespace", ""))
            )
            and selector.matches(bodies.labels(resource.obj))
        ):
            selected.append(resource)
    return selected


def _set_namespace(resources: list[Resource], namespace: str) -> None:
    for resource in resources:
        meta = resource.obj["metadata"]
        if resource.kind == "Namespace":
            meta["name"] = namespace
        elif resource.kind not in _CLUSTER_KINDS:
            meta["namespace"] = namespace
        if resource.kind in ("RoleBinding", "ClusterRoleBinding"):
            for subject in resource.obj.get("subjects") or []:
                if subject.get("kind") == "ServiceAccount":
                    subject["namespace"] = namespace


def _merge_map(obj: dict[str, Any], path: tuple[str, ...], values: dict[str, Any]) -> None:
    node = obj
    for key in path:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node.update({str(k): str(v) for k, v in values.items()})


def _add_labels(
    resources: list[Resource], pairs: dict[str, Any], *, selectors: bool, templates: bool
) -> None:
    for resource in resources:
        _merge_map(resource.obj, ("metadata", "labels"), pairs)
        if resource.kind in _WORKLOADS:
            if templates:
                _merge_map(resource.obj, ("spec", "template", "metadata", "labels"), pairs)
            if selectors:
                _merge_map(resource.obj, ("spec", "selector", "matchLabels"), pairs)
        elif resource.kind == "Service" and selectors:
            _merge_map(resource.obj, ("spec", "selector"), pairs)


def pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The pod template's spec of a workload object (None for other kinds)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod":
        return spec if isinstance(spec, dict) else None
    if obj.get("kind") == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    template = (spec.get("template") or {}).get("spec")
    return template if isinstance(template, dict) else None


def image_name(image: str) -> str:
    """`registry/repo:tag@digest` without its tag and digest."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def _set_image(resources: list[Resource], entry: dict[str, Any]) -> None:
    for resource in resources:
        spec = pod_spec(resource.obj)
        if spec is None:
            continue
        for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            image = str(container.get("image", ""))
            if image_name(image) != entry.get("name"):
                continue
            name = str(entry.get("newName") or image_name(image))
            if entry.get("digest"):
                container["image"] = f"{name}@{entry['digest']}"
            elif entry.get("newTag"):
                container["image"] = f"{name}:{entry['newTag']}"
            else:
                container["image"] = name + image[len(image_name(image)) :]


def _fix_name_references(resources: list[Resource]) -> None:
    """Point references at the final names of renamed objects, as kustomize does."""
    names: dict[tuple[str, str], Resource] = {}
    for resource in resources:
        names.setdefault((resource.kind, resource.original_name), resource)

    def final(kind: str, name: Any) -> Resource | None:
        found = names.get((kind, str(name)))
        return found if found is not None and found.renamed else None

    for resource in resources:
        obj = resource.obj
        if resource.kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = obj.get("roleRef") or {}
            role = final(str(ref.get("kind", "")), ref.get("name"))
            if role is not None:
                ref["name"] = role.name
            for subject in obj.get("subjects") or []:
                account = final(str(subject.get("kind", "")), subject.get("name"))
                if account is not None:
                    subject["name"] = account.name
        spec = pod_spec(obj)
        if spec is None:
            continue
        account = final("ServiceAccount", spec.get("serviceAccountName"))
        if account is not None:
            spec["serviceAccountName"] = account.name
        _fix_pod_references(spec, final)


def _fix_pod_references(spec: dict[str, Any], final: Any) -> None:
    def rename(holder: dict[str, Any] | None, kind: str, key: str) -> None:
        if isinstance(holder, dict) and holder.get(key) is not None:
            found = final(kind, holder[key])
            if found is not None:
                holder[key] = found.name

    for volume in spec.get("volumes") or []:
        rename(volume.get("configMap"), "ConfigMap", "name")
        rename(volume.get("secret"), "Secret", "secretName")
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        for source in container.get("envFrom") or []:
            rename(source.get("configMapRef"), "ConfigMap", "name")
            rename(source.get("secretRef"), "Secret", "name")
        for env in container.get("env") or []:
            value_from = env.get("valueFrom") or {}
            rename(value_from.get("configMapKeyRef"), "ConfigMap", "name")
            rename(value_from.get("secretKeyRef"), "Secret", "name")
