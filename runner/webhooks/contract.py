"""The role contract of a webhook, as pure functions: what a role gets, what it returns.

What a role gets (extra-vars, the reconcile vars' shape so tasks can be shared):
- the object's `spec` keys, snake_cased; `ansible_operator_meta: {name, namespace}`;
  `_<group>_<kind>` (the whole object) and `_<group>_<kind>_spec` — on DELETE the object
  being deleted;
- `operation` (CREATE, UPDATE, DELETE, CONNECT), `old_object` (UPDATE and DELETE, else
  null), `user_info` ({username, uid, groups, extra}), `dry_run` (true for
  `--dry-run=server`), `webhook_type`; for conversion `desired_api_version`;
- then the declaration's `vars`.

What it returns (facts set with `ansible.builtin.set_fact`, read from the run's events):
- validating: a failed task denies, its message is the denial's; `webhook_warnings`
  (a string or a list of them) become the API's warnings;
- mutating: `webhook_object` (the object as it should be: we compute the JSON patch) or
  `webhook_patch` (a JSON Patch list); a failed task denies, as above;
- conversion: `webhook_object`, the object in `desired_api_version`.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from runner.structs.bodies import KubeObject
from runner.watches.extravars import build_extra_vars
from runner.webhooks.declarations import Webhook
from runner.webhooks.reviews import (
    AdmissionRequest,
    AdmissionResponse,
    AdmissionReview,
    PatchOperation,
    ResultStatus,
)

__all__ = [
    "OBJECT_FACT",
    "PATCH_FACT",
    "WARNINGS_FACT",
    "ContractError",
    "RoleOutput",
    "admission_response",
    "admission_vars",
    "conversion_result",
    "conversion_vars",
    "json_patch",
    "mutation_patch",
]

OBJECT_FACT = "webhook_object"
PATCH_FACT = "webhook_patch"
WARNINGS_FACT = "webhook_warnings"
_FACTS = (OBJECT_FACT, PATCH_FACT, WARNINGS_FACT)
_MAX_WARNINGS = 10
_MAX_WARNING_LENGTH = 500  # the API server's limit per warning is longer; keep them short
_PATCH_OPS = ("add", "remove", "replace", "move", "copy", "test")


class ContractError(ValueError):
    """A role's output does not follow the contract (a failure, not a denial)."""


def _base_vars(webhook: Webhook, obj: Mapping[str, Any] | None) -> dict[str, Any]:
    return build_extra_vars(
        obj=obj or {},
        group=webhook.gvk.group,
        kind=webhook.gvk.kind,
        snake_case=webhook.snake_case_parameters,
        mark_unsafe=webhook.mark_unsafe,
        watch_vars={},
        finalizer_vars=None,
    )


def admission_vars(webhook: Webhook, request: AdmissionRequest) -> dict[str, Any]:
    """The extra-vars of a validating or mutating role for one AdmissionReview request."""
    obj = request.get("object")
    old = request.get("oldObject")
    subject = obj if isinstance(obj, Mapping) else old if isinstance(old, Mapping) else {}
    extra = _base_vars(webhook, subject)
    meta = extra["ansible_operator_meta"]
    # A CREATE with generateName has no name yet; the request's namespace is always right.
    meta["name"] = meta["name"] or str(request.get("name") or "")
    meta["namespace"] = meta["namespace"] or str(request.get("namespace") or "")
    user = _mapping(request.get("userInfo"))
    extra.update(
        operation=str(request.get("operation") or ""),
        old_object=copy.deepcopy(old) if isinstance(old, Mapping) else None,
        user_info={
            "username": user.get("username", ""),
            "uid": user.get("uid", ""),
            "groups": list(user.get("groups") or []),
            "extra": dict(user.get("extra") or {}),
        },
        dry_run=bool(request.get("dryRun")),
        webhook_type=webhook.type,
    )
    extra.update(copy.deepcopy(dict(webhook.vars)))
    return extra


def conversion_vars(
    webhook: Webhook, obj: Mapping[str, Any], desired_api_version: str
) -> dict[str, Any]:
    """The extra-vars of a conversion role for one object."""
    extra = _base_vars(webhook, obj)
    extra.update(desired_api_version=desired_api_version, webhook_type=webhook.type)
    extra.update(copy.deepcopy(dict(webhook.vars)))
    return extra


