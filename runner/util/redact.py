"""Masking credentials and Secret data before anything is printed.

Ansible task results carry whatever the modules saw: a `uri` task's request headers, a
`k8s` task's Secret (its `data`, its last-applied annotation), a kubeconfig's token, a
module's `password` parameter. The operator prints task results (`--ansible-log-events`),
Ansible's own output (`ANSIBLE_DEBUG_LOGS`) and error messages; ops teams ship those logs
to places with wider access than the cluster's Secrets. Everything printed goes through
one of the functions here:

- `redact(value)` for structured data (event data, task results): values under
  credential-like keys and the `data` / `stringData` of Secret objects become
  `<redacted>`; every other string goes through `redact_text`;
- `redact_text(text)` for free text (Ansible's output): `Authorization` headers, bearer
  tokens, `key: value` / `key=value` pairs with credential-like keys, passwords in URLs,
  and the `data` maps of Secrets printed as JSON;
- `redact_message(text, limit)` for messages (log lines, status conditions, Events):
  the text capped to `limit` characters, keeping its end, then `redact_text`.

All are pure, never raise, and take time linear in their input (a role's failure message
can be megabytes; this runs on the event loop). Text masking is a heuristic, a last line
of defence, tuned not to mask prose: after `key:` an ordinary word ("running",
"Ansible") is kept, and `namespace/name:` is a name, not a key; quoted values, `key=value`
and anything with digits, symbols or mixed case are masked. Structured masking is exact
for the shapes above. Ansible's `no_log: true` remains the way for a role to keep a value
out of every output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "LOG_LIMIT",
    "MESSAGE_LIMIT",
    "REDACTED",
    "cap_text",
    "is_sensitive_key",
    "redact",
    "redact_message",
    "redact_text",
]

REDACTED = "<redacted>"
# A message's default cap: the longest `message` a metav1.Condition may carry.
MESSAGE_LIMIT = 32768
# A log line's cap (a task's output printed whole can be megabytes).
LOG_LIMIT = 65536
_MARKER_ROOM = 40  # "[1234567890 characters cut] " and then some

_SENSITIVE_PARTS = (
    "authorization",
    "password",
    "passwd",
    "token",
    "apikey",
    "api_key",
    "privatekey",
    "private_key",
    "keydata",
    "key_data",
    "cookie",
    "credential",
    "secret",
)
# Keys naming a secret rather than holding one (`secretName`, `secretRef`, ...).
_REFERENCE_SUFFIXES = ("name", "ref", "refs", "namespace", "names", "kind")
_SECRET_DATA_KEYS = ("data", "stringData", "binaryData")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_MAX_DEPTH = 64

# Every pattern below runs in time linear in the length of its input: each starts only
# where a token starts (a lookbehind or a literal), and its repetitions are possessive
# (`*+`, `++`) or separated by characters they cannot share, so a failed attempt never
# retries the same characters. One log line of a megabyte must not stall the event loop.
_KEYWORD = (
    r"(?:password|passwd|token|secret|api[_-]?key|key[_-]data|private[_-]?key|credential"
    r"|cookie)"
)
# Lower-case words one of which a text must hold for `_KEYWORD` to match in it.
_KEYWORD_WORDS = (
    "passw",
    "token",
    "secret",
    "apikey",
    "api_key",
    "api-key",
    "key_data",
    "key-data",
    "privatekey",
    "private_key",
    "private-key",
    "credential",
    "cookie",
)
_AUTH_HEADER = re.compile(
    r"(?P<key>\b(?:proxy-)?authorization\b[\"']?\s*+[:=]\s*+[\"']?)"
    r"(?:(?P<scheme>bearer|basic|token|digest|negotiate)\s++)?"
    r"(?P<value>[^\s\"',}]++)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<key>\bbearer\s++)(?P<value>[A-Za-z0-9\-._~+/]{8,}+=*+)", re.IGNORECASE)
# `key: value`, `key=value`, `"key": "value"`, `\"key\": \"value\"`. A key is a whole token
# (not the end of a path: `default/test-secret:` names a CR) holding a credential word,
# and not one that names or points at a credential (`secretName`, `tokenRef`).
_KEY_VALUE = re.compile(
    r"(?<![\w./-])(?P<open>\\?[\"'])?"
    r"(?=[\w.-]*?" + _KEYWORD + r")(?P<name>[\w.-]++)"
    r"(?<!name)(?<!names)(?<!namespace)(?<!ref)(?<!refs)(?<!kind)"
    r"(?P<close>\\?[\"'])?\s*+(?P<sep>[:=])\s*+"
    r"(?P<value>"
    r"\\\"(?:[^\\\n]++|\\(?!\"))*+(?:\\\")?"
    r"|\"(?:[^\"\\\n]++|\\.)*+\"?"
    r"|'[^'\n]*+'?"
    r"|[^\s,;}\]&\"'\\]++"
    r")",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"(?P<key>://[^/\s:@]++:)(?P<value>[^/\s@]++)(?=@)")
_SECRET_KIND = re.compile(r"[\"']kind[\"']\s*+:\s*+[\"']Secret[\"']")
_SECRET_DATA_JSON = re.compile(
    r"(?P<key>[\"'](?:data|stringData|binaryData)[\"']\s*+:\s*+)(?P<value>\{[^{}]*+\})"
)
_JSON_MEMBER_VALUE = re.compile(
    r"(?P<key>(?:\"[^\"\n]*+\"|'[^'\n]*+')\s*+:\s*+)"
    r"(?P<value>\"(?:[^\"\\]++|\\.)*+\"|'[^']*+'|[^\s,}]++)"
)
# A value that reads as a word of prose ("running", "Ansible"), not as a credential:
# after `key:` such a word is left alone, so that `reconcile Memcached my-token: running
# Ansible` (a cluster-scoped CR's name) keeps its words. Generated passwords and tokens
# carry digits, symbols or mixed case.
_ORDINARY_WORD = re.compile(r"[A-Z]?[a-z]++(?:[A-Z][a-z]++)*+|[A-Z]++")
_LITERALS = frozenset(("true", "false", "null", "none"))
# A cut may fall inside a credential; its remaining characters are dropped with it.
_TOKEN_END = re.compile(r"[^A-Za-z0-9\-._~+/=%]")
_TOKEN_SEARCH = 8192


def is_sensitive_key(key: str) -> bool:
    """Whether a mapping key names a credential (`token`, `Authorization`, `db_password`)."""
    lowered = key.lower().replace("-", "_")
    compact = lowered.replace("_", "")
    if not any(part in lowered or part in compact for part in _SENSITIVE_PARTS):
        return False
    if "secret" in compact and not any(
        part in compact for part in _SENSITIVE_PARTS if part != "secret"
    ):
        # `secretName: db-creds` names a Secret; `client_secret: xyz` is one.
        return not compact.endswith(_REFERENCE_SUFFIXES)
    return True


def redact(value: Any) -> Any:
    """A copy of `value` (JSON-like data) with credentials and Secret data masked."""
    return _redact(value, 0)


def redact_text(text: str) -> str:
    """`text` with credential-looking values masked (see the module docstring).

    Linear in the length of `text`; callers on the event loop cap it first
    (`redact_message`)."""
    if not text:
        return text
    # Substring tests are much cheaper than a pattern tried at every position: most text
    # holds none of the words a pattern needs.
    lowered = text.lower()
    if "authorization" in lowered:
        text = _AUTH_HEADER.sub(_mask_auth, text)
    if "bearer" in lowered:
        text = _BEARER.sub(_mask_bearer, text)
    if any(word in lowered for word in _KEYWORD_WORDS):
        text = _KEY_VALUE.sub(_mask_key_value, text)
    if "://" in text:
        text = _URL_PASSWORD.sub(_mask, text)
    if "secret" in lowered and _SECRET_KIND.search(text):
        text = _SECRET_DATA_JSON.sub(_mask_members, text)
    return text


def cap_text(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, keeping its end (where an error message says
    what went wrong) behind a `[N characters cut] ` marker.

    The cut moves forward to the end of the token it falls into, so that the remains of a
    credential cut in two are not printed (for tokens up to half the limit long)."""
    if len(text) <= limit:
        return text
    keep = max(limit - _MARKER_ROOM, 0)
    start = len(text) - keep
    window = min(_TOKEN_SEARCH, keep // 2)
    boundary = _TOKEN_END.search(text, start, start + window)
    start = boundary.start() if boundary else start + window
    return f"[{start} characters cut] {text[start:]}"


def redact_message(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text` capped to `limit` characters (its end kept), then masked: what goes into a
    log line, a status condition or an Event."""
    return redact_text(cap_text(text, limit))


# -- internals ------------------------------------------------------------------------


def _redact(value: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return REDACTED
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        secret = _is_secret(value)
        result: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and is_sensitive_key(key):
                result[key] = _mask_value(item, depth + 1)
            elif secret and key in _SECRET_DATA_KEYS and isinstance(item, Mapping):
                result[key] = {name: REDACTED for name in item}
            elif secret and key == "metadata" and isinstance(item, Mapping):
                result[key] = _secret_metadata(item, depth + 1)
            else:
                result[key] = _redact(item, depth + 1)
        return result
    if isinstance(value, list | tuple):
        return [_redact(item, depth + 1) for item in value]
    return value


def _mask_value(value: Any, depth: int) -> Any:
    """The value of a credential-like key: scalars masked, containers searched."""
    if value is None or isinstance(value, bool) or value == "":
        return value
    if isinstance(value, str | bytes | int | float):
        return REDACTED
    if isinstance(value, list | tuple):
        return [_mask_value(item, depth + 1) for item in value]
    return _redact(value, depth)


def _is_secret(obj: Mapping[Any, Any]) -> bool:
    """A Secret object, or something shaped like one (list items carry no `kind`)."""
    if obj.get("kind") == "Secret":
        return True
    return (
        isinstance(obj.get("metadata"), Mapping)
        and isinstance(obj.get("type"), str)
        and any(key in obj for key in _SECRET_DATA_KEYS)
    )


def _secret_metadata(meta: Mapping[Any, Any], depth: int) -> dict[Any, Any]:
    """A Secret's metadata; its last-applied annotation repeats the data."""
    result = _redact(meta, depth)
    annotations = result.get("annotations")
    if isinstance(annotations, dict) and _LAST_APPLIED in annotations:
        annotations[_LAST_APPLIED] = REDACTED
    return dict(result)


def _is_ordinary_word(value: str) -> bool:
    return _ORDINARY_WORD.fullmatch(value) is not None


def _mask(match: re.Match[str]) -> str:
    return f"{match.group('key')}{REDACTED}"


def _mask_members(match: re.Match[str]) -> str:
    """A Secret's `data` map printed as JSON: every value masked, keys and syntax kept."""
    masked = _JSON_MEMBER_VALUE.sub(_mask_quoted, match.group("value"))
    return f"{match.group('key')}{masked}"


def _mask_quoted(match: re.Match[str]) -> str:
    value = match.group("value")
    quote = value[0] if value[0] in "\"'" else '"'
    return f"{match.group('key')}{quote}{REDACTED}{quote}"


def _mask_auth(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    if scheme is None and _is_ordinary_word(match.group("value")):
        return match.group(0)  # "authorization: denied"
    return f"{match.group('key')}{scheme + ' ' if scheme else ''}{REDACTED}"


def _mask_bearer(match: re.Match[str]) -> str:
    if _is_ordinary_word(match.group("value")):
        return match.group(0)  # "bearer authentication"
    return _mask(match)


def _mask_key_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.startswith('\\"'):
        closing = '\\"' if len(value) > 3 and value.endswith('\\"') else ""
        return _masked(match, f'\\"{REDACTED}{closing}')
    if value[0] in "\"'":
        if len(value) == 2 and value[1] == value[0]:
            return match.group(0)  # empty
        closing = value[0] if len(value) > 1 and value.endswith(value[0]) else ""
        return _masked(match, f"{value[0]}{REDACTED}{closing}")
    if value.lower() in _LITERALS:
        return match.group(0)
    if match.group("sep") == ":" and _is_ordinary_word(value):
        return match.group(0)  # "reconcile Secret test-secret: running Ansible"
    return _masked(match, REDACTED)


def _masked(match: re.Match[str], value: str) -> str:
    """The match with its value replaced (everything before the value kept)."""
    return match.group(0)[: match.start("value") - match.start()] + value
