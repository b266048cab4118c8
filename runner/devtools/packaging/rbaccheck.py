"""Does the CSV's RBAC allow what the operator's Ansible code does?

The operator reconciles the kinds in watches.yaml (read, update, status, finalizers)
and creates, patches and deletes whatever its roles and playbooks hand to
`kubernetes.core.k8s` (watching those too, for dependent-resource events). We scan
the task files for `k8s`, `k8s_info` and `k8s_status` tasks and read the apiVersion and
kind where they are literal. A use whose kind is templated, or whose plural we can only
guess, is reported as a warning; a literal use the RBAC does not cover is an error.
Scanning reads files; matching uses against rules is pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runner.devtools.packaging.findings import Finding, error, warning

K8S_MODULES = {"kubernetes.core.k8s", "k8s", "community.kubernetes.k8s"}
INFO_MODULES = {"kubernetes.core.k8s_info", "k8s_info", "community.kubernetes.k8s_info"}
STATUS_MODULES = {"operator_sdk.util.k8s_status", "k8s_status"}
INCLUDE_MODULES = (
    "include_tasks",
    "import_tasks",
    "ansible.builtin.include_tasks",
    "ansible.builtin.import_tasks",
)
_TASK_LISTS = ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always")
PRESENT_VERBS = ("get", "list", "watch", "create", "patch|update")
ABSENT_VERBS = ("get", "delete")
READ_VERBS = ("get", "list")
STATUS_VERBS = ("patch|update",)
WATCHED_VERBS = ("get", "list", "watch", "patch|update")

# Plurals of the built-in kinds roles commonly manage, by (group, kind).
BUILTIN_PLURALS = {
    ("", "Pod"): "pods",
    ("", "Service"): "services",
    ("", "ConfigMap"): "configmaps",
    ("", "Secret"): "secrets",
    ("", "ServiceAccount"): "serviceaccounts",
    ("", "PersistentVolumeClaim"): "persistentvolumeclaims",
    ("", "Endpoints"): "endpoints",
    ("", "Event"): "events",
    ("", "Namespace"): "namespaces",
    ("", "ResourceQuota"): "resourcequotas",
    ("", "LimitRange"): "limitranges",
    ("apps", "Deployment"): "deployments",
    ("apps", "StatefulSet"): "statefulsets",
    ("apps", "DaemonSet"): "daemonsets",
    ("apps", "ReplicaSet"): "replicasets",
    ("batch", "Job"): "jobs",
    ("batch", "CronJob"): "cronjobs",
    ("networking.k8s.io", "Ingress"): "ingresses",
    ("networking.k8s.io", "NetworkPolicy"): "networkpolicies",
    ("policy", "PodDisruptionBudget"): "poddisruptionbudgets",
    ("autoscaling", "HorizontalPodAutoscaler"): "horizontalpodautoscalers",
    ("rbac.authorization.k8s.io", "Role"): "roles",
    ("rbac.authorization.k8s.io", "RoleBinding"): "rolebindings",
    ("rbac.authorization.k8s.io", "ClusterRole"): "clusterroles",
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): "clusterrolebindings",
    ("coordination.k8s.io", "Lease"): "leases",
    ("events.k8s.io", "Event"): "events",
    ("route.openshift.io", "Route"): "routes",
    ("monitoring.coreos.com", "ServiceMonitor"): "servicemonitors",
}


@dataclass(frozen=True)
class ApiUse:
    """One kind the operator touches, the verbs it needs and where that was seen."""

    file: str
    task: str
    group: str
    kind: str
    verbs: tuple[str, ...]
    subresource: str = ""
    templated: bool = False


def _templated(value: Any) -> bool:
    return isinstance(value, str) and "{{" in value


def guess_plural(kind: str) -> str:
    lower = kind.lower()
    if re.search(r"[^aeiou]y$", lower):
        return lower[:-1] + "ies"
    if re.search(r"(s|x|z|ch|sh)$", lower):
        return lower + "es"
    return lower + "s"


def _objects(definition: Any) -> list[Any]:
    if isinstance(definition, list):
        return definition
    if isinstance(definition, str):
        try:
            return [d for d in yaml.safe_load_all(definition) if d is not None]
        except yaml.YAMLError:
            return []
    return [definition]


def _uses_of_task(task: dict[str, Any], file: str, base: Path) -> list[ApiUse]:
    name = str(task.get("name") or "(unnamed task)")
    for module, args in task.items():
        if module not in K8S_MODULES | INFO_MODULES | STATUS_MODULES:
            continue
        args = {**(task.get("args") or {}), **(args if isinstance(args, dict) else {})}
        verbs: tuple[str, ...]
        if module in INFO_MODULES:
            verbs, subresource = READ_VERBS, ""
        elif module in STATUS_MODULES:
            verbs, subresource = STATUS_VERBS, "status"
        else:
            absent = args.get("state") == "absent"
            verbs, subresource = (ABSENT_VERBS if absent else PRESENT_VERBS), ""
            if _templated(args.get("state")):
                verbs = tuple(dict.fromkeys((*PRESENT_VERBS, *ABSENT_VERBS)))
        definition = args.get("definition", args.get("resource_definition"))
        if definition is None and args.get("src"):
            src = args["src"]
            path = next(
                (p for p in (base.parent / "files" / str(src), base / str(src)) if p.is_file()),
                None,
            )
            if _templated(src) or path is None:
                return [ApiUse(file, name, "", str(src), verbs, subresource, templated=True)]
            definition = path.read_text(encoding="utf-8")
        if _templated(definition):
            return [ApiUse(file, name, "", "", verbs, subresource, templated=True)]
        objects = _objects(definition) if definition is not None else [args]
        uses = []
        for obj in objects:
            if not isinstance(obj, dict):
                continue
            api_version = obj.get("apiVersion", obj.get("api_version", "v1"))
            kind = obj.get("kind", "")
            templated = _templated(api_version) or _templated(kind) or not kind
            group = "" if templated else str(api_version).rpartition("/")[0]
            uses.append(ApiUse(file, name, group, str(kind), verbs, subresource, templated))
        return uses
    return []


def _walk_tasks(tasks: Any, file: str, base: Path, root: Path, seen: set[Path]) -> list[ApiUse]:
    uses: list[ApiUse] = []
    for task in tasks if isinstance(tasks, list) else []:
        if not isinstance(task, dict):
            continue
        for key in _TASK_LISTS:
            if key in task:
                uses += _walk_tasks(task[key], file, base, root, seen)
        for include in INCLUDE_MODULES:
            target = task.get(include)
            if isinstance(target, dict):
                target = target.get("file")
            if isinstance(target, str) and not _templated(target):
                uses += scan_file(base / target, root, seen)
        uses += _uses_of_task(task, file, base)
    return uses


def scan_file(path: Path, root: Path, seen: set[Path] | None = None) -> list[ApiUse]:
    """The API uses of one task file or playbook (plays are walked too)."""
    seen = set() if seen is None else seen
    resolved = path.resolve()
    if resolved in seen or not path.is_file():
        return []
    seen.add(resolved)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    try:
        file = str(path.relative_to(root))
    except ValueError:
        file = str(path)
    return _walk_tasks(data, file, path.parent, root, seen)


def scan_project(root: Path) -> list[ApiUse]:
    """Every use in roles/*/{tasks,handlers} and playbooks/, plus the watched kinds."""
    seen: set[Path] = set()
    files = sorted(root.glob("roles/*/tasks/*.y*ml")) + sorted(root.glob("roles/*/handlers/*.y*ml"))
    files += sorted(root.glob("playbooks/*.y*ml"))
    uses = [use for path in files for use in scan_file(path, root, seen)]
    watches = root / "watches.yaml"
    if watches.is_file():
        try:
            entries = yaml.safe_load(watches.read_text(encoding="utf-8")) or []
        except yaml.YAMLError:
            entries = []
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("kind"):
                group, kind = str(entry.get("group", "")), str(entry["kind"])
                uses.append(ApiUse("watches.yaml", kind, group, kind, WATCHED_VERBS))
                uses.append(ApiUse("watches.yaml", kind, group, kind, STATUS_VERBS, "status"))
    return uses


def _allows(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> bool:
    for rule in rules:
        if rule.get("resourceNames"):
            continue
        groups = rule.get("apiGroups") or []
        resources = rule.get("resources") or []
        verbs = rule.get("verbs") or []
        if (
            (group in groups or "*" in groups)
            and (resource in resources or "*" in resources)
            and (verb in verbs or "*" in verbs)
        ):
            return True
    return False


def check_uses(
    uses: list[ApiUse], rules: list[dict[str, Any]], plurals: dict[tuple[str, str], str]
) -> list[Finding]:
    """Compare uses with the CSV's rules; `plurals` adds the bundle's CRDs."""
    found: list[Finding] = []
    known = {**BUILTIN_PLURALS, **plurals}
    for use in uses:
        if use.templated:
            found.append(
                warning(use.file, use.task, "the kind is templated; check its RBAC by hand")
            )
            continue
        plural = known.get((use.group, use.kind))
        resource = plural or guess_plural(use.kind)
        if use.subresource:
            resource = f"{resource}/{use.subresource}"
        missing = [
            verbs
            for verbs in use.verbs
            if not any(_allows(rules, use.group, resource, v) for v in verbs.split("|"))
        ]
        if not missing:
            continue
        what = f"{use.group or 'core'}/{use.kind} ({resource})"
        message = f"uses {what} but the CSV's RBAC does not allow {', '.join(missing)}"
        if plural is None:
            found.append(warning(use.file, use.task, message + " (plural guessed)"))
        else:
            found.append(error(use.file, use.task, message))
    return found