@dataclass
class RoleOutput:
    """The contract's facts as the run's events reported them (the last setting wins)."""

    facts: dict[str, Any] = field(default_factory=dict)

    def add(self, event: Mapping[str, Any]) -> None:
        if event.get("event") != "runner_on_ok":
            return
        data = event.get("event_data")
        res = data.get("res") if isinstance(data, Mapping) else None
        found = res.get("ansible_facts") if isinstance(res, Mapping) else None
        if isinstance(found, Mapping):
            self.facts.update({k: v for k, v in found.items() if k in _FACTS})

    def warnings(self) -> list[str]:
        value = self.facts.get(WARNINGS_FACT)
        if value is None or value == "":
            return []
        items = value if isinstance(value, list) else [value]
        return [str(item)[:_MAX_WARNING_LENGTH] for item in items[:_MAX_WARNINGS]]

    def object(self) -> dict[str, Any] | None:
        value = self.facts.get(OBJECT_FACT)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ContractError(f"{OBJECT_FACT} must be a mapping (an object), got {_type(value)}")
        return dict(value)

    def patch(self) -> list[PatchOperation] | None:
        value = self.facts.get(PATCH_FACT)
        if value is None:
            return None
        if not isinstance(value, list):
            raise ContractError(f"{PATCH_FACT} must be a list of JSON Patch operations")
        for index, op in enumerate(value):
            if (
                not isinstance(op, Mapping)
                or op.get("op") not in _PATCH_OPS
                or not isinstance(op.get("path"), str)
            ):
                raise ContractError(
                    f"{PATCH_FACT}[{index}] is not a JSON Patch operation "
                    f"({{op: add|remove|replace|move|copy|test, path: /...}}): {op!r}"[:300]
                )
        return [cast(PatchOperation, dict(op)) for op in value]


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _type(value: object) -> str:
    return type(value).__name__


def _pointer(parts: list[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def json_patch(old: Any, new: Any, _path: list[str] | None = None) -> list[PatchOperation]:
    """A JSON Patch turning `old` into `new`: maps are compared key by key, anything else
    (lists included) is replaced whole."""
    path = _path or []
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        ops: list[PatchOperation] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": _pointer([*path, str(key)])})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": _pointer([*path, str(key)]), "value": value})
            elif old[key] != value or type(old[key]) is not type(value):
                ops += json_patch(old[key], value, [*path, str(key)])
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": _pointer(path), "value": new}]


def mutation_patch(original: Mapping[str, Any], output: RoleOutput) -> list[PatchOperation]:
    """The patch of a mutating role's run: its `webhook_patch`, or the difference between
    the object it returned and the one it was given (nothing returned: no change)."""
    patch = output.patch()
    if patch is not None:
        return patch
    wanted = output.object()
    if wanted is None:
        return []
    for key in ("apiVersion", "kind"):
        if key in wanted and wanted[key] != original.get(key):
            raise ContractError(
                f"{OBJECT_FACT}.{key} changed from {original.get(key)!r} to {wanted[key]!r}; "
                "a mutating webhook cannot change it"
            )
    return json_patch(
        dict(original),
        {**wanted, **{k: original[k] for k in ("apiVersion", "kind") if k in original}},
    )


def admission_response(
    uid: str,
    *,
    allowed: bool,
    message: str = "",
    code: int | None = None,
    warnings: list[str] | None = None,
    patch: list[PatchOperation] | None = None,
) -> AdmissionReview:
    """An AdmissionReview (admission.k8s.io/v1) answering request `uid`."""
    response: AdmissionResponse = {"uid": uid, "allowed": allowed}
    if not allowed or message:
        status: ResultStatus = {"message": message}
        if not allowed:
            status["code"] = code or 403
            status["reason"] = "Forbidden" if (code or 403) == 403 else "InternalError"
        response["status"] = status
    if warnings:
        response["warnings"] = warnings
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def conversion_result(
    original: Mapping[str, Any], output: RoleOutput, desired_api_version: str
) -> KubeObject:
    """The converted object a conversion role returned, checked as the API server would:
    the desired apiVersion, the same kind, name, namespace and uid (labels and
    annotations may change)."""
    converted = output.object()
    if converted is None:
        raise ContractError(f"the conversion role set no {OBJECT_FACT}")
    converted.setdefault("apiVersion", desired_api_version)
    converted.setdefault("kind", original.get("kind"))
    if converted["apiVersion"] != desired_api_version:
        raise ContractError(
            f"{OBJECT_FACT}.apiVersion is {converted['apiVersion']!r}, expected "
            f"{desired_api_version!r}"
        )
    if converted["kind"] != original.get("kind"):
        raise ContractError(f"{OBJECT_FACT}.kind changed to {converted['kind']!r}")
    before = _mapping(original.get("metadata"))
    after = converted.get("metadata")
    metadata = dict(before)
    if isinstance(after, Mapping):
        for key in ("labels", "annotations"):
            if key in after:
                metadata[key] = after[key]
    converted["metadata"] = metadata
    return cast(KubeObject, converted)
