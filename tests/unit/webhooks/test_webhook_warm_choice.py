"""When webhooks get no warm runner at all, and that the operator says so once: every
request is then a full run (tests/integration/test_webhook_warm_runner.py runs both)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from runner.ansible import hooks
from runner.ansible.fastbackend import FastBackend
from runner.ansible.runnerbackend import RunnerBackend
from runner.structs import GVK
from runner.webhooks.declarations import Webhook
from runner.webhooks.server import runtime
from runner.webhooks.server.roles import RunOptions

WEBHOOK = Webhook(
    type="validating", gvk=GVK("cache.example.com", "v1alpha1", "Memcached"), role=Path("/r/v")
)


def _settings(runner: str = "warm") -> runtime.WebhookSettings:
    return runtime.WebhookSettings(
        webhooks_file=Path("webhooks.yaml"),
        host="",
        port=9443,
        cert_dir=Path("/certs"),
        workers=4,
        register="false",
        runner=runner,
    )


@pytest.mark.parametrize(
    ("runner", "backend", "core", "args", "why"),
    [
        pytest.param("full", "fast", "2.19.14", "", "--webhook-runner full", id="flag"),
        pytest.param(
            "warm",
            "runner",
            "2.19.14",
            "",
            "the warm runner comes with the fast backend",
            id="runner-backend",
        ),
        pytest.param(
            "warm",
            "fast",
            "2.18.19",
            "",
            "the warm runner was not tested with ansible-core 2.18.19",
            id="untested-line",
        ),
        pytest.param(
            "warm",
            "fast",
            "2.19.14",
            "'-e x=1'",
            "--ansible-args is set (its options apply to full runs)",
            id="ansible-args",
        ),
    ],
)
def test_no_warm_runner_and_one_line_saying_why(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    runner: str,
    backend: str,
    core: str,
    args: str,
    why: str,
) -> None:
    monkeypatch.setattr(hooks, "installed_core_version", lambda: core)
    caplog.set_level(logging.INFO, logger="ansible-operator.webhooks")
    made = (FastBackend if backend == "fast" else RunnerBackend)(tmp_path / "runs")
    warm = runtime._warm_runners(
        [WEBHOOK],
        _settings(runner),
        made,
        run_dir=tmp_path,
        options=RunOptions(envvars={}, ansible_args=args),
    )
    assert warm is None
    assert [r.getMessage() for r in caplog.records] == [
        f"webhooks run each request as a full run: {why}"
    ]
