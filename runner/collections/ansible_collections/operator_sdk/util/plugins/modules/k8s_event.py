#!/usr/bin/python
"""operator_sdk.util.k8s_event: record a core/v1 Event about an object."""

from __future__ import annotations

import copy
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.operator_sdk.util.plugins.module_utils.osdk_kube import (
    AUTH_ARG_SPEC,
    KubeClientError,
    api_error,
    describe_api_error,
    dynamic_client,
    find_resource,
    is_api_error,
    kubernetes_import_error,
    now_rfc3339,
)

DOCUMENTATION = r"""
module: k8s_event
short_description: Record a Kubernetes Event about an object
version_added: "0.0.1"
author:
  - ansible-operator for Python maintainers
description:
  - Creates a core/v1 C(Event), so that C(kubectl describe) and C(kubectl get events)
    show what the operator did to an object.
  - When an Event of that name already exists with the same I(reason), it is updated as
    a repeat of the same occurrence - C(count) goes up by one and C(lastTimestamp) is set
    to now - rather than created again. With another reason it is overwritten and its
    count starts again at 1.
  - The involved object is read to fill in its C(uid) and C(resourceVersion); an object
    that cannot be read is referred to by what was given.
extends_documentation_fragment:
  - operator_sdk.util.osdk_auth_options
options:
  state:
    description:
      - C(present) records the Event; C(absent) deletes the Event of that name if it exists.
    type: str
    choices: [present, absent]
    default: present
  name:
    description:
      - Name of the Event.
    type: str
    required: true
  namespace:
    description:
      - Namespace of the Event. Kubernetes requires it to match the involved object's
        namespace.
    type: str
    required: true
  merge_type:
    description:
      - How an existing Event is patched. Each listed type is tried in order until one
        succeeds; the default is a strategic merge patch.
      - C(json) sends a JSON patch that sets each field of the Event.
    type: list
    elements: str
    choices: [json, merge, strategic-merge]
  message:
    description:
      - Human-readable description of what happened.
    type: str
    required: true
  reason:
    description:
      - Short, machine-readable reason, for example C(Created) or C(ScalingFailed).
    type: str
    required: true
  reportingComponent:
    description:
      - Name of the controller that emits the Event, for example C(my-operator).
    type: str
  type:
    description:
      - Type of the Event.
    type: str
    choices: [Normal, Warning]
  source:
    description:
      - The component reporting the Event.
    type: dict
    suboptions:
      component:
        description: Name of the component.
        type: str
        required: true
  involvedObject:
    description:
      - The object the Event is about.
    type: dict
    suboptions:
      apiVersion:
        description: API version of the object.
        type: str
        required: true
      kind:
        description: Kind of the object.
        type: str
        required: true
      name:
        description: Name of the object.
        type: str
        required: true
      namespace:
        description: Namespace of the object (omit it for cluster-scoped objects).
        type: str
  appendTimestamp:
    description:
      - Append C(.<hex nanoseconds since the epoch>) to I(name), as Kubernetes components
        name their Events, so that every task run creates a new Event.
    type: bool
    default: false
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Tell users the operator scaled their Memcached
  operator_sdk.util.k8s_event:
    name: "{{ ansible_operator_meta.name }}-scaled"
    namespace: "{{ ansible_operator_meta.namespace }}"
    reason: Scaled
    message: "Deployment scaled to {{ size }} replicas"
    type: Normal
    reportingComponent: memcached-operator
    source:
      component: memcached-operator
    involvedObject:
      apiVersion: cache.example.com/v1alpha1
      kind: Memcached
      name: "{{ ansible_operator_meta.name }}"
      namespace: "{{ ansible_operator_meta.namespace }}"

- name: Record a new Event on every run
  operator_sdk.util.k8s_event:
    name: backup
    namespace: default
    reason: BackupTaken
    message: A backup was taken
    appendTimestamp: true
"""

RETURN = r"""
result:
  description: The Event as stored (for C(state=absent), the deleted Event, or an empty mapping).
  returned: success
  type: complex
  contains:
    metadata:
      description: Name, namespace and other metadata of the Event.
      returned: success
      type: dict
    reason:
      description: The reason given.
      returned: success
      type: str
    message:
      description: The message given.
      returned: success
      type: str
    type:
      description: Normal or Warning, when given.
      returned: success
      type: str
    count:
      description: How many times this Event occurred.
      returned: success
      type: int
    firstTimestamp:
      description: When the Event first occurred.
      returned: success
      type: str
    lastTimestamp:
      description: When the Event last occurred.
      returned: success
      type: str
    reportingComponent:
      description: The reporting controller, when given.
      returned: success
      type: str
    source:
      description: The reporting component, when given.
      returned: success
      type: dict
    involvedObject:
      description: The object the Event is about, with its uid and resourceVersion.
      returned: success
      type: dict
"""

EVENT_ARG_SPEC: dict[str, dict[str, Any]] = {
    "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "required": True},
    "merge_type": {
        "type": "list",
        "elements": "str",
        "choices": ["json", "merge", "strategic-merge"],
    },
    "message": {"type": "str", "required": True},
    "reason": {"type": "str", "required": True},
    "reportingComponent": {"type": "str"},
    "type": {"type": "str", "choices": ["Normal", "Warning"]},
    "appendTimestamp": {"type": "bool", "default": False},
    "source": {
        "type": "dict",
        "options": {"component": {"type": "str", "required": True}},
    },
    "involvedObject": {
        "type": "dict",
        "options": {
            "apiVersion": {"type": "str", "required": True},
            "kind": {"type": "str", "required": True},
            "name": {"type": "str", "required": True},
            "namespace": {"type": "str"},
        },
    },
}

