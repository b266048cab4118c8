"""Masking credentials and Secret data before anything is printed.

Ansible task results carry whatever the modules saw: a `uri` task's request headers, a
`k8s` task's Secret (its `data`, its last-applied annotation), a kubeconfig's token, a
module's `password` parameter. The operator prints task results (`--ansible-log-events`),
Ansible's own output (`ANSIBLE_DEBUG_LOGS`) and error messages; ops teams ship those logs
to places with wider access than the cluster's Secrets. Everything printed goes through
one of the two functions here:

- `redact(value)` for structured data (event data, task results): values under
  credential-like keys and the `data` / `stringData` of Secret objects become
  `<redacted>`; every other string goes through `redact_text`;
- `redact_text(text)` for free text (messages, Ansible's output): `Authorization`
  headers, bearer tokens, `key: value` / `key=value` pairs with credential-like keys,
  passwords in URLs, and the `data` maps of Secrets printed as JSON.

Both are pure and never raise. Text masking is a heuristic, a last line of defence;
structured masking is exact for the shapes above. Ansible's `no_log: true` remains the
way for a role to keep a value out of every output.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "is_sensitive_key", "redact", "redact_text"]

REDACTED = "<redacted>"

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

_KEY = r"[\w.-]*(?:password|passwd|token|secret|api[_-]?key|key[_-]data|credential)[\w.-]*"
_AUTH_HEADER = re.compile(
    r"(?P<key>\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)"
    r"(?:(?P<scheme>bearer|basic|token|digest|negotiate)\s+)?"
    r"(?P<value>[^\s\"',}]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<key>\bbearer\s+)(?P<value>[A-Za-z0-9\-._~+/]{8,}=*)", re.IGNORECASE)
_KEY_VALUE = re.compile(
    r"(?P<key>(?P<quote>[\"']?)\b" + _KEY + r"(?P=quote)\s*(?::|=)\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s,;}\]&\"']+)",
    re.IGNORECASE,
)
_URL_PASSWORD = re.compile(r"(?P<key>://[^/\s:@]+:)(?P<value>[^/\s@]+)(?=@)")
_SECRET_KIND = re.compile(r"[\"']kind[\"']\s*:\s*[\"']Secret[\"']")
_SECRET_DATA_JSON = re.compile(
    r"(?P<key>[\"'](?:data|stringData|binaryData)[\"']\s*:\s*)(?P<value>\{[^{}]*\})"
)
_JSON_MEMBER_VALUE = re.compile(
    r"(?P<key>(?P<q>[\"'])(?:(?!(?P=q)).)*(?P=q)\s*:\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s,}]+)"
)


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
    """`text` with credential-looking values masked (see the module docstring)."""
    if not text:
        return text
    text = _AUTH_HEADER.sub(_mask_auth, text)
    text = _BEARER.sub(_mask, text)
    text = _KEY_VALUE.sub(_mask_key_value, text)
    text = _URL_PASSWORD.sub(_mask, text)
    if _SECRET_KIND.search(text):
        text = _SECRET_DATA_JSON.sub(_mask_members, text)
    return text


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
    return f"{match.group('key')}{scheme + ' ' if scheme else ''}{REDACTED}"


def _mask_key_value(match: re.Match[str]) -> str:
    value = match.group("value")
    if value in ('""', "''"):
        return match.group(0)
    if value[0] in "\"'":
        return f"{match.group('key')}{value[0]}{REDACTED}{value[0]}"
    if value.lower() in ("true", "false", "null", "none"):
        return match.group(0)
    return f"{match.group('key')}{REDACTED}"
