"""Answering a LIST from the informer cache the way the API server would.

Roles list objects with `label_selectors` and `field_selectors` (kubernetes.core's
`k8s_info`, `lookup`), which arrive as the `labelSelector` and `fieldSelector` query
parameters. To serve such a request from the cache the proxy must select exactly what the
API server would have selected, so both query syntaxes are parsed here with the API
server's grammar (apimachinery's `labels.Parse` and `fields.ParseSelector`):

* labels: comma-separated requirements (all must hold) — `k=v`, `k==v`, `k!=v` (also true
  when `k` is absent), `k in (a,b)`, `k notin (a)`, `k` (exists), `!k` (does not exist),
  `k>1` / `k<1` (integer comparison); whitespace between tokens is ignored; keys and values
  are validated like the API server does, with `runner.labelselector`'s checks;
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
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runner.labelselector import (
    DOES_NOT_EXIST,
    EXISTS,
    IN,
    NOT_IN,
    FieldError,
    LabelSelectorRequirement,
    _check_key,
    _check_value,
)

__all__ = [
    "filter_objects",
    "list_body",
    "parse_field_selector_string",
    "parse_label_selector_string",
]

LabelMatcher = Callable[[Mapping[str, str]], bool]
FieldMatcher = Callable[[Mapping[str, Any]], bool]

# --- label selectors ------------------------------------------------------------------

_IDENTIFIER: Final = "identifier"
_END: Final = "end of string"
_OPEN: Final = "("
_CLOSE: Final = ")"
_COMMA: Final = ","
_NOT: Final = "!"
_EQUALS: Final = "="
_DOUBLE_EQUALS: Final = "=="
_NOT_EQUALS: Final = "!="
_GREATER: Final = ">"
_LESS: Final = "<"
_IN: Final = "in"
_NOT_IN: Final = "notin"
_SYMBOLS: Final = {
    "(": _OPEN,
    ")": _CLOSE,
    ",": _COMMA,
    "!": _NOT,
    "=": _EQUALS,
    "==": _DOUBLE_EQUALS,
    "!=": _NOT_EQUALS,
    ">": _GREATER,
    "<": _LESS,
}
_KEYWORDS: Final = {"in": _IN, "notin": _NOT_IN}
_SPECIAL: Final = frozenset("=!(),><")
_WHITESPACE: Final = frozenset(" \t\r\n")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+\Z")


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str


def _lex(text: str) -> list[_Token]:
    """Tokens as apimachinery's label lexer makes them (longest known operator first)."""
    tokens: list[_Token] = []
    position = 0
    while True:
        while position < len(text) and text[position] in _WHITESPACE:
            position += 1
        if position == len(text):
            tokens.append(_Token(_END, ""))
            return tokens
        if text[position] in _SPECIAL:
            # Every special character is a token on its own; two may form a longer one.
            pair = text[position : position + 2]
            symbol = pair if pair in _SYMBOLS else text[position]
            tokens.append(_Token(_SYMBOLS[symbol], symbol))
            position += len(symbol)
            continue
        start = position
        while (
            position < len(text)
            and text[position] not in _WHITESPACE
            and text[position] not in _SPECIAL
        ):
            position += 1
        word = text[start:position]
        tokens.append(_Token(_KEYWORDS.get(word, _IDENTIFIER), word))


@dataclass(frozen=True)
class _Compare:
    """`k>n` / `k<n`: the label is present and is an integer above / below `n`."""

    key: str
    greater: bool
    bound: int

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        number = None if value is None else _int64(value)
        if number is None:
            return False
        return number > self.bound if self.greater else number < self.bound


def _int64(text: str) -> int | None:
    """`text` as Go's `strconv.ParseInt(text, 10, 64)` reads it, or None."""
    if not _INTEGER.match(text):
        return None
    number = int(text, 10)
    return number if -(2**63) <= number < 2**63 else None


_Requirement = LabelSelectorRequirement | _Compare


