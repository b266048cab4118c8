"""Patches applied by the plan itself, where the API server cannot apply them.

The first write of a plan to an object that exists in the cluster goes to the API server
as it was sent (with `dryRun=All`), so the server applies it. Later writes to that object,
and every write to an object that only the plan created, have to start from what the plan
already holds, which the server does not know; the plan applies those patches here and
lets the server validate and default the result. The patch types a PATCH may carry:

* `application/merge-patch+json`: RFC 7386, exactly;
* `application/json-patch+json`: RFC 6902 (add, remove, replace, move, copy, test),
  exactly;
* `application/strategic-merge-patch+json` (built-in kinds only; a custom resource
  answers 415 as the API server does): maps merge as in a merge patch; lists of the
  fields Kubernetes merges by a key (`containers` by `name`, `volumeMounts` by
  `mountPath`, ...; `_MERGE_KEYS`) merge item by item, `finalizers` as a set, other
  lists are replaced; the `$patch`, `$retainKeys`, `$deleteFromPrimitiveList/` and
  `$setElementOrder/` directives are followed (the last only drops out). It does not
  read the API's OpenAPI schema: a field merged by a key not in `_MERGE_KEYS` is
  replaced instead;
* `application/apply-patch+yaml` (server-side apply): merged like a strategic merge
  patch. Field ownership is not tracked, so fields another manager set are never
  removed by a later apply here.

Also here: `--set path=value` (`parse_assignment`, `assign`). All pure; errors are
`PatchError` with the status code the API server would answer with.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Final

import yaml

__all__ = [
    "APPLY",
    "JSON_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "PatchError",
    "apply_patch",
    "assign",
    "json_patch",
    "merge_patch",
    "parse_assignment",
    "strategic_merge_patch",
]

MERGE_PATCH: Final = "application/merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
APPLY: Final = "application/apply-patch+yaml"

_MERGE_KEYS: Final = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "env": ("name",),
    "volumes": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "ports": ("containerPort", "port"),
    "hostAliases": ("ip",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "resourceClaims": ("name",),
    "schedulingGates": ("name",),
    "topologySpreadConstraints": ("topologyKey",),
}
"""List fields of built-in kinds that a strategic merge patch merges by a key: the
field's name and the key (the first one its items have)."""
_MERGED_PRIMITIVE_LISTS: Final = frozenset({"finalizers"})
_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_DELETE_FROM: Final = "$deleteFromPrimitiveList/"
_ELEMENT_ORDER: Final = "$setElementOrder/"


class PatchError(ValueError):
    """A patch the API server would refuse: `code` is its answer (422, 415, 400)."""

    def __init__(self, message: str, *, code: int = 422) -> None:
        super().__init__(message)
        self.code = code


