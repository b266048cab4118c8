"""The operator's log output: JSON lines, and no planted credential ever printed."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.inputs import RunRequest
from runner.ansible.runlog import RunLog
from runner.observability.logging import ConsoleFormatter, JSONFormatter, configure
from runner.structs.gvk import GVK

TOKEN = "sha256~PLANTED-7c0ffee-token"
SECRET_VALUE = "c3VwZXItc2VjcmV0LXBhc3N3b3Jk"
REQUEST = RunRequest(
    gvk=GVK("cache.example.com", "v1alpha1", "Memcached"),
    namespace="ns",
    name="web",
    playbook=Path("/p.yml"),
    ident="42",
)


def uri_result(kind: str = "runner_on_ok") -> dict[str, Any]:
    """A `uri` task that called an API with a bearer token, as ansible-runner sends it."""
    return {
        "event": kind,
        "stdout": f'ok: [localhost] => {{"headers": {{"Authorization": "Bearer {TOKEN}"}}}}',
        "event_data": {
            "task": "call the API",
            "task_action": "ansible.builtin.uri",
            "res": {
                "changed": False,
                "msg": f"Status code was 401: Authorization: Bearer {TOKEN}",
                "invocation": {
                    "module_args": {
                        "url": "https://api.example.com",
                        "headers": {"Authorization": f"Bearer {TOKEN}"},
                        "url_password": TOKEN,
                    }
                },
            },
        },
    }


def secret_result() -> dict[str, Any]:
    """A `k8s` task that created a Secret; the result repeats the object."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": "ns"},
        "type": "Opaque",
        "data": {"password": SECRET_VALUE},
    }
    return {
        "event": "runner_on_ok",
        "stdout": "changed: [localhost] => "
        + f'{{"kind": "Secret", "data": {{"p": "{SECRET_VALUE}"}}}}',
        "event_data": {
            "task": "create the db Secret",
            "task_action": "kubernetes.core.k8s",
            "res": {
                "changed": True,
                "result": secret,
                "invocation": {"module_args": {"definition": secret, "api_key": TOKEN}},
            },
        },
    }


def debug_result() -> dict[str, Any]:
    return {
        "event": "runner_on_ok",
        "event_data": {
            "task": "show the config",
            "task_action": "ansible.builtin.debug",
            "res": {"changed": False, "msg": f"token: {TOKEN}"},
        },
    }


@pytest.fixture
def stream() -> Iterator[tuple[logging.Logger, io.StringIO, io.StringIO]]:
    """A logger writing JSON lines to one buffer and console lines to another."""
    logger = logging.getLogger("test.redaction")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    as_json, as_text = io.StringIO(), io.StringIO()
    for buffer, formatter in ((as_json, JSONFormatter()), (as_text, ConsoleFormatter())):
        handler = logging.StreamHandler(buffer)
        handler.setFormatter(formatter)
        logger.addHandler(handler)
    yield logger, as_json, as_text
    logger.handlers.clear()


@pytest.mark.parametrize(
    ("log_events", "debug"),
    [
        pytest.param("everything", False, id="everything"),
        pytest.param("tasks", False, id="tasks"),
        pytest.param("nothing", True, id="debug-logs"),
        pytest.param("everything", True, id="everything-and-debug-logs"),
    ],
)
def test_planted_credentials_never_logged(
    stream: tuple[logging.Logger, io.StringIO, io.StringIO], log_events: Any, debug: bool
) -> None:
    logger, as_json, as_text = stream
    log = RunLog(logger, REQUEST, log_events=log_events, debug=debug)
    for event in (uri_result(), uri_result("runner_on_failed"), secret_result(), debug_result()):
        log.event(event)

    for output in (as_json.getvalue(), as_text.getvalue()):
        assert output, "nothing was logged"
        assert TOKEN not in output
        assert SECRET_VALUE not in output
        assert "<redacted>" in output


