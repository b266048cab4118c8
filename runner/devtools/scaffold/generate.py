"""What `init` and `create api` write, decided without touching the disk.

A `Plan` lists files to create (which must not exist) and files to update (existing ones
extended on purpose). `init_plan` needs only names; `api_plan` also gets the current text
of the files it extends (`extended_paths`), so both are pure and testable with dicts.
`writer.apply` carries a plan out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from runner.devtools.scaffold import csvbase, extend
from runner.devtools.scaffold.files import api as files_api
from runner.devtools.scaffold.files import toplevel as files_project
from runner.devtools.scaffold.files.config import config_files
from runner.devtools.scaffold.grafana import DASHBOARD_FILE as dashboard_file
from runner.devtools.scaffold.grafana import dashboard
from runner.devtools.scaffold.molecule import perkind as molecule_kind
from runner.devtools.scaffold.molecule import scenarios as molecule
from runner.devtools.scaffold.names import Resource, validate_domain, validate_project_name
from runner.devtools.scaffold.projectfile import (
    PROJECT_FILE,
    Project,
    parse_project,
    render_project,
)
from runner.devtools.scaffold.yamltext import add_list_item
from runner.errors import ConfigError

__all__ = ["Plan", "api_plan", "extended_paths", "init_plan"]

WATCHES_FILE = "watches.yaml"
_CRD_KUSTOMIZATION = "config/crd/kustomization.yaml"
_SAMPLES_KUSTOMIZATION = "config/samples/kustomization.yaml"
_RBAC_KUSTOMIZATION = "config/rbac/kustomization.yaml"
_MANAGER_ROLE = "config/rbac/role.yaml"


@dataclass(frozen=True)
class Plan:
    """Files to create (must be new) and files to replace (extended on purpose)."""

    create: dict[str, str] = field(default_factory=dict)
    update: dict[str, str] = field(default_factory=dict)


def init_plan(
    *,
    domain: str,
    project_name: str,
    info: csvbase.CSVInfo | None = None,
    tool_source: str = "",
    tool_pip: str = "",
    grafana: bool = False,
) -> Plan:
    """Every file of a new, empty project (`tool_source`, `tool_pip`: see
    files_project.makefile;
    `grafana`: also the dashboard of the operator's metrics)."""
    validate_domain(domain)
    validate_project_name(project_name)
    project = Project(domain=domain, name=project_name)
    files = {
        PROJECT_FILE: render_project(project),
        "Makefile": files_project.makefile(
            project_name=project_name, domain=domain, tool_source=tool_source, tool_pip=tool_pip
        ),
        "Dockerfile": files_project.dockerfile(project_name),
        ".dockerignore": files_project.dockerignore(),
        ".gitignore": files_project.gitignore(),
        "requirements.yml": files_project.requirements(),
        WATCHES_FILE: files_project.watches(),
        "roles/.placeholder": "",
        "playbooks/.placeholder": "",
        **config_files(project=project_name, domain=domain),
        csvbase.csv_path(project_name): csvbase.csv_base(
            project_name, info or csvbase.default_info(project_name)
        ),
        **molecule.molecule_files(project_name),
        **molecule_kind.shared_files(project_name),
    }
    if grafana:
        files[dashboard_file] = dashboard(project_name)
    return Plan(create=files)


def extended_paths(project: Project) -> tuple[str, ...]:
    """The files `api_plan` reads and rewrites, besides PROJECT."""
    return (
        WATCHES_FILE,
        _CRD_KUSTOMIZATION,
        _SAMPLES_KUSTOMIZATION,
        _MANAGER_ROLE,
        _RBAC_KUSTOMIZATION,
        csvbase.csv_path(project.name),
    )


def api_plan(
    files: Mapping[str, str], *, group: str, version: str, kind: str, playbook: bool = False
) -> Plan:
    """The files for a new API of the project whose current files are `files` (PROJECT and
    `extended_paths`). Raises ConfigError, before anything is written, for bad names, a
    kind the project already has, or a missing project file."""
    if PROJECT_FILE not in files:
        raise ConfigError(
            f"{PROJECT_FILE} not found: run `ansible-operator init` first, "
            "or run `create api` in the project's directory"
        )
    project = parse_project(files[PROJECT_FILE])
    resource = Resource.validated(group=group, domain=project.domain, version=version, kind=kind)
    known = project.find(resource)
    if known is not None and known.version == resource.version:
        raise ConfigError(
            f"{PROJECT_FILE}: the project already has {resource.gvk_text()}; nothing was written"
        )
    if known is not None:
        raise ConfigError(
            f"{PROJECT_FILE}: {resource.kind} ({resource.full_group}) already exists in version "
            f"{known.version}; adding version {resource.version} means editing its CRD by hand"
        )
    missing = [path for path in extended_paths(project) if path not in files]
    if missing:
        raise ConfigError(
            f"cannot add {resource.gvk_text()}: missing {', '.join(missing)} "
            "(files `ansible-operator init` writes)"
        )
    return Plan(
        create=_new_files(resource, project.name, playbook=playbook),
        update=_updates(files, project, resource, playbook=playbook),
    )


def _new_files(resource: Resource, project: str, *, playbook: bool) -> dict[str, str]:
    singular = resource.singular
    files = {
        f"config/crd/{resource.crd_file}": files_api.crd(resource),
        f"config/samples/{resource.sample_file}": files_api.sample(resource, project=project),
        f"config/rbac/{singular}_admin_role.yaml": files_api.admin_role(resource, project=project),
        f"config/rbac/{singular}_editor_role.yaml": files_api.editor_role(
            resource, project=project
        ),
        f"config/rbac/{singular}_viewer_role.yaml": files_api.viewer_role(
            resource, project=project
        ),
        **files_api.role_files(resource),
        **molecule_kind.kind_files(resource),
    }
    path, text = molecule.kind_test_file(
        kind=resource.kind, singular=resource.singular, sample_file=resource.sample_file
    )
    files[path] = text
    if playbook:
        files[resource.playbook_file] = files_api.playbook(resource)
    return files


def _updates(
    files: Mapping[str, str], project: Project, resource: Resource, *, playbook: bool
) -> dict[str, str]:
    csv = csvbase.csv_path(project.name)
    rbac = files[_RBAC_KUSTOMIZATION]
    for name in ("admin", "editor", "viewer"):
        rbac = add_list_item(
            rbac, "resources", f"{resource.singular}_{name}_role.yaml", source=_RBAC_KUSTOMIZATION
        )
    return {
        PROJECT_FILE: render_project(project.with_resource(resource)),
        WATCHES_FILE: extend.add_watch(
            files[WATCHES_FILE], resource, playbook=playbook, source=WATCHES_FILE
        ),
        _CRD_KUSTOMIZATION: add_list_item(
            files[_CRD_KUSTOMIZATION], "resources", resource.crd_file, source=_CRD_KUSTOMIZATION
        ),
        _SAMPLES_KUSTOMIZATION: add_list_item(
            files[_SAMPLES_KUSTOMIZATION],
            "resources",
            resource.sample_file,
            source=_SAMPLES_KUSTOMIZATION,
        ),
        _MANAGER_ROLE: extend.add_rules(files[_MANAGER_ROLE], resource, source=_MANAGER_ROLE),
        _RBAC_KUSTOMIZATION: rbac,
        csv: csvbase.add_owned(files[csv], resource, source=csv),
    }
