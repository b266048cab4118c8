"""A `PlanReport` as text for people (`-o text`) or as data (`-o yaml`, `-o json`).

The text says first that nothing in the cluster changed, then each object the reconcile
would create, change or delete with its diff, the custom resource (its own change and
the status it would end with), the tasks that could not be previewed and why, the task
counts with the changed and failed tasks as `history` prints them, and one summary line.
Masking of credentials was done when the diffs were made (`diff.py`); free text (task
messages, the failure) is masked here unless the report says not to. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import yaml

from runner.ansible.history import task_lines
from runner.plan.diff import Action, Change
from runner.plan.report import PlanReport
from runner.util.redact import redact, redact_text

__all__ = ["HEADER", "OUTPUTS", "as_data", "render"]

OUTPUTS: Final = ("text", "yaml", "json")
HEADER: Final = (
    "Nothing in the cluster was changed: every write was sent to the API server as a "
    "dry run (dryRun=All)."
)
_VERBS: Final = {
    Action.CREATE: "would be created",
    Action.UPDATE: "would change",
    Action.DELETE: "would be deleted",
    Action.NONE: "unchanged",
}


def render(report: PlanReport, output: str, *, masked: bool = True) -> str:
    """The report in `output` format (one of `OUTPUTS`)."""
    if output == "json":
        return json.dumps(as_data(report, masked=masked), indent=2) + "\n"
    if output == "yaml":
        text: str = yaml.safe_dump(
            as_data(report, masked=masked), sort_keys=False, default_flow_style=False
        )
        return text
    return _text(report, masked=masked)


def as_data(report: PlanReport, *, masked: bool = True) -> dict[str, Any]:
    """The report as plain data (the YAML and JSON outputs)."""
    clean = _masker(masked)
    run = report.run
    return {
        "clusterChanged": False,
        "note": HEADER,
        "customResource": {
            **_change(report.cr),
            "deleting": report.deleting,
            "status": redact(dict(report.cr_status))
            if masked and report.cr_status is not None
            else report.cr_status,
        },
        "target": report.target,
        "backend": report.backend,
        "changes": [
            _change(change) for change in report.changes if change.action is not Action.NONE
        ],
        "tasks": None
        if run is None
        else {
            "result": run.outcome,
            "ok": run.ok,
            "changed": run.changed,
            "skipped": run.skipped,
            "failed": run.failures,
            "changedTasks": list(run.changed_tasks),
            "failedTasks": [
                {"task": task.task, "message": clean(task.msg)} for task in run.failed_tasks
            ],
            "error": clean(run.error) if run.error else None,
        },
        "notPreviewable": [
            {"task": s.task, "action": s.action, "reason": s.reason, "ran": s.ran}
            for s in report.skipped
        ],
        "refused": list(report.refused),
        "unvalidated": list(report.unvalidated),
        "failed": report.failed,
        "failure": clean(report.failure),
        "next": report.outcome,
        "notes": list(report.notes),
        "dryRunWrites": report.dry_runs,
        "seconds": round(report.seconds, 2),
        "exitCode": report.exit_code,
    }


# -- text -------------------------------------------------------------------------------


def _text(report: PlanReport, *, masked: bool) -> str:
    clean = _masker(masked)
    cr = report.cr
    what = "the finalizer's run of" if report.deleting else "a reconcile of"
    lines = [
        f"Plan: {what} {cr.label} ({report.target}, {report.backend} backend)",
        HEADER,
        "",
    ]
    shown = [change for change in report.changes if change.action is not Action.NONE]
    for change in shown:
        lines += _object(change)
    if not shown:
        lines += ["No object would be created, changed or deleted.", ""]
    lines.append(f"{cr.label} (the custom resource): {_VERBS[cr.action]}")
    lines += _indented(cr.diff)
    if report.cr_status is not None:
        status = redact(dict(report.cr_status)) if masked else dict(report.cr_status)
        lines.append("  status as the reconcile leaves it:")
        lines += _indented(_yaml(status), prefix="    ")
    lines.append("")
    for note in report.notes:
        lines.append(f"Note: {note}")
    if report.skipped:
        lines.append("Not previewable:")
        for skipped in report.skipped:
            done = "ran     " if skipped.ran else "skipped "
            lines.append(f"  {done} {skipped.task} ({skipped.action}): {skipped.reason}")
    if report.refused:
        lines.append("Refused as not previewable:")
        lines += [f"  {refused}" for refused in report.refused]
    if report.unvalidated:
        lines.append(
            "Kept as sent, not validated by the API server (their namespace exists only "
            "in the plan):"
        )
        lines += [f"  {label}" for label in report.unvalidated]
    if report.skipped or report.refused or report.unvalidated:
        lines.append("")
    run = report.run
    if run is not None:
        lines.append(
            f"Tasks: ok={run.ok} changed={run.changed} skipped={run.skipped} "
            f"failed={run.failures} ({run.outcome})"
        )
        lines += [f"    {clean(line)}" for line in task_lines(run)]
    elif report.ran:
        lines.append("Tasks: the run left no record")
    if report.failed:
        lines.append(f"The run failed: {clean(report.failure)}")
    counts = {action: 0 for action in Action}
    for change in shown:
        counts[change.action] += 1
    lines.append(
        f"Plan: {counts[Action.CREATE]} to create, {counts[Action.UPDATE]} to change, "
        f"{counts[Action.DELETE]} to delete; then the operator: {report.outcome} "
        f"({report.seconds:.1f} s, {report.dry_runs} dry-run writes)"
    )
    return "\n".join(lines) + "\n"


def _object(change: Change) -> list[str]:
    return [f"{change.label}: {_VERBS[change.action]}", *_indented(change.diff), ""]


def _indented(text: str, *, prefix: str = "  ") -> list[str]:
    return [f"{prefix}{line}" for line in text.splitlines()]


def _change(change: Change) -> dict[str, Any]:
    return {
        "action": change.action.value,
        "apiVersion": change.api_version,
        "kind": change.kind,
        "namespace": change.namespace,
        "name": change.name,
        "diff": change.diff,
        "before": change.before,
        "after": change.after,
    }


def _masker(masked: bool) -> Any:
    def clean(text: str) -> str:
        return redact_text(text) if masked else text

    return clean


def _yaml(obj: Mapping[str, Any]) -> str:
    text: str = yaml.safe_dump(dict(obj), sort_keys=False, default_flow_style=False)
    return text
