"""Read an operator project's config/ tree into typed inputs for the bundle builders.

The manifests are what `kustomize build config/manifests` prints (rendered by our
kustomize subset): the CSV base, CRDs, RBAC, the manager Deployment with the name prefix
and namespace of config/default, samples and the scorecard configuration. A project
without config/manifests/kustomization.yaml is read part by part (config/default or
config/{crd,rbac,manager}, config/samples, config/scorecard, the CSV base file).
`classify` sorts the objects by the role they play in a bundle; it is pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.devtools.packaging import kustomize, yamlio
from runner.errors import ConfigError
from runner.structs import bodies

DEFAULT_LAYOUT = "ansible.sdk.operatorframework.io/v1"
SCORECARD_KIND = ("scorecard.operatorframework.io", "Configuration")

Obj = dict[str, Any]


@dataclass(frozen=True)
class ProjectInputs:
    """Everything a bundle is generated from, sorted by kind of object."""

    name: str
    layout: str
    csv_base: Obj
    deployments: tuple[Obj, ...] = ()
    roles: tuple[Obj, ...] = ()
    cluster_roles: tuple[Obj, ...] = ()
    role_bindings: tuple[Obj, ...] = ()
    cluster_role_bindings: tuple[Obj, ...] = ()
    service_accounts: tuple[Obj, ...] = ()
    crds: tuple[Obj, ...] = ()
    samples: tuple[Obj, ...] = ()
    scorecard: Obj | None = None
    others: tuple[Obj, ...] = ()


def group_of(obj: Obj) -> str:
    api_version = str(obj.get("apiVersion", ""))
    return api_version.rpartition("/")[0]


def name_of(obj: Obj) -> str:
    return str(bodies.metadata(obj).get("name", ""))


def crd_group_kind(crd: Obj) -> tuple[str, str]:
    spec = crd.get("spec") or {}
    return str(spec.get("group", "")), str((spec.get("names") or {}).get("kind", ""))


_BY_KIND = {
    "Deployment": "deployments",
    "Role": "roles",
    "ClusterRole": "cluster_roles",
    "RoleBinding": "role_bindings",
    "ClusterRoleBinding": "cluster_role_bindings",
    "ServiceAccount": "service_accounts",
    "CustomResourceDefinition": "crds",
}


def classify(objects: list[Obj], *, name: str, layout: str) -> ProjectInputs:
    """Sort rendered objects into ProjectInputs (pure)."""
    buckets: dict[str, list[Obj]] = {field: [] for field in _BY_KIND.values()}
    csv_bases: list[Obj] = []
    scorecards: list[Obj] = []
    rest: list[Obj] = []
    for obj in objects:
        kind = str(obj.get("kind", ""))
        if kind == "ClusterServiceVersion":
            csv_bases.append(obj)
        elif (group_of(obj), kind) == SCORECARD_KIND:
            scorecards.append(obj)
        elif kind in _BY_KIND:
            buckets[_BY_KIND[kind]].append(obj)
        elif kind != "Namespace":
            rest.append(obj)
    if not csv_bases:
        raise ConfigError(
            "no ClusterServiceVersion base found: expected "
            f"config/manifests/bases/{name}.clusterserviceversion.yaml"
        )
    if len(csv_bases) > 1:
        raise ConfigError(f"{len(csv_bases)} ClusterServiceVersion bases found; keep one")
    owned = {crd_group_kind(crd) for crd in buckets["crds"]}
    samples = [obj for obj in rest if (group_of(obj), obj.get("kind")) in owned]
    others = [obj for obj in rest if (group_of(obj), obj.get("kind")) not in owned]
    return ProjectInputs(
        name=name,
        layout=layout,
        csv_base=csv_bases[0],
        scorecard=scorecards[0] if scorecards else None,
        samples=tuple(samples),
        others=tuple(others),
        **{field: tuple(items) for field, items in buckets.items()},
    )


def read_project_file(root: Path) -> tuple[str, str]:
    """(projectName, layout) from the PROJECT file, with fallbacks."""
    name, layout = root.resolve().name, DEFAULT_LAYOUT
    path = root / "PROJECT"
    if path.is_file():
        data = yamlio.load_one(path) or {}
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping")
        name = str(data.get("projectName") or name)
        layouts = data.get("layout")
        if isinstance(layouts, list) and layouts:
            layout = str(layouts[0])
        elif isinstance(layouts, str):
            layout = layouts
    return name, layout


def _read_dir(directory: Path) -> list[Obj]:
    if kustomize.kustomization_file(directory) is not None:
        return kustomize.build(directory)
    objects: list[Obj] = []
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        objects += [obj for obj in yamlio.load_all(path) if isinstance(obj, dict)]
    return objects


def render(root: Path) -> list[Obj]:
    """The project's manifests, as `kustomize build config/manifests` would print them."""
    config = root / "config"
    manifests = config / "manifests"
    if kustomize.kustomization_file(manifests) is not None:
        objects = kustomize.build(manifests)
    else:
        if not config.is_dir():
            raise ConfigError(f"{root}: no config/ directory; is this an operator project?")
        parts = ["default"] if (config / "default").is_dir() else ["crd", "rbac", "manager"]
        objects = []
        for part in [*parts, "samples", "scorecard"]:
            if (config / part).is_dir():
                objects += _read_dir(config / part)
    if not any(obj.get("kind") == "ClusterServiceVersion" for obj in objects):
        for path in sorted((manifests / "bases").glob("*.clusterserviceversion.yaml")):
            objects += yamlio.load_all(path)
    return objects


def load_project(root: Path, *, name: str | None = None) -> ProjectInputs:
    """Read and classify a project directory (`name` overrides PROJECT's projectName)."""
    project_name, layout = read_project_file(root)
    return classify(render(root), name=name or project_name, layout=layout)
