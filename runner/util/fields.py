"""Reading hand-written mappings (watches.yaml, webhooks.yaml, selectors) field by field.

A problem is a `FieldError` located by its path inside the document
(`("selector", "matchExpressions", 0, "operator")`), so that the message can name the
key as a person reads it and the caller can find its line (`runner.util.yamlnodes`).
`normalize_keys` matches field names case-insensitively, as Go's encoding/json did for
the Go operator's files, and `describe` shows a bad value with its YAML type.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["FieldError", "FieldPath", "describe", "normalize_keys"]

FieldPath = tuple[str | int, ...]
_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),  # before int: bool is an int in Python
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (Mapping, "mapping"),
    (list, "list"),
)


class FieldError(ValueError):
    """A problem with one field, located by its path (`("selector", "matchLabels", "app")`)."""

    def __init__(self, path: FieldPath, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{self.key}: {problem}" if path else problem)

    @property
    def key(self) -> str:
        """The path for people: `selector.matchExpressions[0].operator`."""
        text = ""
        for part in self.path:
            text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
        return text


def describe(value: object) -> str:
    """A value as a message shows it: its YAML type and a JSON rendering, kept short."""
    if value is None:
        return "null"
    kind = type(value).__name__
    for python_type, name in _KINDS:
        if isinstance(value, python_type):
            kind = name
            break
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{kind} {text}"


def normalize_keys(
    raw: Mapping[Any, Any],
    known: Sequence[str],
    *,
    path: FieldPath,
    unknown: list[FieldError] | None = None,
) -> dict[str, Any]:
    """Map field names to their canonical spelling; reject unknown and repeated ones.

    The Go operator decoded watches.yaml through encoding/json, which matches field names
    case-insensitively (`Kind:` works like `kind:`); that is kept. Unknown names were
    silently ignored there: given an `unknown` list, they are skipped and each is added
    to it (for a warning); without one, the first is an error. Both name the known keys.
    """
    canonical = {name.casefold(): name for name in known}
    fields: dict[str, Any] = {}
    for key, value in raw.items():
        name = canonical.get(key.casefold()) if isinstance(key, str) else None
        if name is None:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            if unknown is None:
                raise FieldError(
                    (*path, str(key)), f"unknown key; {hint}known keys: {', '.join(known)}"
                )
            hint = hint.rstrip(" ") or f"known keys: {', '.join(known)}"
            unknown.append(
                FieldError(
                    (*path, str(key)),
                    f"unknown key, ignored (as the Go operator ignores it); {hint}",
                )
            )
            continue
        if name in fields:
            raise FieldError((*path, str(key)), f"given twice (also as {name!r})")
        fields[name] = value
    return fields
