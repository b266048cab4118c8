"""runner.util.redact: credentials and Secret data never reach a log line."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from runner.util.redact import (
    MESSAGE_LIMIT,
    REDACTED,
    cap_text,
    is_sensitive_key,
    redact,
    redact_message,
    redact_text,
)

TOKEN = "eyJhbGciOiJSUzI1NiJ9.planted-token-4f1c"


@pytest.mark.parametrize(
    ("key", "sensitive"),
    [
        pytest.param("Authorization", True, id="authorization"),
        pytest.param("proxy-authorization", True, id="proxy-authorization"),
        pytest.param("token", True, id="token"),
        pytest.param("bearer_token", True, id="bearer-token"),
        pytest.param("api_key", True, id="api-key"),
        pytest.param("apiKey", True, id="api-key-camel"),
        pytest.param("password", True, id="password"),
        pytest.param("db_password", True, id="db-password"),
        pytest.param("client-key-data", True, id="kubeconfig-key"),
        pytest.param("client_secret", True, id="client-secret"),
        pytest.param("Set-Cookie", True, id="cookie"),
        pytest.param("secretName", False, id="secret-name-is-a-reference"),
        pytest.param("secretRef", False, id="secret-ref"),
        pytest.param("name", False, id="name"),
        pytest.param("msg", False, id="msg"),
        pytest.param("task", False, id="task"),
    ],
)
def test_is_sensitive_key(key: str, sensitive: bool) -> None:
    assert is_sensitive_key(key) is sensitive


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            {"headers": {"Authorization": f"Bearer {TOKEN}", "Accept": "json"}},
            {"headers": {"Authorization": REDACTED, "Accept": "json"}},
            id="uri-headers",
        ),
        pytest.param(
            {"users": [{"name": "u", "user": {"token": TOKEN, "client-key-data": "LS0t"}}]},
            {"users": [{"name": "u", "user": {"token": REDACTED, "client-key-data": REDACTED}}]},
            id="kubeconfig",
        ),
        pytest.param(
            {"password": 1234, "enabled_password": True, "token": None, "api_key": ""},
            {"password": REDACTED, "enabled_password": True, "token": None, "api_key": ""},
            id="scalars-masked-flags-kept",
        ),
        pytest.param(
            {"result": {"apiVersion": "v1", "kind": "Secret", "data": {"pw": "c2VjcmV0"}}},
            {"result": {"apiVersion": "v1", "kind": "Secret", "data": {"pw": REDACTED}}},
            id="secret-data",
        ),
        pytest.param(
            {"kind": "Secret", "stringData": {"a": "x"}, "metadata": {"name": "s"}},
            {"kind": "Secret", "stringData": {"a": REDACTED}, "metadata": {"name": "s"}},
            id="secret-string-data",
        ),
        pytest.param(
            {"resources": [{"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}}]},
            {"resources": [{"metadata": {"name": "s"}, "type": "Opaque", "data": {"k": REDACTED}}]},
            id="secret-in-a-list-without-kind",
        ),
        pytest.param(
            {
                "kind": "Secret",
                "metadata": {
                    "annotations": {
                        "kubectl.kubernetes.io/last-applied-configuration": '{"data":{"k":"x"}}',
                        "team": "a",
                    }
                },
            },
            {
                "kind": "Secret",
                "metadata": {
                    "annotations": {
                        "kubectl.kubernetes.io/last-applied-configuration": REDACTED,
                        "team": "a",
                    }
                },
            },
            id="secret-last-applied",
        ),
        pytest.param(
            {"kind": "ConfigMap", "data": {"k": "visible"}},
            {"kind": "ConfigMap", "data": {"k": "visible"}},
            id="configmap-kept",
        ),
        pytest.param(
            {"volumes": [{"name": "v", "secret": {"secretName": "db"}}]},
            {"volumes": [{"name": "v", "secret": {"secretName": "db"}}]},
            id="secret-volume-reference-kept",
        ),
        pytest.param(
            {"msg": f"request failed: Authorization: Bearer {TOKEN}"},
            {"msg": f"request failed: Authorization: Bearer {REDACTED}"},
            id="string-values-go-through-text",
        ),
    ],
)
def test_redact(value: Any, expected: Any) -> None:
    assert redact(value) == expected
    assert TOKEN not in json.dumps(redact(value))


def test_redact_does_not_modify_its_input() -> None:
    value = {"token": TOKEN, "kind": "Secret", "data": {"k": "v"}}
    redact(value)
    assert value == {"token": TOKEN, "kind": "Secret", "data": {"k": "v"}}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            f"Authorization: Bearer {TOKEN}", f"Authorization: Bearer {REDACTED}", id="header"
        ),
        pytest.param(
            f'{{"authorization": "Basic {TOKEN}"}}',
            f'{{"authorization": "Basic {REDACTED}"}}',
            id="json-header",
        ),
        pytest.param(f"got bearer {TOKEN} back", f"got bearer {REDACTED} back", id="bearer"),
        pytest.param(f'"token": "{TOKEN}"', f'"token": "{REDACTED}"', id="json-token"),
        pytest.param(f"password={TOKEN}&user=a", f"password={REDACTED}&user=a", id="query"),
        pytest.param(f"db_password: {TOKEN}", f"db_password: {REDACTED}", id="yaml"),
        pytest.param(
            f"https://admin:{TOKEN}@db.example.com/x",
            f"https://admin:{REDACTED}@db.example.com/x",
            id="url-password",
        ),
        pytest.param(
            '{"kind": "Secret", "data": {"pw": "c2VjcmV0"}, "type": "Opaque"}',
            f'{{"kind": "Secret", "data": {{"pw": "{REDACTED}"}}, "type": "Opaque"}}',
            id="secret-json",
        ),
        pytest.param(
            '"kind": "Secret",\n "data": {\n  "a": "eA==",\n  "b": "eQ=="\n }',
            f'"kind": "Secret",\n "data": {{\n  "a": "{REDACTED}",\n  "b": "{REDACTED}"\n }}',
            id="secret-json-indented",
        ),
        pytest.param(
            '{"kind": "ConfigMap", "data": {"k": "v"}}',
            '{"kind": "ConfigMap", "data": {"k": "v"}}',
            id="configmap-json-kept",
        ),
        pytest.param('"password": ""', '"password": ""', id="empty-kept"),
        pytest.param("token: true", "token: true", id="boolean-kept"),
        pytest.param(
            "task ok: create the token (k8s)", "task ok: create the token (k8s)", id="prose"
        ),
        pytest.param("", "", id="empty"),
    ],
)
def test_redact_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_redact_deep_nesting_is_bounded() -> None:
    value: dict[str, Any] = {"token": TOKEN}
    for _ in range(200):
        value = {"nested": value}
    assert TOKEN not in json.dumps(redact(value))


# Messages a log line, a condition or an Event may carry: the planted credential must go,
# every ordinary word must stay.
@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"curl -H 'Authorization: Bearer {TOKEN}' https://x", id="curl-header"),
        pytest.param(f"Proxy-Authorization: Basic {TOKEN}", id="proxy-basic"),
        pytest.param(f"Authorization={TOKEN}", id="authorization-equals"),
        pytest.param(f"request sent with Bearer {TOKEN}", id="bearer-in-prose"),
        pytest.param(f'{{"token": "{TOKEN}"}}', id="json"),
        pytest.param(f"{{'password': '{TOKEN}'}}", id="python-repr"),
        pytest.param(f'{{\\"token\\": \\"{TOKEN}\\"}}', id="json-inside-a-json-string"),
        pytest.param(f"token: {TOKEN}", id="yaml"),
        pytest.param(f"db_password={TOKEN} host=db", id="key-equals"),
        pytest.param(f"https://x/login?user=a&api_key={TOKEN}&page=2", id="query-string"),
        pytest.param(f"X-Auth-Token: {TOKEN}", id="custom-header"),
        pytest.param(f"client-key-data: {TOKEN}", id="kubeconfig-key"),
        pytest.param(f"aws_secret_access_key = {TOKEN}", id="ini-spaces"),
        pytest.param(f"postgres://app:{TOKEN}@db:5432/app", id="url-password"),
        pytest.param(f"default/test-secret: failed: password={TOKEN}", id="after-a-cr-name"),
        pytest.param(f"Set-Cookie: session={TOKEN}", id="cookie"),
        pytest.param(f'password: "{TOKEN}', id="unterminated-quote"),
    ],
)
def test_redact_text_masks(text: str) -> None:
    masked = redact_text(text)
    assert REDACTED in masked
    assert TOKEN not in masked
    assert "planted" not in masked


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("reconcile Secret default/test-secret: running Ansible", id="cr-name"),
        pytest.param("reconcile Memcached my-token: running Ansible", id="cluster-scoped-name"),
        pytest.param(
            "reconcile Secret default/test-secret: 3 tasks failed in 2.00 s", id="cr-name-number"
        ),
        pytest.param("reconcile Token ns/api-token: failed in 1.20 s: boom", id="failed"),
        pytest.param("failed to create secret: AlreadyExists", id="error-word"),
        pytest.param("token: expired, please log in again", id="word-after-token"),
        pytest.param("Authorization: denied for user bob", id="authorization-word"),
        pytest.param("Bearer authentication is required", id="bearer-word"),
        pytest.param("secretName: db-creds", id="secret-name"),
        pytest.param("secretRef=db-creds", id="secret-ref"),
        pytest.param("the token was refreshed; next in 10m", id="prose"),
        pytest.param('"password": ""', id="empty"),
        pytest.param("token: null", id="null"),
        pytest.param("tokens: NONE", id="capitals"),
        pytest.param('secrets "db" is forbidden: User cannot get', id="api-error"),
        pytest.param("see https://example.com/docs/token", id="url-without-password"),
    ],
)
def test_redact_text_keeps(text: str) -> None:
    assert redact_text(text) == text


# Inputs on which a backtracking pattern takes quadratic (or worse) time: a megabyte each.
# Linear masking does each in well under a second; the timeout leaves a wide margin for a
# loaded machine, and quadratic masking would need hours.
_FIELD_ERRORS = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "message": "admission webhook denied the request: "
        + "; ".join(f"spec.items[{i}].token.value: must be a.b.c" for i in range(20000)),
        "reason": "Invalid",
    }
)
# A webhook's error quoting a value encoded as base64url (JWTs, signed payloads): one run
# of `[A-Za-z0-9_-]` a megabyte long.
_QUOTED_PAYLOAD = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "message": 'admission webhook "check.example.com" denied the request: '
        "spec.payload: invalid signature: "
        + base64.urlsafe_b64encode(bytes(range(256)) * 2900).decode().rstrip("="),
        "reason": "Invalid",
    }
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a." * 500_000, id="dotted-words"),
        pytest.param("a-token." * 125_000, id="dotted-keywords"),
        pytest.param(_FIELD_ERRORS + " " * (1_000_000 - len(_FIELD_ERRORS)), id="field-errors"),
        pytest.param(_QUOTED_PAYLOAD, id="api-error-quoting-a-payload"),
        pytest.param("=" * 1_000_000, id="equals"),
        pytest.param(":" * 1_000_000, id="colons"),
        pytest.param('"' * 1_000_000, id="double-quotes"),
        pytest.param("'" * 1_000_000, id="single-quotes"),
        pytest.param("token=" * 170_000, id="keys-without-values"),
        pytest.param("password " * 110_000, id="keys-without-separators"),
        pytest.param('"token": "' * 100_000, id="unterminated-values"),
        pytest.param("://a:" * 200_000, id="url-prefixes"),
        pytest.param('"kind": "Secret", "data": {' * 40_000, id="secret-json-prefixes"),
        pytest.param("Bearer " * 140_000, id="bearers"),
        pytest.param("x" * 1_000_000, id="one-word"),
    ],
)
def test_redact_text_is_linear_on_a_megabyte(text: str) -> None:
    masked = redact_text(text)
    assert len(masked) > 0


def test_a_capped_message_keeps_its_end() -> None:
    text = "x" * 2_000_000 + " the task failed: no such ConfigMap"
    capped = redact_message(text, 1000)
    assert len(capped) <= 1000
    assert capped.endswith(" the task failed: no such ConfigMap")
    assert capped.startswith("[")


def test_a_cut_inside_a_credential_drops_its_remains() -> None:
    text = f"Authorization: Bearer {'A1b2' * 25} failed after that"
    capped = cap_text(text, 60)
    assert "A1b2" not in capped
    assert capped.endswith("failed after that")


def test_short_text_is_not_capped() -> None:
    assert redact_message("a short message", 1000) == "a short message"
    assert len(redact_message("y" * 40_000)) <= MESSAGE_LIMIT