def apply_patch(
    target: Mapping[str, Any], content_type: str, body: bytes, *, builtin: bool
) -> dict[str, Any]:
    """`target` patched with `body` of `content_type`; `builtin`: a built-in kind (only
    those take strategic merge patches). A new object; `target` is not changed."""
    kind = content_type.split(";", 1)[0].strip().lower()
    try:
        if kind == APPLY:
            patch: Any = yaml.safe_load(body.decode("utf-8"))
        else:
            patch = json.loads(body)
    except (ValueError, yaml.YAMLError) as err:
        raise PatchError(f"the patch is not valid: {err}", code=400) from None
    if kind == JSON_PATCH:
        if not isinstance(patch, list):
            raise PatchError("a JSON patch is a list of operations", code=400)
        return _object(json_patch(target, patch))
    if not isinstance(patch, dict):
        raise PatchError("the patch is not an object", code=400)
    if kind == MERGE_PATCH:
        return _object(merge_patch(target, patch))
    if kind in (STRATEGIC_MERGE_PATCH, APPLY):
        if kind == STRATEGIC_MERGE_PATCH and not builtin:
            raise PatchError(
                "the body of the request was in an unknown format - accepted media types "
                "include: application/json-patch+json, application/merge-patch+json, "
                "application/apply-patch+yaml",
                code=415,
            )
        return _object(strategic_merge_patch(target, patch))
    raise PatchError(f"unsupported patch type {content_type!r}", code=415)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: `patch` merged into `target` (a new value)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Any, operations: list[Any]) -> Any:
    """RFC 6902: `operations` applied in order to a copy of `target`."""
    doc = copy.deepcopy(target)
    for index, op in enumerate(operations):
        if not isinstance(op, Mapping) or not isinstance(op.get("op"), str):
            raise PatchError(f"operation {index} has no op", code=400)
        name = op["op"]
        path = _pointer(op.get("path"), index)
        if name == "add":
            doc = _add(doc, path, copy.deepcopy(_value(op, index)))
        elif name == "remove":
            doc, _ = _remove(doc, path)
        elif name == "replace" and not path:  # the whole document
            doc = copy.deepcopy(_value(op, index))
        elif name == "replace":
            doc, _ = _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(_value(op, index)))
        elif name in ("move", "copy"):
            source = _pointer(op.get("from"), index)
            if name == "move":
                doc, value = _remove(doc, source)
            else:
                value = copy.deepcopy(_get(doc, source))
            doc = _add(doc, path, value)
        elif name == "test":
            if _get(doc, path) != _value(op, index):
                raise PatchError(f"the test of operation {index} failed at {op.get('path')}")
        else:
            raise PatchError(f"operation {index}: unknown op {name!r}", code=400)
    return doc


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """A strategic merge patch of a built-in kind (see the module docstring)."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return None
    plain = {key: value for key, value in patch.items() if not str(key).startswith("$")}
    if directive == "replace":
        return copy.deepcopy(plain)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        key = str(key)
        if key.startswith(_DELETE_FROM):
            name = key[len(_DELETE_FROM) :]
            drop = value if isinstance(value, list) else []
            current = result.get(name)
            if isinstance(current, list):
                result[name] = [item for item in current if item not in drop]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, field=key)
        else:
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    retain = patch.get(_RETAIN_KEYS)
    if isinstance(retain, list):
        keep = {str(name) for name in retain} | set(plain)
        result = {key: value for key, value in result.items() if key in keep}
    return result


def parse_assignment(text: str) -> tuple[list[str], Any]:
    """`spec.size=3` as (["spec", "size"], 3): the value read as YAML (so `3` is a number,
    `true` a boolean, `'3'` a string, `[a, b]` a list). ValueError naming the mistake."""
    path, equals, raw = text.partition("=")
    if not equals:
        raise ValueError(f"--set {text!r}: expected PATH=VALUE, e.g. spec.size=3")
    parts = path.strip().split(".")
    if not path.strip() or any(not part for part in parts):
        raise ValueError(f"--set {text!r}: {path!r} is not a dotted field path")
    if parts[0] in ("apiVersion", "kind") or parts[:2] in (["metadata", "name"],):
        raise ValueError(f"--set {text!r}: {path} names the object; it cannot be changed")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as err:
        raise ValueError(f"--set {text!r}: the value is not valid YAML: {err}") from None
    return parts, value


def assign(obj: Mapping[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    """A copy of `obj` with the field at `path` set to `value` (maps made on the way)."""
    result = copy.deepcopy(dict(obj))
    node: dict[str, Any] = result
    for index, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            where = ".".join(path[: index + 1])
            raise ValueError(f"--set {'.'.join(path)}: {where} is not a mapping")
        node = child
    node[path[-1]] = copy.deepcopy(value)
    return result


# -- internals ------------------------------------------------------------------------


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PatchError("the patched object is not an object")
    return value


def _merge_list(current: Any, patch: list[Any], *, field: str) -> list[Any]:
    if any(isinstance(item, Mapping) and item.get(_DIRECTIVE) == "replace" for item in patch):
        return [
            copy.deepcopy(item)
            for item in patch
            if not (isinstance(item, Mapping) and item.get(_DIRECTIVE) == "replace")
        ]
    existing = list(current) if isinstance(current, list) else []
    if field in _MERGED_PRIMITIVE_LISTS:
        return existing + [copy.deepcopy(item) for item in patch if item not in existing]
    key = _merge_key(field, [*existing, *patch])
    if key is None:
        return [copy.deepcopy(item) for item in patch if not _deletes(item)]
    result = list(existing)
    for item in patch:
        if not isinstance(item, Mapping):
            result.append(copy.deepcopy(item))
            continue
        position = next(
            (
                at
                for at, old in enumerate(result)
                if isinstance(old, Mapping) and old.get(key) == item.get(key)
            ),
            None,
        )
        if _deletes(item):
            if position is not None:
                del result[position]
        elif position is None:
            result.append(strategic_merge_patch({}, item))
        else:
            result[position] = strategic_merge_patch(result[position], item)
    return result


def _merge_key(field: str, items: list[Any]) -> str | None:
    for key in _MERGE_KEYS.get(field, ()):
        if items and all(isinstance(item, Mapping) and key in item for item in items):
            return key
    return None


def _deletes(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get(_DIRECTIVE) == "delete"


def _value(op: Mapping[str, Any], index: int) -> Any:
    if "value" not in op:
        raise PatchError(f"operation {index} ({op['op']}) has no value", code=400)
    return op["value"]


def _pointer(text: Any, index: int) -> list[str]:
    if not isinstance(text, str) or (text and not text.startswith("/")):
        raise PatchError(f"operation {index}: {text!r} is not a JSON pointer", code=400)
    if not text:
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in text[1:].split("/")]


def _where(path: list[str]) -> str:
    return "/" + "/".join(path)


def _get(doc: Any, path: list[str]) -> Any:
    node = doc
    for part in path:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise PatchError(f"{_where(path)} does not exist")
    return node


def _add(doc: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"{_where(path)}: no such position in the list")
    else:
        raise PatchError(f"{_where(path[:-1])} is neither an object nor a list")
    return doc


def _remove(doc: Any, path: list[str]) -> tuple[Any, Any]:
    if not path:
        raise PatchError("cannot remove the whole document")
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return doc, parent.pop(int(last))
    raise PatchError(f"{_where(path)} does not exist")
