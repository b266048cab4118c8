"""Files `create api` writes for one kind: CRD, sample, role, playbook, RBAC, watch entry.

Pure. The role it writes reconciles for real: it keeps a ConfigMap named
`<name>-<kind>` in the CR's namespace with the CR's `message`, so a fresh project shows
a full reconcile (owner reference, status conditions) before any code is written.
"""

from __future__ import annotations

from typing import Any

from runner.devtools.scaffold.files.config import ALL_VERBS
from runner.devtools.scaffold.names import Resource
from runner.devtools.scaffold.yamltext import dump

__all__ = [
    "crd",
    "editor_role",
    "manager_rules_block",
    "playbook",
    "role_files",
    "sample",
    "viewer_role",
    "watch_entry_block",
]

_STRING = "string"


def crd(resource: Resource) -> str:
    kind = resource.kind
    schema = {
        "description": f"{kind} is the Schema for the {resource.plural} API",
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this "
                "representation of an object.",
                "type": _STRING,
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource "
                "this object represents.",
                "type": _STRING,
            },
            "metadata": {"type": "object"},
            "spec": {
                "description": f"Spec defines the desired state of {kind}",
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            },
            "status": {
                "description": f"Status defines the observed state of {kind}",
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            },
        },
    }
    data = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": resource.crd_name},
        "spec": {
            "group": resource.full_group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": resource.plural,
                "singular": resource.singular,
            },
            "scope": "Namespaced" if resource.namespaced else "Cluster",
            "versions": [
                {
                    "name": resource.version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }
    return dump(data)


def sample(resource: Resource, *, project: str) -> str:
    data = {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {
            "name": resource.sample_name,
            "labels": {
                "app.kubernetes.io/name": project,
                "app.kubernetes.io/managed-by": "kustomize",
            },
        },
        "spec": {"message": f"Hello from {resource.sample_name}"},
    }
    return dump(data)


def _rule(resource: Resource, suffix: str, verbs: tuple[str, ...]) -> dict[str, Any]:
    return {
        "apiGroups": [resource.full_group],
        "resources": [resource.plural + suffix],
        "verbs": list(verbs),
    }


def manager_rules(resource: Resource) -> list[dict[str, Any]]:
    return [
        _rule(resource, "", ALL_VERBS),
        _rule(resource, "/status", ("get", "patch", "update")),
        _rule(resource, "/finalizers", ("update",)),
    ]


def manager_rules_block(resource: Resource) -> str:
    """Lines to append to config/rbac/role.yaml's `rules:` (same indentation)."""
    text = dump({"rules": manager_rules(resource)}, start=False)
    body = text.split("\n", 1)[1]
    return f"  # {resource.gvk_text()}\n{body}"


_PEOPLE_ROLE_VERB = {"admin": "do anything with", "editor": "manage", "viewer": "read"}


def _people_role(resource: Resource, project: str, name: str, verbs: tuple[str, ...]) -> str:
    data = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": f"{resource.singular}-{name}-role",
            "labels": {
                "app.kubernetes.io/name": project,
                "app.kubernetes.io/managed-by": "kustomize",
            },
        },
        "rules": [_rule(resource, "", verbs), _rule(resource, "/status", ("get",))],
    }
    return dump(
        data,
        header=f"Lets people {_PEOPLE_ROLE_VERB[name]} {resource.kind} "
        "objects; the operator itself does not use this role.",
    )


def admin_role(resource: Resource, *, project: str) -> str:
    return _people_role(resource, project, "admin", ("*",))


def editor_role(resource: Resource, *, project: str) -> str:
    return _people_role(resource, project, "editor", ALL_VERBS)


def viewer_role(resource: Resource, *, project: str) -> str:
    return _people_role(resource, project, "viewer", ("get", "list", "watch"))


def watch_entry_block(resource: Resource, *, playbook: bool) -> str:
    entry: dict[str, str | bool] = {
        "version": resource.version,
        "group": resource.full_group,
        "kind": resource.kind,
    }
    if playbook:
        entry["playbook"] = resource.playbook_file
    else:
        entry["role"] = resource.role_name
    # Spec values reach the role as plain strings, never as templates (see
    # docs/operating.md, "Security").
    entry["markUnsafe"] = True
    return dump([entry], start=False)


def playbook(resource: Resource) -> str:
    return f"""\
---
# Reconciles one {resource.kind}: runs the {resource.role_name} role. Roles are found through
# ANSIBLE_ROLES_PATH (`make run` and the operator image point it at roles/).
- hosts: localhost
  gather_facts: false
  collections:
    - kubernetes.core
    - operator_sdk.util
  tasks:
    - name: Reconcile with the {resource.role_name} role
      ansible.builtin.import_role:
        name: {resource.role_name}
"""


def role_files(resource: Resource) -> dict[str, str]:
    kind, role = resource.kind, resource.role_name
    root = f"roles/{role}"
    return {
        f"{root}/README.md": _readme(resource),
        f"{root}/defaults/main.yml": f"""\
---
# Defaults of the {role} role. Each field of a {kind}'s spec, snake_cased, arrives as a
# variable of the same name and overrides the default here.
message: "Hello from the {kind} operator"
""",
        f"{root}/tasks/main.yml": f"""\
---
# Reconciles one {kind}: make the cluster match its spec. Variables: the spec's fields
# (snake_cased), ansible_operator_meta.name and .namespace, and the whole object as
# _{_var_group(resource)}_{resource.singular}. Objects created here get the {kind} as their
# owner, so they are deleted with it and their changes trigger a reconcile.
- name: ConfigMap {{{{ ansible_operator_meta.name }}}}-{resource.singular} holds the message
  kubernetes.core.k8s:
    state: present
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{{{ ansible_operator_meta.name }}}}-{resource.singular}"
        namespace: "{{{{ ansible_operator_meta.namespace }}}}"
      data:
        message: "{{{{ message }}}}"
""",
        f"{root}/handlers/main.yml": f"---\n# Handlers of the {role} role.\n",
        f"{root}/vars/main.yml": f"---\n# Variables of the {role} role (they win over the spec).\n",
        f"{root}/meta/main.yml": f"""\
---
galaxy_info:
  author: Your Name
  description: Reconciles {kind} resources ({resource.api_version})
  company: Your Company
  license: Apache-2.0
  min_ansible_version: "2.15"
  platforms: []
  galaxy_tags: []
dependencies: []
collections:
  - kubernetes.core
  - operator_sdk.util
""",
        # Empty until the role needs them: files for `copy`, templates for `template`.
        f"{root}/files/.placeholder": "",
        f"{root}/templates/.placeholder": "",
    }


def _var_group(resource: Resource) -> str:
    return resource.full_group.replace(".", "_").replace("-", "_")


def _readme(resource: Resource) -> str:
    return f"""\
# {resource.role_name}

Reconciles `{resource.kind}` resources (`{resource.api_version}`): `ansible-operator run`
runs this role for every change of a {resource.kind}, with the fields of its `spec` as
variables (snake_cased: `fooBar` becomes `foo_bar`) and `ansible_operator_meta.name` /
`ansible_operator_meta.namespace`. The result shows in the {resource.kind}'s
`status.conditions`.

## Variables

- `message` (default `Hello from the {resource.kind} operator`): stored in the ConfigMap
  `<name>-{resource.singular}` in the {resource.kind}'s namespace.

## Trying it

```sh
make install run          # CRDs into the cluster, then the operator in the foreground
ansible-operator cluster kubectl apply -f config/samples/{resource.sample_file}
```
"""
