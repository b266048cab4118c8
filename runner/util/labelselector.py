"""Kubernetes label selectors: parsed from either form, matched against labels.

A selector comes in two spellings, and both are read here into one `LabelSelector`:

* the structured form (`matchLabels` / `matchExpressions`), as a watch's `selector` in
  watches.yaml. The Go operator only noticed a malformed one when it built the
  controller; `parse_label_selector` checks it when watches.yaml is loaded (operators,
  values, key and value syntax);
* the query-string form (`app=web,tier in (a,b),!old,replicas>1`), as roles send it in
  a LIST's `labelSelector` parameter. `parse_label_selector_string` follows the API
  server's grammar (apimachinery's `labels.Parse`) token for token.

Matching is a pure function with the semantics of `metav1.LabelSelectorAsSelector` and
`labels.Selector`:

* all `matchLabels` pairs and all `matchExpressions` must hold;
* `In`: the key is present and its value is listed; `NotIn`: the key is absent or its
  value is not listed; `Exists` / `DoesNotExist`: presence only; `Gt` / `Lt` (only
  the query form has them): the value is an integer above / below the bound;
* an empty selector matches everything, and so does no selector at all (`None`).

Problems in the structured form are `runner.util.fields.FieldError`s, located by their path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from runner.util.fields import FieldError, FieldPath, describe, normalize_keys

__all__ = [
    "OPERATORS",
    "LabelSelector",
    "LabelSelectorRequirement",
    "parse_label_selector",
    "parse_label_selector_string",
    "selector_matches",
]

IN: Final = "In"
NOT_IN: Final = "NotIn"
EXISTS: Final = "Exists"
DOES_NOT_EXIST: Final = "DoesNotExist"
GREATER_THAN: Final = "Gt"
LESS_THAN: Final = "Lt"
# The structured form's operators; `Gt` and `Lt` exist only in the query-string form.
OPERATORS: Final = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")
_NAME_MAX = 63
_PREFIX_MAX = 253


@dataclass(frozen=True)
class LabelSelectorRequirement:
    """One `matchExpressions` item (`Gt`/`Lt` hold their integer bound as the one value)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == IN:
            return present and labels[self.key] in self.values
        if self.operator == NOT_IN:
            return not present or labels[self.key] not in self.values
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        if self.operator in (GREATER_THAN, LESS_THAN):
            number = _int64(labels[self.key]) if present else None
            bound = _int64(self.values[0]) if len(self.values) == 1 else None
            if number is None or bound is None:
                return False
            return number > bound if self.operator == GREATER_THAN else number < bound
        raise ValueError(f"unknown label selector operator {self.operator!r}")


@dataclass(frozen=True)
class LabelSelector:
    """A Kubernetes LabelSelector; the empty selector matches every object."""

    match_labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with these labels is selected."""
        for key, value in self.match_labels.items():
            if key not in labels or labels[key] != value:
                return False
        return all(requirement.matches(labels) for requirement in self.match_expressions)


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Like `LabelSelector.matches`; `None` (no selector) matches everything."""
    return selector is None or selector.matches(labels)


def _int64(text: str) -> int | None:
    """`text` as Go's `strconv.ParseInt(text, 10, 64)` reads it, or None."""
    if not _INTEGER.match(text):
        return None
    number = int(text, 10)
    return number if -(2**63) <= number < 2**63 else None


def _check_key(path: FieldPath, key: object) -> str:
    if not isinstance(key, str):
        raise FieldError(path, f"label key must be a string, got {describe(key)}")
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > _PREFIX_MAX or not _DNS_SUBDOMAIN.match(prefix)):
        raise FieldError(
            path,
            f"invalid label key {key!r}: the prefix must be a DNS subdomain"
            f" (lower case alphanumerics, '-' and '.', at most {_PREFIX_MAX} characters)",
        )
    if not name or len(name) > _NAME_MAX or not _NAME.match(name):
        raise FieldError(
            path,
            f"invalid label key {key!r}: the name must be at most {_NAME_MAX} alphanumerics,"
            " '-', '_' or '.', starting and ending with an alphanumeric",
        )
    return key


