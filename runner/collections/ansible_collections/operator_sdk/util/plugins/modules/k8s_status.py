#!/usr/bin/python
"""operator_sdk.util.k8s_status: set fields and conditions on a resource's status."""

from __future__ import annotations

import copy
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.operator_sdk.util.plugins.module_utils.osdk_kube import (
    AUTH_ARG_SPEC,
    NAME_ARG_SPEC,
    KubeClientError,
    api_error,
    describe_api_error,
    dynamic_client,
    find_resource,
    is_api_error,
    kubernetes_import_error,
    now_rfc3339,
)
from ansible_collections.operator_sdk.util.plugins.module_utils.osdk_status import (
    CONDITION_STATUSES,
    ConditionError,
    merge_patch,
    plan_patch,
    plan_replace,
    validate_conditions,
)

DOCUMENTATION = r"""
module: k8s_status
short_description: Set fields and conditions on the status of a Kubernetes resource
version_added: "0.0.1"
author:
  - ansible-operator for Python maintainers
description:
  - Writes the C(status) subresource of a Kubernetes object, typically the custom resource
    an Ansible-based operator is reconciling.
  - By default the given keys are merged into the stored status (a JSON merge patch, so
    nested mappings merge and lists are written as given) and the given conditions are
    merged into the stored ones by C(type). With I(replace) the whole status is replaced.
  - Nothing is written, and C(changed) is false, when the stored status already holds
    everything requested.
  - The operator's own status management leaves conditions it did not write alone, so
    custom conditions set here stay until a task changes or removes them.
extends_documentation_fragment:
  - operator_sdk.util.osdk_auth_options
options:
  api_version:
    description:
      - API version of the object, C(group/version) or C(v1) for the core group.
    type: str
    default: v1
    aliases: [api, version]
  kind:
    description:
      - Kind of the object. Its plural, singular or short name also works.
    type: str
    required: true
  name:
    description:
      - Name of the object.
    type: str
    required: true
  namespace:
    description:
      - Namespace of the object; required for namespaced kinds.
    type: str
  status:
    description:
      - 'Keys to set on the status, as a mapping; a key set to C(null) is removed.'
      - It may hold a C(conditions) list, but then I(conditions) must not be given too.
      - One of I(status) or I(conditions) is expected.
    type: dict
  conditions:
    description:
      - Conditions to set on C(status.conditions), each following the Kubernetes API
        conventions.
      - Unless I(replace) is set they are merged with the stored conditions by C(type).
        A stored condition is only replaced when a field other than C(lastTransitionTime)
        differs.
      - When a condition is written without C(lastTransitionTime), the stored time is kept
        while C(status) stays the same and the current time is used when it changes.
    type: list
    elements: dict
    suboptions:
      type:
        description: Type of the condition; identifies it among the others.
        type: str
        required: true
      status:
        description: Status of the condition.
        type: str
        required: true
        choices: ["True", "False", "Unknown"]
      reason:
        description: Why the condition has this status, as one CamelCase word.
        type: str
      message:
        description: Human-readable details.
        type: str
      lastHeartbeatTime:
        description: RFC 3339 date-time of the last probe.
        type: str
      lastTransitionTime:
        description: RFC 3339 date-time of the last change of C(status).
        type: str
  replace:
    description:
      - Replace the whole status with a C(PUT) instead of merging into it with a C(PATCH).
    type: bool
    default: false
    aliases: [force]
  replace_lists:
    description:
      - How lists other than C(conditions) are compared with the stored ones.
      - C(false) (the default) treats a list as already stored when each requested item is
        present in the stored list; C(true) only when both lists are equal.
      - When the status is written, lists are always written as given.
    type: bool
    default: false
notes:
  - Supports check mode; the returned object then shows the status that would be written.
"""

EXAMPLES = r"""
- name: Set custom status fields on the custom resource
  operator_sdk.util.k8s_status:
    api_version: apps.example.com/v1alpha1
    kind: TestCR
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    status:
      phase: Ready
      nodes: [a, b]

- name: Report a custom condition
  operator_sdk.util.k8s_status:
    api_version: apps.example.com/v1alpha1
    kind: TestCR
    name: "{{ ansible_operator_meta.name }}"
    namespace: "{{ ansible_operator_meta.namespace }}"
    conditions:
      - type: Available
        status: "False"
        reason: PingFailed
        message: The service did not answer a ping

- name: Replace the whole status
  operator_sdk.util.k8s_status:
    api_version: apps.example.com/v1alpha1
    kind: TestCR
    name: my-test
    namespace: testing
    replace: true
    status:
      phase: Reset
"""

RETURN = r"""
result:
  description:
    - The object after the write, or as read when nothing had to change.
  returned: success
  type: complex
  contains:
    apiVersion:
      description: API version of the object.
      returned: success
      type: str
    kind:
      description: Kind of the object.
      returned: success
      type: str
    metadata:
      description: Object metadata (name, namespace, labels, annotations, ...).
      returned: success
      type: dict
    spec:
      description: The object's spec, when it has one.
      returned: success
      type: dict
    status:
      description: The object's status.
      returned: success
      type: dict
"""

