"""runner.plan.report and runner.plan.render: exit codes and what a plan prints."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from runner.ansible.history import RunSummary
from runner.ansible.jobevents import FailedTask
from runner.plan.diff import change_of
from runner.plan.overlay import Entry, ObjectKey
from runner.plan.render import HEADER, render
from runner.plan.report import EXIT_CHANGES, EXIT_FAILED, EXIT_NO_CHANGES, PlanReport, skipped_tasks


def entry(name: str, live: Any, current: Any) -> Entry:
    return Entry(key=ObjectKey("", "configmaps", "ns", name), live=live, current=current, order=0)


def cm(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": data,
    }


CR = {
    "apiVersion": "x.example.com/v1",
    "kind": "App",
    "metadata": {"name": "app", "namespace": "ns"},
}


def report(*changes: Any, failed: bool = False, **extra: Any) -> PlanReport:
    run = RunSummary(
        ident="1",
        started=datetime(2024, 1, 1, tzinfo=UTC),
        ended=None,
        outcome="failed" if failed else "successful",
        ok=3,
        changed=1,
        failures=1 if failed else 0,
        changed_tasks=("Make it",),
        failed_tasks=(FailedTask("Check it", "token=abc123 is wrong"),) if failed else (),
    )
    return PlanReport(
        cr=change_of(entry("app", CR, CR)),
        cr_status={"conditions": [{"type": "Successful", "status": "True"}]},
        changes=tuple(changes),
        target="/roles/app",
        backend="fast",
        namespace="ns",
        deleting=False,
        outcome="done",
        failed=failed,
        failure="token=abc123 is wrong" if failed else "",
        run=run,
        **extra,
    )


@pytest.mark.parametrize(
    ("plan", "code"),
    [
        pytest.param(report(), EXIT_NO_CHANGES, id="nothing"),
        pytest.param(
            report(change_of(entry("a", cm("a", x="1"), cm("a", x="1")))),
            EXIT_NO_CHANGES,
            id="unchanged",
        ),
        pytest.param(report(change_of(entry("a", None, cm("a")))), EXIT_CHANGES, id="created"),
        pytest.param(
            report(change_of(entry("a", None, cm("a"))), failed=True), EXIT_FAILED, id="failed"
        ),
    ],
)
def test_exit_codes(plan: PlanReport, code: int) -> None:
    assert plan.exit_code == code


def test_text_says_nothing_changed_and_lists_everything() -> None:
    plan = report(
        change_of(entry("new", None, cm("new", a="1"))),
        change_of(entry("old", cm("old"), None)),
        change_of(entry("same", cm("same"), cm("same"))),
        failed=True,
        skipped=skipped_tasks(
            [
                {
                    "task": "Run it",
                    "action": "ansible.builtin.command",
                    "reason": "runs",
                    "ran": False,
                    "uuid": "1",
                },
                {
                    "task": "Run it",
                    "action": "ansible.builtin.command",
                    "reason": "runs",
                    "ran": False,
                    "uuid": "1",
                },
            ]
        ),
        refused=("POST /api/v1/namespaces/ns/pods/p/exec",),
    )
    text = render(plan, "text")
    assert HEADER in text
    assert "ConfigMap ns/new: would be created" in text
    assert "ConfigMap ns/old: would be deleted" in text
    assert "ns/same" not in text
    assert text.count("skipped  Run it (ansible.builtin.command): runs") == 1
    assert "POST /api/v1/namespaces/ns/pods/p/exec" in text
    assert "failed: Check it: token=<redacted> is wrong" in text
    assert "abc123" not in text
    assert "Plan: 1 to create, 0 to change, 1 to delete" in text
    assert "abc123" in render(plan, "text", masked=False)


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_data_outputs(output: str) -> None:
    plan = report(change_of(entry("new", None, cm("new", a="1"))), failed=True)
    text = render(plan, output)
    data = json.loads(text) if output == "json" else yaml.safe_load(text)
    assert data["clusterChanged"] is False
    assert data["exitCode"] == EXIT_FAILED
    assert [c["action"] for c in data["changes"]] == ["create"]
    assert data["tasks"]["failedTasks"] == [
        {"task": "Check it", "message": "token=<redacted> is wrong"}
    ]
    assert data["customResource"]["action"] == "none"
    assert data["customResource"]["status"]["conditions"][0]["type"] == "Successful"