def _check_value(path: FieldPath, value: object) -> str:
    if not isinstance(value, str):
        raise FieldError(
            path, f"label value must be a string, got {describe(value)} (quote it in the YAML)"
        )
    if value and (len(value) > _NAME_MAX or not _NAME.match(value)):
        raise FieldError(
            path,
            f"invalid label value {value!r}: at most {_NAME_MAX} alphanumerics, '-', '_'"
            " or '.', starting and ending with an alphanumeric",
        )
    return value


def _parse_requirement(path: FieldPath, item: object) -> LabelSelectorRequirement:
    if not isinstance(item, Mapping):
        raise FieldError(
            path, f"expected a mapping with key, operator, values; got {describe(item)}"
        )
    fields = normalize_keys(item, ("key", "operator", "values"), path=path)
    if fields.get("key") in (None, ""):
        raise FieldError((*path, "key"), "is required")
    key = _check_key((*path, "key"), fields["key"])
    operator = fields.get("operator")
    if not isinstance(operator, str) or operator not in OPERATORS:
        raise FieldError(
            (*path, "operator"),
            f"invalid operator {describe(operator)} (valid operators: {', '.join(OPERATORS)})",
        )
    raw_values = fields.get("values")
    if raw_values is None:
        raw_values = []
    if not isinstance(raw_values, list):
        raise FieldError((*path, "values"), f"expected a list, got {describe(raw_values)}")
    values = tuple(_check_value((*path, "values", i), v) for i, v in enumerate(raw_values))
    if operator in (IN, NOT_IN) and not values:
        raise FieldError((*path, "values"), f"operator {operator} needs at least one value")
    if operator in (EXISTS, DOES_NOT_EXIST) and values:
        raise FieldError(
            (*path, "values"), f"operator {operator} takes no values, got {describe(raw_values)}"
        )
    return LabelSelectorRequirement(key=key, operator=operator, values=values)


def parse_label_selector(raw: object, *, path: FieldPath = ()) -> LabelSelector:
    """Build and validate a LabelSelector from its YAML/JSON form; raises FieldError."""
    if not isinstance(raw, Mapping):
        raise FieldError(
            path, f"expected a mapping with matchLabels/matchExpressions, got {describe(raw)}"
        )
    fields = normalize_keys(raw, ("matchLabels", "matchExpressions"), path=path)
    labels_raw = fields.get("matchLabels")
    if labels_raw is None:
        labels_raw = {}
    if not isinstance(labels_raw, Mapping):
        raise FieldError((*path, "matchLabels"), f"expected a mapping, got {describe(labels_raw)}")
    match_labels: dict[str, str] = {}
    for key, value in labels_raw.items():
        where = (*path, "matchLabels", str(key))
        match_labels[_check_key(where, key)] = _check_value(where, value)
    expressions_raw = fields.get("matchExpressions")
    if expressions_raw is None:
        expressions_raw = []
    if not isinstance(expressions_raw, list):
        raise FieldError(
            (*path, "matchExpressions"), f"expected a list, got {describe(expressions_raw)}"
        )
    expressions = tuple(
        _parse_requirement((*path, "matchExpressions", i), item)
        for i, item in enumerate(expressions_raw)
    )
    return LabelSelector(match_labels=match_labels, match_expressions=expressions)


# --- the query-string form ------------------------------------------------------------

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

    def parse(self) -> list[LabelSelectorRequirement]:
        requirements: list[LabelSelectorRequirement] = []
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

    def _requirement(self) -> LabelSelectorRequirement:
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
            if _int64(text) is None:
                raise ValueError(
                    f"invalid label selector {self.text!r}: in {key}{operator.text}{text}"
                    " the value must be an integer"
                )
            return LabelSelectorRequirement(
                key, GREATER_THAN if operator.kind == _GREATER else LESS_THAN, (text,)
            )
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


def parse_label_selector_string(text: str) -> LabelSelector:
    """The selector a `labelSelector` query names; "" selects all; raises ValueError."""
    return LabelSelector(match_expressions=tuple(_LabelParser(text).parse()))