def test_everything_keeps_what_is_not_secret(
    stream: tuple[logging.Logger, io.StringIO, io.StringIO],
) -> None:
    logger, as_json, _ = stream
    RunLog(logger, REQUEST, log_events="everything", debug=False).event(secret_result())
    (line,) = as_json.getvalue().splitlines()
    entry = json.loads(line)
    data = json.loads(entry["msg"].split(" event runner_on_ok ", 1)[1])
    assert data["res"]["result"]["metadata"] == {"name": "db", "namespace": "ns"}
    assert data["res"]["result"]["data"] == {"password": "<redacted>"}
    assert data["res"]["invocation"]["module_args"]["api_key"] == "<redacted>"


def test_failed_task_message_is_masked_but_readable(
    stream: tuple[logging.Logger, io.StringIO, io.StringIO],
) -> None:
    logger, as_json, _ = stream
    RunLog(logger, REQUEST, log_events="tasks", debug=False).event(uri_result("runner_on_failed"))
    entry = json.loads(as_json.getvalue())
    assert entry["level"] == "error"
    assert entry["msg"] == (
        "[Memcached ns/web job=42] task failed: call the API (ansible.builtin.uri): "
        "Status code was 401: Authorization: Bearer <redacted>"
    )
    assert entry["task"] == "call the API"
    assert entry["outcome"] == "failed"


# -- the JSON encoder -----------------------------------------------------------------


def record(msg: str, *args: Any, **extra: Any) -> logging.LogRecord:
    rec = logging.LogRecord(
        "ansible-operator.reconciler", logging.INFO, __file__, 1, msg, args, None
    )
    rec.__dict__.update(extra)
    return rec


def test_json_encoder_one_object_per_line_with_fields() -> None:
    rec = record("reconcile %s %s: succeeded", "Memcached", "ns/web", job="42", gvk="g/v1, Kind=K")
    rec.created = 1_800_000_000.5
    line = JSONFormatter().format(rec)
    assert "\n" not in line
    assert json.loads(line) == {
        "ts": "2027-01-15T08:00:00.500000+00:00",
        "level": "info",
        "logger": "ansible-operator.reconciler",
        "msg": "reconcile Memcached ns/web: succeeded",
        "job": "42",
        "gvk": "g/v1, Kind=K",
    }


def test_json_encoder_masks_fields_and_messages_and_keeps_odd_values() -> None:
    rec = record(
        "request had Authorization: Bearer %s",
        TOKEN,
        headers={"Authorization": TOKEN},
        path=Path("/tmp/x"),
    )
    entry = json.loads(JSONFormatter().format(rec))
    assert TOKEN not in json.dumps(entry)
    assert entry["headers"] == {"Authorization": "<redacted>"}
    assert entry["path"] == "/tmp/x"


def test_json_encoder_error_field_with_traceback() -> None:
    try:
        raise RuntimeError(f"password={TOKEN}")
    except RuntimeError:
        rec = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", None, sys.exc_info())
    entry = json.loads(JSONFormatter().format(rec))
    assert entry["level"] == "error"
    assert "RuntimeError: password=<redacted>" in entry["error"]
    assert TOKEN not in entry["error"]


def test_configure_json_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    buffer = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buffer)
    try:
        configure(level="info", encoder="json", devel=False)
        logging.getLogger("ansible-operator").info("hello %s", f"token={TOKEN}")
        logging.getLogger("ansible-operator").debug("not at info level")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    (line,) = buffer.getvalue().splitlines()
    entry = json.loads(line)
    assert entry["msg"] == "hello token=<redacted>"
    assert entry["level"] == "info"


def test_configure_console_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    buffer = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buffer)
    try:
        configure(level="debug", encoder="console", devel=False)
        logging.getLogger("ansible-operator").debug("Authorization: Bearer %s", TOKEN)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    text = buffer.getvalue()
    assert "DEBUG" in text and "ansible-operator" in text
    assert "Authorization: Bearer <redacted>" in text
    assert TOKEN not in text
