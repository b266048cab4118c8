"""Build a ClusterServiceVersion from a project's inputs (pure).

The CSV base (config/manifests/bases) carries what a human writes: display name,
description, icon, keywords, maintainers, provider, links, install modes. This module
adds what is derived: name and version, the `deployment` install strategy with the
manager Deployment and the RBAC bound to its service account, the owned CRDs, the
`alm-examples` from config/samples, related images and the annotations OLM and
operator-sdk tooling read. Nothing time-dependent goes in (no `createdAt`), so the same
inputs always give the same CSV.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging import versions
from runner.devtools.packaging.kustomize import pod_spec
from runner.devtools.packaging.projectconfig import Obj, ProjectInputs, name_of
from runner.devtools.packaging.rbac import PermissionSplit, split_permissions
from runner.devtools.packaging.webhookdefs import webhook_definitions
from runner.errors import ConfigError
from runner.structs import bodies

WATCH_NAMESPACE = "WATCH_NAMESPACE"
TARGET_NAMESPACES_REF = "metadata.annotations['olm.targetNamespaces']"
RELATED_IMAGE_PREFIX = "RELATED_IMAGE_"


@dataclass(frozen=True)
class BundleOptions:
    """What `bundle generate` is asked for (flags), validated on construction."""

    version: str
    package: str
    channels: tuple[str, ...] = ("alpha",)
    default_channel: str | None = None
    replaces: str | None = None
    skip_range: str | None = None
    image: str | None = None

    def __post_init__(self) -> None:
        if not versions.is_semver(self.version):
            raise ConfigError(f"--version {self.version!r}: not a semantic version like 0.1.0")
        error = versions.name_error(self.csv_name)
        if error:
            raise ConfigError(f"bundle name {self.csv_name!r}: {error}")
        if not self.channels or any(not c.strip() for c in self.channels):
            raise ConfigError(f"--channels {','.join(self.channels)!r}: empty channel name")
        if self.default_channel is not None and self.default_channel not in self.channels:
            raise ConfigError(
                f"--default-channel {self.default_channel!r} is not one of the channels "
                f"{','.join(self.channels)}"
            )
        if self.replaces is not None:
            parsed = versions.split_csv_name(self.replaces)
            if parsed is None or not versions.is_semver(parsed[1]):
                raise ConfigError(f"--replaces {self.replaces!r}: expected NAME.vX.Y.Z")
            if versions.Version(parsed[1]) >= versions.Version(self.version):
                raise ConfigError(
                    f"--replaces {self.replaces!r} is not older than --version {self.version}"
                )
        if self.skip_range is not None:
            error = versions.range_error(self.skip_range)
            if error:
                raise ConfigError(f"--skip-range {self.skip_range!r}: {error}")

    @property
    def csv_name(self) -> str:
        return f"{self.package}.v{self.version}"


def manager_container(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The container named `manager`, else the only container (the object itself)."""
    containers: list[dict[str, Any]] = spec.get("containers") or []
    for container in containers:
        if container.get("name") == "manager":
            return container
    return containers[0] if len(containers) == 1 else None


def _deployment_entries(inputs: ProjectInputs, image: str | None) -> list[dict[str, Any]]:
    if not inputs.deployments:
        raise ConfigError("no Deployment in config/ (config/manager): nothing for OLM to run")
    entries = []
    for deployment in inputs.deployments:
        deployment = copy.deepcopy(deployment)
        spec = pod_spec(deployment) or {}
        if image is not None:
            manager = manager_container(spec)
            if manager is None:
                raise ConfigError(
                    f"Deployment {name_of(deployment)!r}: --image needs a container named "
                    "`manager` (or a single container)"
                )
            manager["image"] = image
        for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            for env in container.get("env") or []:
                if env.get("name") == WATCH_NAMESPACE:
                    env.pop("value", None)
                    env["valueFrom"] = {"fieldRef": {"fieldPath": TARGET_NAMESPACES_REF}}
        entry: dict[str, Any] = {"name": name_of(deployment), "spec": deployment.get("spec", {})}
        labels = bodies.metadata(deployment).get("labels")
        if labels:
            entry["label"] = labels
        entries.append(entry)
    return entries