CONDITION_OPTIONS: dict[str, dict[str, Any]] = {
    "type": {"type": "str", "required": True},
    "status": {"type": "str", "required": True, "choices": list(CONDITION_STATUSES)},
    "reason": {"type": "str"},
    "message": {"type": "str"},
    "lastHeartbeatTime": {"type": "str"},
    "lastTransitionTime": {"type": "str"},
}

STATUS_ARG_SPEC: dict[str, dict[str, Any]] = {
    "status": {"type": "dict"},
    "conditions": {"type": "list", "elements": "dict", "options": CONDITION_OPTIONS},
    "replace": {"type": "bool", "default": False, "aliases": ["force"]},
    "replace_lists": {"type": "bool", "default": False},
}

# A write conflicts when the object changed after it was read (or was read from the
# operator proxy's cache a moment before it caught up): read again and retry.
CONFLICT_ATTEMPTS = 6
CONFLICT_BACKOFF = 0.25


def argument_spec() -> dict[str, dict[str, Any]]:
    spec: dict[str, dict[str, Any]] = {}
    spec.update(copy.deepcopy(AUTH_ARG_SPEC))
    spec.update(copy.deepcopy(NAME_ARG_SPEC))
    spec.update(copy.deepcopy(STATUS_ARG_SPEC))
    return spec


def requested_status(module: Any) -> dict[str, Any]:
    status = copy.deepcopy(module.params.get("status") or {})
    try:
        conditions = validate_conditions(module.params.get("conditions"))
    except ConditionError as exc:
        module.fail_json(msg=f"The specified conditions failed to validate: {exc}")
    if conditions and status.get("conditions"):
        module.fail_json(
            msg="You cannot specify conditions in both the 'status' and 'conditions' parameters"
        )
    if conditions:
        status["conditions"] = conditions
    return dict(status)


def lookup(module: Any, dyn: Any) -> Any:
    params = module.params
    resource = find_resource(dyn, params["kind"], params["api_version"])
    if resource is None:
        module.fail_json(
            msg=(
                f"Failed to find a resource for kind {params['kind']!r} in "
                f"{params['api_version']!r} (tried kind, plural, singular and short names)"
            )
        )
    if "status" not in (getattr(resource, "subresources", None) or {}):
        module.fail_json(
            msg=(
                f"Resource {resource.api_version} {resource.kind} does not support "
                "the status subresource"
            )
        )
    if resource.namespaced and not params.get("namespace"):
        module.fail_json(msg=f"'namespace' is required for the namespaced kind {resource.kind}")
    return resource


def read(module: Any, resource: Any) -> dict[str, Any]:
    params = module.params
    namespace = params.get("namespace") if resource.namespaced else None
    try:
        instance = resource.get(name=params["name"], namespace=namespace).to_dict()
    except Exception as exc:
        if not is_api_error(exc):
            raise
        where = f"{namespace}/{params['name']}" if namespace else params["name"]
        module.fail_json(
            msg=f"Failed to read {resource.kind} {where}: {describe_api_error(exc)}",
            error=api_error(exc),
        )
    instance["status"] = instance.get("status") or {}
    return dict(instance)


def write_once(module: Any, resource: Any, wanted: dict[str, Any]) -> dict[str, Any]:
    """One read-compare-write round; raises the API error of a conflicting write."""
    params = module.params
    instance = read(module, resource)
    now = now_rfc3339()
    namespace = params.get("namespace") if resource.namespaced else None

    if params["replace"]:
        desired = plan_replace(instance["status"], wanted, now=now)
        if desired is None:
            return {"changed": False, "result": instance}
        if module.check_mode:
            return {"changed": True, "result": {**instance, "status": desired}}
        body = {**instance, "status": desired}
        result = resource.status.replace(body=body, name=params["name"], namespace=namespace)
        return {"changed": True, "result": result.to_dict()}

    patch = plan_patch(instance["status"], wanted, replace_lists=params["replace_lists"], now=now)
    if patch is None:
        return {"changed": False, "result": instance}
    if module.check_mode:
        return {"changed": True, "result": merge_patch(instance, {"status": patch})}
    body = {
        "metadata": {"resourceVersion": instance["metadata"]["resourceVersion"]},
        "status": patch,
    }
    result = resource.status.patch(
        body=body,
        name=params["name"],
        namespace=namespace,
        content_type="application/merge-patch+json",
    )
    return {"changed": True, "result": result.to_dict()}


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    missing = kubernetes_import_error()
    if missing:
        module.fail_json(msg=missing_required_lib("kubernetes"), error=missing)

    wanted = requested_status(module)
    try:
        dyn = dynamic_client(module.params)
    except KubeClientError as exc:
        module.fail_json(msg=str(exc))
    resource = lookup(module, dyn)

    verb = "replace" if module.params["replace"] else "patch"
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            outcome = write_once(module, resource, wanted)
        except Exception as exc:
            if is_api_error(exc, 409) and attempt < CONFLICT_ATTEMPTS:
                time.sleep(CONFLICT_BACKOFF * attempt)
                continue
            if not is_api_error(exc):
                raise
            module.fail_json(
                msg=f"Failed to {verb} the status: {describe_api_error(exc)}",
                error=api_error(exc),
            )
        module.exit_json(**outcome)


if __name__ == "__main__":
    main()
