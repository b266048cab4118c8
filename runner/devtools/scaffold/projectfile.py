"""The PROJECT file: what `init` decided and which APIs `create api` added.

Same format as operator-sdk's (`version: "3"`, `layout`, `domain`, `projectName`,
`resources` with `group` relative to `domain`), so tools that read it keep working. It
is rewritten as data on every change; its comment header says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from runner.devtools.scaffold import yamltext
from runner.devtools.scaffold.names import Resource
from runner.errors import ConfigError

__all__ = ["LAYOUT", "PROJECT_FILE", "Project", "parse_project", "render_project"]

PROJECT_FILE = "PROJECT"
LAYOUT = "ansible.sdk.operatorframework.io/v1"
_PLUGINS = ("manifests.sdk.operatorframework.io/v2", "scorecard.sdk.operatorframework.io/v2")
_HEADER = (
    "Written by `ansible-operator init` and `create api`, which read it back to extend\n"
    "the project. Edit with care: each resource here has files under config/ and roles/."
)


@dataclass(frozen=True)
class Project:
    domain: str
    name: str
    resources: tuple[Resource, ...] = field(default=())

    def find(self, resource: Resource) -> Resource | None:
        """The resource with the same group and kind (any version), if any."""
        for known in self.resources:
            if (known.full_group, known.kind) == (resource.full_group, resource.kind):
                return known
        return None

    def with_resource(self, resource: Resource) -> Project:
        return replace(self, resources=(*self.resources, resource))


def render_project(project: Project) -> str:
    data: dict[str, Any] = {
        "domain": project.domain,
        "layout": [LAYOUT],
        "plugins": {name: {} for name in _PLUGINS},
        "projectName": project.name,
    }
    if project.resources:
        data["resources"] = [
            {
                "api": {"crdVersion": "v1", "namespaced": resource.namespaced},
                "domain": resource.domain,
                "group": resource.group,
                "kind": resource.kind,
                "version": resource.version,
            }
            for resource in project.resources
        ]
    data["version"] = "3"
    return yamltext.dump(data, header=_HEADER, start=False)


def parse_project(text: str) -> Project:
    data = yamltext.load(text, source=PROJECT_FILE)
    if not isinstance(data, dict):
        raise ConfigError(f"{PROJECT_FILE}: expected a mapping")
    if str(data.get("version")) != "3":
        raise ConfigError(f"{PROJECT_FILE}: version {data.get('version')!r}: only 3 is supported")
    layout = data.get("layout") or []
    if LAYOUT not in (layout if isinstance(layout, list) else [layout]):
        raise ConfigError(
            f"{PROJECT_FILE}: layout {layout!r} is not {LAYOUT}; "
            "`create api` only extends Ansible projects"
        )
    domain, name = data.get("domain"), data.get("projectName")
    if not isinstance(domain, str) or not isinstance(name, str) or not name:
        raise ConfigError(f"{PROJECT_FILE}: needs `domain` and `projectName` strings")
    return Project(domain=domain, name=name, resources=_resources(data.get("resources")))


def _resources(raw: object) -> tuple[Resource, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError(f"{PROJECT_FILE}: resources: expected a list")
    found = []
    for index, entry in enumerate(raw, start=1):
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(key), str) for key in ("group", "version", "kind")
        ):
            raise ConfigError(f"{PROJECT_FILE}: resources entry {index}: needs group/version/kind")
        api = entry.get("api")
        if not isinstance(api, dict):
            api = {}
        found.append(
            Resource(
                group=entry["group"],
                domain=str(entry.get("domain") or ""),
                version=entry["version"],
                kind=entry["kind"],
                namespaced=bool(api.get("namespaced", True)),
            )
        )
    return tuple(found)