def operator_image(deployments: list[dict[str, Any]]) -> str | None:
    for entry in deployments:
        container = manager_container((entry["spec"].get("template") or {}).get("spec") or {})
        if container and container.get("image"):
            return str(container["image"])
    return None


def related_images(deployments: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Every container image and RELATED_IMAGE_* value, first name wins per image."""
    found: dict[str, str] = {}
    for entry in deployments:
        spec = (entry["spec"].get("template") or {}).get("spec") or {}
        for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            if container.get("image"):
                found.setdefault(str(container["image"]), str(container.get("name", "")))
            for env in container.get("env") or []:
                name = str(env.get("name", ""))
                if name.startswith(RELATED_IMAGE_PREFIX) and env.get("value"):
                    related = name[len(RELATED_IMAGE_PREFIX) :].lower().replace("_", "-")
                    found.setdefault(str(env["value"]), related)
    return [{"image": image, "name": name} for image, name in found.items()]


def owned_crds(inputs: ProjectInputs, base: list[Any]) -> list[dict[str, Any]]:
    """One entry per served version of each CRD, keeping what the base says about it."""
    described = {(d.get("name"), d.get("version"), d.get("kind")): d for d in base}
    owned = []
    for crd in inputs.crds:
        spec = crd.get("spec") or {}
        kind = str((spec.get("names") or {}).get("kind", ""))
        plural = str((spec.get("names") or {}).get("plural", ""))
        for version in spec.get("versions") or []:
            if not version.get("served", False):
                continue
            key = (name_of(crd), version.get("name"), kind)
            entry = dict(described.get(key) or {})
            entry.update(name=key[0], version=key[1], kind=kind)
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
            entry.setdefault("displayName", kind)
            entry.setdefault(
                "description", schema.get("description") or f"{kind} is the Schema for {plural}"
            )
            owned.append(entry)
    return owned


def alm_examples(samples: tuple[Obj, ...]) -> str:
    """The JSON list operator-sdk writes: two-space indent, keys sorted."""
    return json.dumps(list(samples), indent=2, sort_keys=True, ensure_ascii=False)


def build_csv(
    inputs: ProjectInputs, options: BundleOptions, split: PermissionSplit | None = None
) -> Obj:
    split = split if split is not None else split_permissions(inputs)
    csv = copy.deepcopy(inputs.csv_base)
    csv["apiVersion"], csv["kind"] = olm.CSV_API_VERSION, olm.CSV_KIND
    meta = csv.setdefault("metadata", {})
    meta["name"] = options.csv_name
    spec = csv.setdefault("spec", {})
    deployments = _deployment_entries(inputs, options.image)
    strategy: dict[str, Any] = {"deployments": deployments}
    if split.permissions:
        strategy["permissions"] = split.permissions
    if split.cluster_permissions:
        strategy["clusterPermissions"] = split.cluster_permissions
    spec["install"] = {"spec": strategy, "strategy": "deployment"}
    spec["version"] = options.version
    if options.replaces:
        spec["replaces"] = options.replaces
    spec.setdefault("installModes", [dict(mode) for mode in olm.DEFAULT_INSTALL_MODES])
    spec.setdefault("minKubeVersion", olm.DEFAULT_MIN_KUBE_VERSION)
    crds = dict(spec.get("customresourcedefinitions") or {})
    crds["owned"] = owned_crds(inputs, list(crds.get("owned") or []))
    spec["customresourcedefinitions"] = crds
    images = related_images(deployments)
    if images:
        spec["relatedImages"] = images
    webhooks = webhook_definitions(inputs)
    if webhooks:
        spec["webhookdefinitions"] = webhooks

    annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    annotations.pop("createdAt", None)
    annotations[olm.ALM_EXAMPLES] = alm_examples(inputs.samples)
    annotations.setdefault(olm.CAPABILITIES, "Basic Install")
    image = operator_image(deployments)
    if image:
        annotations[olm.CONTAINER_IMAGE] = image
    annotations[olm.BUILDER] = olm.BUILDER_VALUE
    annotations[olm.PROJECT_LAYOUT] = inputs.layout
    if options.skip_range:
        annotations[olm.SKIP_RANGE] = options.skip_range
    meta["annotations"] = annotations
    return csv