class _LabelParser:
    """The recursive descent of apimachinery's label selector parser, token for token."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _lex(text)
        self.position = 0

    def _peek(self, *, values: bool = True) -> _Token:
        token = self.tokens[self.position]
        # Where a value or key is expected, `in` and `notin` are plain words.
        if values and token.kind in (_IN, _NOT_IN):
            return _Token(_IDENTIFIER, token.text)
        return token

    def _next(self, *, values: bool = True) -> _Token:
        token = self._peek(values=values)
        self.position += 1
        return token

    def _error(self, found: _Token, expected: str) -> ValueError:
        shown = repr(found.text) if found.kind != _END else "the end of the selector"
        return ValueError(
            f"invalid label selector {self.text!r}: found {shown}, expected {expected}"
        )

    def parse(self) -> list[_Requirement]:
        requirements: list[_Requirement] = []
        while True:
            token = self._peek()
            if token.kind == _END:
                return requirements
            if token.kind not in (_IDENTIFIER, _NOT):
                raise self._error(token, "'!', a key or the end of the selector")
            requirements.append(self._requirement())
            after = self._next()
            if after.kind == _END:
                return requirements
            if after.kind != _COMMA:
                raise self._error(after, "',' or the end of the selector")
            following = self._peek()
            if following.kind not in (_IDENTIFIER, _NOT):
                raise self._error(following, "'!' or a key after ','")

    def _requirement(self) -> _Requirement:
        negated = False
        token = self._next()
        if token.kind == _NOT:
            negated = True
            token = self._next()
        if token.kind != _IDENTIFIER:
            raise self._error(token, "a key")
        key = self._key(token.text)
        if self._peek().kind in (_END, _COMMA):
            return LabelSelectorRequirement(key, DOES_NOT_EXIST if negated else EXISTS)
        if negated:
            raise self._error(self._peek(), "',' or the end of the selector after '!key'")
        operator = self._next(values=False)
        if operator.kind in (_IN, _NOT_IN):
            values = self._value_set()
            return LabelSelectorRequirement(
                key, IN if operator.kind == _IN else NOT_IN, tuple(sorted(values))
            )
        if operator.kind in (_EQUALS, _DOUBLE_EQUALS, _NOT_EQUALS):
            value = self._value(self._exact_value())
            return LabelSelectorRequirement(
                key, NOT_IN if operator.kind == _NOT_EQUALS else IN, (value,)
            )
        if operator.kind in (_GREATER, _LESS):
            text = self._value(self._exact_value())
            bound = _int64(text)
            if bound is None:
                raise ValueError(
                    f"invalid label selector {self.text!r}: in {key}{operator.text}{text}"
                    " the value must be an integer"
                )
            return _Compare(key, operator.kind == _GREATER, bound)
        raise self._error(operator, "'=', '==', '!=', '>', '<', 'in' or 'notin'")

    def _key(self, key: str) -> str:
        try:
            return _check_key((), key)
        except FieldError as error:
            raise ValueError(f"invalid label selector {self.text!r}: {error.problem}") from None

    def _value(self, value: str) -> str:
        try:
            return _check_value((), value)
        except FieldError as error:
            raise ValueError(f"invalid label selector {self.text!r}: {error.problem}") from None

    def _exact_value(self) -> str:
        token = self._peek()
        if token.kind in (_END, _COMMA):
            return ""
        token = self._next()
        if token.kind != _IDENTIFIER:
            raise self._error(token, "a value")
        return token.text

    def _value_set(self) -> set[str]:
        token = self._next()
        if token.kind != _OPEN:
            raise self._error(token, "'('")
        values: set[str] = set()
        expect_value = True
        while True:
            token = self._next()
            if token.kind == _CLOSE:
                if expect_value:
                    values.add("")  # `()`, `(a,)` and `(,a)` hold the empty value
                return {self._value(value) for value in values}
            if token.kind == _COMMA:
                if expect_value:
                    values.add("")
                expect_value = True
            elif token.kind == _IDENTIFIER and expect_value:
                values.add(token.text)
                expect_value = False
            else:
                raise self._error(token, "',', ')' or a value")


def parse_label_selector_string(text: str) -> LabelMatcher:
    """A predicate on an object's labels for a `labelSelector` query; "" selects all."""
    requirements = tuple(_LabelParser(text).parse())

    def matches(labels: Mapping[str, str]) -> bool:
        return all(requirement.matches(labels) for requirement in requirements)

    return matches


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


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def filter_objects(
    objects: Iterable[Mapping[str, Any]],
    *,
    namespace: str,
    label_selector: str,
    field_selector: str,
) -> list[dict[str, Any]]:
    """The objects a LIST in `namespace` ("" = all) with these selectors returns, in order.

    Raises ValueError when a selector does not parse. The result holds shallow copies,
    sorted by (namespace, name).
    """
    labels_match = parse_label_selector_string(label_selector)
    fields_match = parse_field_selector_string(field_selector)
    selected: list[dict[str, Any]] = []
    for obj in objects:
        metadata = _metadata(obj)
        if namespace and _text(metadata.get("namespace")) != namespace:
            continue
        labels = metadata.get("labels")
        if not labels_match(labels if isinstance(labels, Mapping) else {}):
            continue
        if not fields_match(obj):
            continue
        selected.append(dict(obj))
    selected.sort(
        key=lambda obj: (_text(_metadata(obj).get("namespace")), _text(_metadata(obj).get("name")))
    )
    return selected


def list_body(
    items: list[dict[str, Any]], *, api_version: str, kind: str, resource_version: str
) -> dict[str, Any]:
    """A `<Kind>List` response body; items lacking `apiVersion`/`kind` get them set.

    The items themselves are not modified (an item needing the fields is copied).
    """
    completed = [
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
