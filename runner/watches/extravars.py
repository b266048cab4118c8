"""The extra-vars a role or playbook receives for one custom resource.

Roles written for the Go ansible-operator read the CR's spec as snake_cased top-level
variables, `ansible_operator_meta`, and the whole CR as `_<group>_<kind>`. The snake-case
conversion is a port of the Go operator's rules, quirks included (`Foo` -> `_foo`,
`a1b2c3` -> `a_1_b2c3`, only HTTP/URL/IP are treated as acronyms), because a key that
converts differently is a variable the role never sees.

Everything here is pure: inputs are never mutated and results share no mutable state
with them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from runner.structs import bodies

__all__ = [
    "UNSAFE_KEY",
    "build_extra_vars",
    "cr_var_name",
    "mark_unsafe",
    "snake_case_keys",
    "to_snake_case",
]

UNSAFE_KEY = "__ansible_unsafe"
"""Ansible reads `{"__ansible_unsafe": s}` in JSON extra-vars as a string never templated."""

# A letter, digits, then another letter-and-digits run: "a1b2" gets word breaks "a 1 b2".
# ASCII digits only, like Go's `\d`.
_DIGIT_RUN = re.compile(r"([A-Za-z])([0-9]+)([A-Za-z][0-9]+)")

# The only words the original treats as acronyms (its "word mapping"). A plural `s`
# right after one belongs to it: `IPs` is one word.
_ACRONYMS = ("HTTP", "URL", "IP")
_ACRONYMS_LOWER = frozenset(word.lower() for word in _ACRONYMS)

_DELIMITERS = frozenset(" _-")


def _is_upper(ch: str) -> bool:
    return "A" <= ch <= "Z"


def _is_lower(ch: str) -> bool:
    return "a" <= ch <= "z"


def _isolate_acronyms(text: str) -> str:
    """Put `_` around the first occurrence of each acronym (upper-casing a plural `s`).

    `egressIPs` -> `egress_IPS`, `URLegress` -> `URL_egress`, `egressIPEgress` ->
    `egress_IP_Egress`. Only the first occurrence of each word is isolated, as in the
    original. The words never overlap, so the order they are handled in does not matter.
    """
    for word in _ACRONYMS:
        start = text.find(word)
        if start < 0:
            continue
        end = start + len(word)
        before, after = text[:start], text[end:]
        head = "_" if start > 0 else ""
        if not after:
            text = f"{before}_{word}"
        elif after == "s":
            # A plural at the very end: the original adds `_` in front even at
            # position 0, so `IPs` ends up as `__ips`.
            text = f"{before}_{word}S"
        elif after[0] == "s":
            text = f"{before}{head}{word}S_{after[1:]}"
        else:
            text = f"{before}{head}{word}_{after}"
    return text


def to_snake_case(key: str) -> str:
    """Convert one key the way the Go ansible-operator does (`paramconv.ToSnake`).

    Words break at `_`, `-` and spaces, before an upper-case letter followed by a
    lower-case one, and after a lower-case letter followed by an upper-case one; runs of
    capitals stay one word (`JSONData` -> `_json_data`). A key starting with a capital
    gets a leading `_` unless its first word is HTTP, URL or IP (with a plural `s`, it
    still gets one: `URLs` -> `_urls`). When the key has no lower-case letter at all the
    acronyms are not looked for. Exact for ASCII keys; other letters never break words.
    """
    text = _DIGIT_RUN.sub(r"\1 \2 \3", key).strip(" ")
    if not text:
        return ""
    leading_capital = _is_upper(text[0])
    if text.upper() != text:
        text = _isolate_acronyms(text)

    words: list[str] = []
    word = ""
    for i, ch in enumerate(text):
        nxt = text[i + 1] if i + 1 < len(text) else ""
        case_flips = (_is_upper(ch) and _is_lower(nxt)) or (_is_lower(ch) and _is_upper(nxt))
        # A flip only splits a word that already has a character before `ch`.
        if case_flips and word:
            if _is_upper(ch):
                # "HTTPServer": the S starts the next word.
                words.append(word.lower())
                word = ch
            else:
                # "sizeK": the e ends this word.
                words.append((word + ch).lower())
                word = ""
        elif ch in _DELIMITERS:
            words.append(word.lower())
            word = ""
        else:
            word += ch
    words.append(word.lower())

    joined = "_".join(words)
    if leading_capital and words[0] not in _ACRONYMS_LOWER:
        return "_" + joined
    return joined


def snake_case_keys(value: Any) -> Any:
    """Return `value` with every mapping key snake_cased, through nested maps and lists.

    Values are left as they are (copied, not converted). When two keys convert to the
    same name the later one wins.
    """
    if isinstance(value, Mapping):
        return {to_snake_case(str(k)): snake_case_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [snake_case_keys(item) for item in value]
    return copy.deepcopy(value)


def mark_unsafe(value: Any) -> Any:
    """Wrap every string in `value` as `{"__ansible_unsafe": s}`, through maps and lists.

    Keys are not wrapped; numbers, booleans and nulls pass through.
    """
    if isinstance(value, str):
        return {UNSAFE_KEY: value}
    if isinstance(value, Mapping):
        return {k: mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mark_unsafe(item) for item in value]
    return copy.deepcopy(value)


# `build_extra_vars` takes a `mark_unsafe` flag, which shadows the function inside it.
_wrap = mark_unsafe


def cr_var_name(group: str, kind: str) -> str:
    """The name of the variable holding the whole CR: `_<group>_<kind>`.

    Only the kind is lower-cased; `.` and `-` become `_` (`cache.example.com`, `Memcached`
    -> `_cache_example_com_memcached`); the core group gives `__<kind>`.
    """
    name = f"_{group}_{kind.lower()}"
    return name.replace(".", "_").replace("-", "_")


def build_extra_vars(
    *,
    obj: Mapping[str, Any],
    group: str,
    kind: str,
    snake_case: bool,
    mark_unsafe: bool,
    watch_vars: Mapping[str, Any],
    finalizer_vars: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The extra-vars for one run on `obj` (the CR as the reconcile hands it over: with
    managed status, after its Running condition was written).

    In order, later ones overriding earlier ones: each spec key (snake_cased when
    `snake_case`), `ansible_operator_meta: {name, namespace}`, `_<group>_<kind>` (the
    whole CR, given `spec: {}` when it has no spec mapping), `_<group>_<kind>_spec`, the
    watch's `vars`, then `finalizer_vars` (pass them only for a finalizer run). With
    `mark_unsafe`, strings in the spec keys and the two CR variables are wrapped as
    `{"__ansible_unsafe": s}`; `ansible_operator_meta` and the vars are not.
    """
    cr = copy.deepcopy(dict(obj))
    spec = cr.get("spec")
    if not isinstance(spec, Mapping):
        spec = {}
        cr["spec"] = spec

    params: dict[str, Any] = snake_case_keys(spec) if snake_case else copy.deepcopy(dict(spec))
    if mark_unsafe:
        params = {k: _wrap(v) for k, v in params.items()}

    params["ansible_operator_meta"] = {
        "name": bodies.name(cr),
        "namespace": bodies.namespace(cr),
    }
    cr_key = cr_var_name(group, kind)
    params[cr_key] = _wrap(cr) if mark_unsafe else cr
    params[f"{cr_key}_spec"] = _wrap(spec) if mark_unsafe else copy.deepcopy(spec)

    params.update(copy.deepcopy(dict(watch_vars)))
    if finalizer_vars is not None:
        params.update(copy.deepcopy(dict(finalizer_vars)))
    return params
