"""The two patch kinds a kustomization uses: strategic merge and JSON 6902 (pure).

Strategic merge is the subset operator projects rely on: maps merge recursively, `null`
deletes a key, lists of maps that carry a `name` (containers, env, ports, volumes,
volumeMounts) merge item by item, an item with `$patch: delete` removes its namesake,
and every other list is replaced. JSON 6902 supports add, remove, replace, move, copy
and test with RFC 6901 pointers (`-` appends).
"""

from __future__ import annotations

import copy
from typing import Any

from runner.errors import ConfigError

_MERGE_KEY = "name"


def strategic_merge(target: Any, patch: Any) -> Any:
    """Return `target` with `patch` merged in (neither argument is modified)."""
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    merged = copy.deepcopy(target)
    for key, value in patch.items():
        if key == "$patch":
            continue
        if value is None:
            merged.pop(key, None)
        elif key in merged and isinstance(value, dict) and isinstance(merged[key], dict):
            merged[key] = strategic_merge(merged[key], value)
        elif key in merged and isinstance(value, list) and isinstance(merged[key], list):
            merged[key] = _merge_list(merged[key], value)
        else:
            merged[key] = _strip_directives(value)
    return merged


def _keyed(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(i, dict) and _MERGE_KEY in i for i in items)


def _merge_list(target: list[Any], patch: list[Any]) -> list[Any]:
    """Items merged by name, in kustomize's order: the patch's items first, in the
    patch's order, then the target's items the patch does not name, in theirs."""
    if not (_keyed(patch) and (not target or _keyed(target))):
        return _strip_directives(patch)  # type: ignore[no-any-return]
    by_name = {item[_MERGE_KEY]: item for item in target}
    named = {item[_MERGE_KEY] for item in patch}
    result = []
    for item in patch:
        if item.get("$patch") == "delete":
            continue
        old = by_name.get(item[_MERGE_KEY])
        result.append(
            _strip_directives(item) if old is None else strategic_merge(copy.deepcopy(old), item)
        )
    result += [copy.deepcopy(item) for item in target if item[_MERGE_KEY] not in named]
    return result


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if k != "$patch"}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return copy.deepcopy(value)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ConfigError(f"JSON patch path {path!r} must start with '/'")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _index(container: list[Any], token: str, path: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit():
        raise ConfigError(f"JSON patch path {path!r}: {token!r} is not a list index")
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise ConfigError(f"JSON patch path {path!r}: index {index} is out of range")
    return index


def _parent(document: Any, path: str) -> tuple[Any, str]:
    tokens = _pointer(path)
    if not tokens:
        raise ConfigError("JSON patch: the whole document cannot be the target here")
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path, allow_end=False)]
        else:
            raise ConfigError(f"JSON patch path {path!r}: {token!r} does not exist")
    return node, tokens[-1]


def _get(document: Any, path: str) -> Any:
    parent, last = _parent(document, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise ConfigError(f"JSON patch path {path!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, allow_end=False)]
    raise ConfigError(f"JSON patch path {path!r} does not exist")


def _add(document: Any, path: str, value: Any) -> None:
    parent, last = _parent(document, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise ConfigError(f"JSON patch path {path!r}: parent is not a map or list")


def _remove(document: Any, path: str) -> Any:
    parent, last = _parent(document, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise ConfigError(f"JSON patch path {path!r} does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, path, allow_end=False))
    raise ConfigError(f"JSON patch path {path!r} does not exist")


def json6902(target: Any, operations: list[Any]) -> Any:
    """Return `target` with the operations applied in order (the argument is untouched)."""
    document = copy.deepcopy(target)
    for number, operation in enumerate(operations):
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise ConfigError(f"JSON patch operation {number}: needs `op` and `path`")
        op, path = operation["op"], str(operation["path"])
        if op == "add":
            _add(document, path, copy.deepcopy(operation.get("value")))
        elif op == "remove":
            _remove(document, path)
        elif op == "replace":
            _remove(document, path)
            _add(document, path, copy.deepcopy(operation.get("value")))
        elif op == "move":
            _add(document, path, _remove(document, str(operation["from"])))
        elif op == "copy":
            _add(document, path, copy.deepcopy(_get(document, str(operation["from"]))))
        elif op == "test":
            if _get(document, path) != operation.get("value"):
                raise ConfigError(f"JSON patch test failed at {path!r}")
        else:
            raise ConfigError(f"JSON patch operation {number}: unknown op {op!r}")
    return document
