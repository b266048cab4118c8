"""Split a project's RBAC into CSV permissions and extra bundle manifests (pure).

OLM creates the operator's service account and its RBAC from the CSV: the rules of every
Role (or ClusterRole) bound by a RoleBinding to a deployment's service account become
`permissions`, those bound by a ClusterRoleBinding become `clusterPermissions`, one
entry per service account. Everything not bound to such an account (a metrics-reader
ClusterRole, editor/viewer roles, bindings for other subjects, other service accounts)
stays a plain manifest in the bundle. This mirrors operator-sdk's generator.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from runner.devtools.packaging.projectconfig import Obj, ProjectInputs, name_of

DEFAULT_SERVICE_ACCOUNT = "default"
_RBAC_GROUPS = ("", "rbac.authorization.k8s.io")


@dataclass(frozen=True)
class PermissionSplit:
    permissions: list[dict[str, Any]] = field(default_factory=list)
    cluster_permissions: list[dict[str, Any]] = field(default_factory=list)
    extras: list[Obj] = field(default_factory=list)


def service_account_of(deployment: Obj) -> str:
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return str(spec.get("serviceAccountName") or DEFAULT_SERVICE_ACCOUNT)


def csv_service_accounts(inputs: ProjectInputs) -> list[str]:
    return sorted({service_account_of(d) for d in inputs.deployments})


def _bind(
    bindings: tuple[Obj, ...], rules: dict[str, dict[str, list[Any]]], accounts: set[str]
) -> tuple[list[tuple[str, str, str]], list[Obj]]:
    """(role kind, role name, account) bound here, in order, and the bindings that must
    stay manifests because they also bind other subjects or unknown roles."""
    bound: list[tuple[str, str, str]] = []
    kept: list[Obj] = []
    for binding in bindings:
        ref = binding.get("roleRef") or {}
        kind, role = str(ref.get("kind", "")), str(ref.get("name", ""))
        relevant = role in rules.get(kind, {}) and ref.get("apiGroup", "") in _RBAC_GROUPS
        remaining = False
        for subject in binding.get("subjects") or []:
            if (
                relevant
                and subject.get("kind") == "ServiceAccount"
                and subject.get("name") in accounts
            ):
                bound.append((kind, role, str(subject["name"])))
            else:
                remaining = True
        if remaining:
            kept.append(binding)
    return bound, kept


def _permissions(
    bound: list[tuple[str, str, str]], rules: dict[str, dict[str, list[Any]]], accounts: list[str]
) -> list[dict[str, Any]]:
    result = []
    for account in accounts:
        collected: list[Any] = []
        for kind, role, bound_account in bound:
            if bound_account == account:
                collected += copy.deepcopy(rules[kind][role])
        if collected:
            result.append({"rules": collected, "serviceAccountName": account})
    return result


def split_permissions(inputs: ProjectInputs) -> PermissionSplit:
    accounts = csv_service_accounts(inputs)
    rules = {
        "Role": {name_of(r): list(r.get("rules") or []) for r in inputs.roles},
        "ClusterRole": {name_of(r): list(r.get("rules") or []) for r in inputs.cluster_roles},
    }
    ns_bound, kept_rb = _bind(inputs.role_bindings, rules, set(accounts))
    cluster_bound, kept_crb = _bind(
        inputs.cluster_role_bindings, {"ClusterRole": rules["ClusterRole"]}, set(accounts)
    )
    used = {(kind, role) for kind, role, _ in [*ns_bound, *cluster_bound]}
    extras: list[Obj] = [r for r in inputs.roles if ("Role", name_of(r)) not in used]
    extras += [r for r in inputs.cluster_roles if ("ClusterRole", name_of(r)) not in used]
    extras += kept_rb + kept_crb
    extras += [sa for sa in inputs.service_accounts if name_of(sa) not in accounts]
    return PermissionSplit(
        permissions=_permissions(ns_bound, rules, accounts),
        cluster_permissions=_permissions(cluster_bound, rules, accounts),
        extras=extras,
    )