PATCH_CONTENT_TYPES = {
    "strategic-merge": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}


def argument_spec() -> dict[str, dict[str, Any]]:
    spec: dict[str, dict[str, Any]] = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(copy.deepcopy(EVENT_ARG_SPEC))
    return spec


def _dropping_nulls(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if not value:
        return None
    return {key: item for key, item in value.items() if item is not None}


def involved_object(module: Any, dyn: Any) -> dict[str, Any] | None:
    """The involvedObject parameter, with uid and resourceVersion read from the object."""
    reference = _dropping_nulls(module.params.get("involvedObject"))
    if not reference:
        return None
    resource = find_resource(dyn, reference["kind"], reference.get("apiVersion") or "v1")
    if resource is None:
        return reference
    namespace = reference.get("namespace") if resource.namespaced else None
    try:
        live = resource.get(name=reference["name"], namespace=namespace).to_dict()
    except Exception as exc:
        if not is_api_error(exc):
            raise
        if not is_api_error(exc, 404):
            module.warn(
                f"could not read the involved object {reference['kind']} "
                f"{reference['name']}: {describe_api_error(exc)}"
            )
        return reference
    metadata = live.get("metadata") or {}
    for field in ("uid", "resourceVersion"):
        if metadata.get(field):
            reference[field] = metadata[field]
    return reference


def read_event(events: Any, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        return dict(events.get(name=name, namespace=namespace).to_dict())
    except Exception as exc:
        if is_api_error(exc, 404):
            return None
        raise


def build_event(
    params: dict[str, Any],
    *,
    name: str,
    existing: dict[str, Any] | None,
    involved: dict[str, Any] | None,
    now: str,
) -> dict[str, Any]:
    """The Event to write: a repeat of `existing` when the reason is the same."""
    repeat = existing is not None and existing.get("reason") == params["reason"]
    if existing is not None and repeat:
        count = int(existing.get("count") or 1) + 1
        first = existing.get("firstTimestamp") or now
    else:
        count, first = 1, now
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": params["namespace"]},
        "message": params["message"],
        "reason": params["reason"],
        "type": params.get("type"),
        "reportingComponent": params.get("reportingComponent"),
        "source": _dropping_nulls(params.get("source")),
        "involvedObject": involved,
        "count": count,
        "firstTimestamp": first,
        "lastTimestamp": now,
    }
    return {key: value for key, value in event.items() if value is not None}


def patch_event(module: Any, events: Any, event: dict[str, Any]) -> dict[str, Any]:
    """Patch with each requested merge type in turn; fail the task if none works."""
    name = event["metadata"]["name"]
    namespace = event["metadata"]["namespace"]
    last_error: Exception | None = None
    for merge_type in module.params.get("merge_type") or ["strategic-merge"]:
        body: Any = event
        if merge_type == "json":
            body = [
                {"op": "add", "path": f"/{field}", "value": value}
                for field, value in event.items()
                if field not in ("apiVersion", "kind", "metadata")
            ]
        try:
            result = events.patch(
                body=body,
                name=name,
                namespace=namespace,
                content_type=PATCH_CONTENT_TYPES[merge_type],
            )
        except Exception as exc:
            if not is_api_error(exc):
                raise
            last_error = exc
            continue
        return dict(result.to_dict())
    assert last_error is not None
    module.fail_json(
        msg=f"Unable to update event {namespace}/{name}: {describe_api_error(last_error)}",
        error=api_error(last_error),
    )
    raise AssertionError("unreachable")


def run(module: Any, dyn: Any) -> dict[str, Any]:
    params = module.params
    namespace = params["namespace"]
    name = params["name"]
    if params["appendTimestamp"]:
        name = f"{name}.{time.time_ns():x}"
    events = dyn.resources.get(api_version="v1", kind="Event")
    existing = None if params["appendTimestamp"] else read_event(events, name, namespace)

    if params["state"] == "absent":
        if existing is None:
            return {"changed": False, "result": {}}
        if not module.check_mode:
            try:
                events.delete(name=name, namespace=namespace)
            except Exception as exc:
                if not is_api_error(exc, 404):
                    raise
        return {"changed": True, "result": existing}

    event = build_event(
        params,
        name=name,
        existing=existing,
        involved=involved_object(module, dyn),
        now=now_rfc3339(),
    )
    if module.check_mode:
        return {"changed": True, "result": event}
    if existing is None:
        return {
            "changed": True,
            "result": dict(events.create(body=event, namespace=namespace).to_dict()),
        }
    result = patch_event(module, events, event)
    return {"changed": result != existing, "result": result}


def main() -> None:
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    missing = kubernetes_import_error()
    if missing:
        module.fail_json(msg=missing_required_lib("kubernetes"), error=missing)
    try:
        dyn = dynamic_client(module.params)
    except KubeClientError as exc:
        module.fail_json(msg=str(exc))
    try:
        outcome = run(module, dyn)
    except Exception as exc:
        if not is_api_error(exc):
            raise
        verb = "delete" if module.params["state"] == "absent" else "create"
        module.fail_json(
            msg=f"Unable to {verb} event: {describe_api_error(exc)}", error=api_error(exc)
        )
    module.exit_json(**outcome)


if __name__ == "__main__":
    main()
