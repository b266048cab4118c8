"""runner.redact: credentials and Secret data never reach a log line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.redact import REDACTED, is_sensitive_key, redact, redact_text

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
