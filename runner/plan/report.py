"""What a plan found, as one value: `PlanReport`, and how its parts are read from a run.

`session.py` fills it from the overlay (`diff.change_of` per object), the reconcile's
outcome, the run's artifacts (`runner.ansible.history.summarize_run`: the task counts,
changed and failed tasks, as `history` shows them) and the preview hook's record of the
tasks it skipped or let run (`skipped_tasks`). `render.py` prints it. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.ansible.history import RunSummary
from runner.plan.diff import Action, Change

__all__ = [
    "EXIT_CHANGES",
    "EXIT_FAILED",
    "EXIT_NO_CHANGES",
    "PlanReport",
    "Skipped",
    "skipped_tasks",
]

EXIT_NO_CHANGES = 0
EXIT_FAILED = 1
EXIT_CHANGES = 2


@dataclass(frozen=True)
class Skipped:
    """A task the plan could not preview: skipped (`ran` False) or run anyway
    (`--allow-side-effects`, or a Kubernetes module run without its `wait`)."""

    task: str
    action: str
    reason: str
    ran: bool


@dataclass(frozen=True, kw_only=True)
class PlanReport:
    """Everything `ansible-operator plan` prints."""

    cr: Change
    """The custom resource: as the cluster has it against the plan's end (its own input
    change from the file, `--set` or `--patch`, the finalizer, the status)."""
    cr_status: Mapping[str, Any] | None
    """Its status as the reconcile would leave it (None: none, or the CR is gone)."""
    changes: tuple[Change, ...]
    """Every other object the reconcile would create, change or delete."""
    target: str
    """The role or playbook that ran."""
    backend: str
    namespace: str
    deleting: bool
    ran: bool = True
    """False when nothing was run (a deletion of a CR without a finalizer)."""
    outcome: str = ""
    """What the operator would do next: `done`, `requeue after 10h`, `retried: <why>`."""
    failed: bool = False
    failure: str = ""
    run: RunSummary | None = None
    skipped: tuple[Skipped, ...] = ()
    refused: tuple[str, ...] = ()
    unvalidated: tuple[str, ...] = ()
    dry_runs: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def changed(self) -> bool:
        return any(change.action is not Action.NONE for change in self.changes)

    @property
    def exit_code(self) -> int:
        """0 no changes, 2 changes, 1 the run failed (`terraform plan -detailed-exitcode`)."""
        if self.failed:
            return EXIT_FAILED
        return EXIT_CHANGES if self.changed else EXIT_NO_CHANGES


def skipped_tasks(records: Iterable[Mapping[str, Any]]) -> tuple[Skipped, ...]:
    """The tasks the preview hook wrote down (`PlanMode.record`'s lines), each task and
    reason once (a loop writes one line per item)."""
    found: dict[tuple[str, str], Skipped] = {}
    for record in records:
        task = str(record.get("task") or record.get("action") or "?")
        reason = str(record.get("reason") or "")
        key = (str(record.get("uuid") or task), reason)
        if key not in found:
            found[key] = Skipped(
                task=task,
                action=str(record.get("action") or ""),
                reason=reason,
                ran=bool(record.get("ran")),
            )
    return tuple(found.values())
