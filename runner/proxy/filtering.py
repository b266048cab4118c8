"""Answering a LIST from the informer cache the way the API server would.

Roles list objects with `label_selectors` and `field_selectors` (kubernetes.core's
`k8s_info`, `lookup`), which arrive as the `labelSelector` and `fieldSelector` query
parameters. To serve such a request from the cache the proxy must select exactly what the
API server would have selected, so both query syntaxes are parsed here with the API
server's grammar (apimachinery's `labels.Parse` and `fields.ParseSelector`):

* labels: `runner.util.labelselector.parse_label_selector_string`, the one label selector
  parser (it also reads watches.yaml's structured selectors);
* fields: comma-separated `path=value`, `path==value`, `path!=value`; `\\`, `\\,` and `\\=`
  escape a backslash, comma or equals sign in the value; the path is dotted into the object
  (`metadata.name`, `status.phase`, `spec.nodeName`), a missing field reads as `""`, and
  values compare as strings (booleans as `true`/`false`).

A selector that does not parse raises `ValueError` naming the bad part; the proxy then
lets the API server answer (and reject) the request itself. Results are sorted by
namespace and name, the order the API server lists in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runner.structs import bodies
from runner.structs.bodies import KubeList, KubeObject
from runner.util.labelselector import parse_label_selector_string

__all__ = [
    "filter_objects",
    "list_body",
    "parse_field_selector_string",
]

FieldMatcher = Callable[[Mapping[str, Any]], bool]

# --- field selectors ------------------------------------------------------------------

_FIELD_OPERATORS: Final = ("!=", "==", "=")  # `==` before `=`: no `=` left in the value


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not escaped by a backslash (escapes are kept)."""
    terms: list[str] = []
    start = 0
    escaped = False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """The field, operator and raw value of one term, split at the first operator."""
    for index in range(len(term)):
        for operator in _FIELD_OPERATORS:
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def _unescape(selector: str, value: str) -> str:
    out: list[str] = []
    escaped = False
    for char in value:
        if escaped:
            if char not in "\\,=":
                raise ValueError(
                    f"invalid field selector {selector!r}: invalid escape sequence '\\{char}'"
                )
            out.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char in ",=":
            raise ValueError(
                f"invalid field selector {selector!r}: {char!r} in a value must be escaped"
                f" as '\\{char}'"
            )
        else:
            out.append(char)
    if escaped:
        raise ValueError(f"invalid field selector {selector!r}: a value ends with a lone '\\'")
    return "".join(out)


def _field_text(obj: Mapping[str, Any], path: tuple[str, ...]) -> str | None:
    """A field as the API server's field sets show it; None for a list or mapping."""
    current: Any = obj
    for part in path:
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
        if current is None:
            return ""
    if isinstance(current, str):
        return current
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, int | float):
        return json.dumps(current)
    return None


@dataclass(frozen=True)
class _FieldTerm:
    path: tuple[str, ...]
    value: str
    equal: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (_field_text(obj, self.path) == self.value) == self.equal


def parse_field_selector_string(text: str) -> FieldMatcher:
    """A predicate on whole objects for a `fieldSelector` query; "" selects all."""
    terms: list[_FieldTerm] = []
    for term in _split_terms(text) if text else []:
        if not term:
            continue
        split = _split_term(term)
        if split is None:
            raise ValueError(
                f"invalid field selector {text!r}: can't understand {term!r}"
                " (expected field=value, field==value or field!=value)"
            )
        field, operator, raw = split
        path = tuple(field.split("."))
        if not field or any(not part or any(c.isspace() for c in part) for part in path):
            raise ValueError(
                f"invalid field selector {text!r}: {field!r} is not a field path"
                " (dotted names such as metadata.name)"
            )
        terms.append(_FieldTerm(path, _unescape(text, raw), operator != "!="))
    selected = tuple(terms)

    def matches(obj: Mapping[str, Any]) -> bool:
        return all(term.matches(obj) for term in selected)

    return matches


# --- LIST answers ---------------------------------------------------------------------


def filter_objects(
    objects: Iterable[KubeObject],
    *,
    namespace: str,
    label_selector: str,
    field_selector: str,
) -> list[KubeObject]:
    """The objects a LIST in `namespace` ("" = all) with these selectors returns, in order.

    Raises ValueError when a selector does not parse. The result holds shallow copies,
    sorted by (namespace, name).
    """
    labels_match = parse_label_selector_string(label_selector).matches
    fields_match = parse_field_selector_string(field_selector)
    selected: list[KubeObject] = []
    for obj in objects:
        if namespace and bodies.namespace(obj) != namespace:
            continue
        if not labels_match(bodies.labels(obj)):
            continue
        if not fields_match(obj):
            continue
        selected.append(obj.copy())
    selected.sort(key=lambda obj: (bodies.namespace(obj), bodies.name(obj)))
    return selected


def list_body(
    items: list[KubeObject], *, api_version: str, kind: str, resource_version: str
) -> KubeList:
    """A `<Kind>List` response body; items lacking `apiVersion`/`kind` get them set.

    The items themselves are not modified (an item needing the fields is copied).
    """
    completed: list[KubeObject] = [
        item
        if "apiVersion" in item and "kind" in item
        else {"apiVersion": api_version, "kind": kind, **item}
        for item in items
    ]
    return {
        "apiVersion": api_version,
        "kind": f"{kind}List",
        "metadata": {"resourceVersion": resource_version},
        "items": completed,
    }
