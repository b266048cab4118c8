"""The ClusterServiceVersion base: the human part of the OLM bundle's CSV.

`config/manifests/bases/<project>.clusterserviceversion.yaml` holds what only people can
say (display name, description, icon, keywords, maintainers, provider, links) plus the
owned CRDs `create api` adds. `bundle generate` fills in the rest (install strategy,
permissions, version, examples). Install modes: the runtime watches one, several or all
namespaces (WATCH_NAMESPACE), so every mode is supported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from runner import __version__
from runner.devtools.scaffold import yamltext
from runner.devtools.scaffold.names import Resource
from runner.devtools.scaffold.projectfile import LAYOUT
from runner.errors import ConfigError

__all__ = [
    "CSVInfo",
    "add_owned",
    "csv_base",
    "csv_path",
    "default_info",
    "info_from_csv",
    "owned_entry",
]

_INSTALL_MODES = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
_HEADER = (
    "The hand-written part of the bundle's ClusterServiceVersion: fill in the display\n"
    "name, description, icon, keywords, maintainers, provider and links.\n"
    "`create api` adds owned CRDs; `bundle generate` adds the rest."
)


@dataclass(frozen=True)
class CSVInfo:
    """What people read about the operator in a catalog."""

    display_name: str
    description: str
    keywords: tuple[str, ...]
    maintainers: tuple[tuple[str, str], ...]  # (name, email)
    provider: tuple[str, str]  # (name, url)
    links: tuple[tuple[str, str], ...]  # (name, url)
    icon_base64: str = ""
    icon_mediatype: str = "image/svg+xml"
    maturity: str = "alpha"


def csv_path(project: str) -> str:
    return f"config/manifests/bases/{project}.clusterserviceversion.yaml"


def default_info(project: str) -> CSVInfo:
    """Placeholders a new project starts with."""
    display = " ".join(part.capitalize() for part in project.split("-"))
    return CSVInfo(
        display_name=display,
        description=f"{display}: describe what the operator manages and how to use it.",
        keywords=(project,),
        maintainers=(("Maintainer Name", "maintainer@example.com"),),
        provider=("Provider Name", "https://example.com"),
        links=((display, f"https://example.com/{project}"),),
    )


def csv_base(project: str, info: CSVInfo, owned: tuple[Resource, ...] = ()) -> str:
    data: dict[str, Any] = {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {
            "annotations": {
                "alm-examples": "[]",
                "capabilities": "Basic Install",
                "operators.operatorframework.io/builder": f"ansible-operator-v{__version__}",
                "operators.operatorframework.io/project_layout": LAYOUT,
            },
            "name": f"{project}.v0.0.0",
            "namespace": "placeholder",
        },
        "spec": {
            "apiservicedefinitions": {},
            "customresourcedefinitions": {"owned": [owned_entry(r) for r in owned]},
            "description": info.description,
            "displayName": info.display_name,
            "icon": [{"base64data": info.icon_base64, "mediatype": info.icon_mediatype}],
            "install": {"spec": {"deployments": None}, "strategy": ""},
            "installModes": [{"supported": True, "type": mode} for mode in _INSTALL_MODES],
            "keywords": list(info.keywords),
            "links": [{"name": name, "url": url} for name, url in info.links],
            "maintainers": [{"email": email, "name": name} for name, email in info.maintainers],
            "maturity": info.maturity,
            "provider": {"name": info.provider[0], "url": info.provider[1]},
            "version": "0.0.0",
        },
    }
    return yamltext.dump(data, header=_HEADER)


def _words(kind: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", kind)


def owned_entry(resource: Resource) -> dict[str, str]:
    return {
        "name": resource.crd_name,
        "version": resource.version,
        "kind": resource.kind,
        "displayName": _words(resource.kind),
        "description": f"{resource.kind} is the Schema for the {resource.plural} API",
    }


def add_owned(text: str, resource: Resource, *, source: str) -> str:
    """The CSV base with `resource` among its owned CRDs (rewritten as data, keeping the
    comment lines it opens with)."""
    data = yamltext.load(text, source=source)
    spec = data.get("spec") if isinstance(data, dict) else None
    if not isinstance(spec, dict):
        raise ConfigError(f"{source}: expected a ClusterServiceVersion with a spec")
    crds = spec.get("customresourcedefinitions")
    if crds is None:
        crds = spec["customresourcedefinitions"] = {}
    if not isinstance(crds, dict):
        raise ConfigError(f"{source}: spec.customresourcedefinitions must be a mapping")
    owned = crds.get("owned")
    if owned is None:
        owned = crds["owned"] = []
    if not isinstance(owned, list):
        raise ConfigError(f"{source}: spec.customresourcedefinitions.owned must be a list")
    entry = owned_entry(resource)
    if any(
        isinstance(item, dict)
        and (item.get("name"), item.get("version")) == (entry["name"], entry["version"])
        for item in owned
    ):
        return text
    owned.append(entry)
    head = yamltext.leading_comments(text).rstrip()
    return (head + "\n" if head else "") + yamltext.dump(data)


def info_from_csv(text: str, *, source: str) -> CSVInfo:
    """The people-facing fields of an existing CSV base (to re-render it unchanged)."""
    data = yamltext.load(text, source=source)
    spec = data.get("spec") if isinstance(data, dict) else None
    if not isinstance(spec, dict):
        raise ConfigError(f"{source}: expected a ClusterServiceVersion with a spec")
    icon = (spec.get("icon") or [{}])[0]
    provider = spec.get("provider") or {}
    return CSVInfo(
        display_name=str(spec.get("displayName", "")),
        description=str(spec.get("description", "")),
        keywords=tuple(str(k) for k in spec.get("keywords") or ()),
        maintainers=tuple(
            (str(m.get("name", "")), str(m.get("email", ""))) for m in spec.get("maintainers") or ()
        ),
        provider=(str(provider.get("name", "")), str(provider.get("url", ""))),
        links=tuple(
            (str(k.get("name", "")), str(k.get("url", ""))) for k in spec.get("links") or ()
        ),
        icon_base64=str(icon.get("base64data", "")),
        icon_mediatype=str(icon.get("mediatype", "")),
        maturity=str(spec.get("maturity", "alpha")),
    )
