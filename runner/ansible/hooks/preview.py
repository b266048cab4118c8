"""The `preview` hook: a planned run skips the tasks a plan cannot preview.

`ansible-operator plan` runs a reconcile whose API writes are dry runs; a task acting
outside the API would act for real (`previewactions.py` says which). Ansible's own ways to
leave tasks out do not fit: `--skip-tags` needs the role to tag them, and check mode
changes what every module does. So this hook, loaded into the planned run by the callback
plugin `ansible_operator_plan` (`preview_callback/`), wraps two steps of ansible-core's
`TaskExecutor`:

- `_get_action_handler_with_module_context`, called once the task's `when` held and its
  arguments are templated, right before the action runs: a task that cannot be previewed
  stops there (`_NotRun`), unless side effects are allowed; a Kubernetes module's
  `wait` is turned off. Stopping there, after the `when` and per loop item, means only
  tasks that would really have run are reported, and a skipped task's
  `changed_when`/`failed_when`/`until` are never evaluated on a result it did not have;
- `_execute_internal` (2.19) or `_execute` (2.18), which call it: a stopped task's
  result is a skip, with `skip_reason` saying why and the `ansible_operator_plan` key
  (`previewactions.MARK`) carrying the reason and whether the task ran.

Each task stopped, run anyway or run without its wait is also written down in the plan's
record file (`PlanMode.record`), which the plan reads after the run: the job event of a
skipped task does not carry its result.

A task skipped this way registers a skipped result: later tasks that read what it would
have returned may fail in the plan (the plan lists both).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from runner.ansible.hooks.previewactions import (
    MARK,
    WAIT_REASON,
    WAITING,
    PlanMode,
    canonical,
    not_previewable,
)

__all__ = ["install"]

_TRUE = frozenset({"1", "true", "yes", "on", "y", "t"})


class _NotRun(Exception):
    """Raised where the action would start; the task's result becomes a skip."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def install(mode: PlanMode) -> None:
    """Install the hook into this ansible-playbook process (once)."""
    from ansible.executor.task_executor import TaskExecutor

    if getattr(TaskExecutor, "_runner_preview", False):
        return
    # 2.19 split the body of `_execute` into `_execute_internal` (and wraps its errors).
    step = "_execute_internal" if hasattr(TaskExecutor, "_execute_internal") else "_execute"
    real_handler = TaskExecutor._get_action_handler_with_module_context
    real_step = getattr(TaskExecutor, step)

    def handler(self: Any, templar: Any) -> Any:
        task = self._task
        action = canonical(str(getattr(task, "resolved_action", None) or task.action))
        reason = not_previewable(action)
        if reason is not None and not mode.allow_side_effects:
            _record(mode, task, action, reason, ran=False)
            raise _NotRun(reason)
        notes = []
        if reason is not None:
            notes.append(reason)
        if action in WAITING and _truthy(task.args.get("wait")):
            task.args = {**task.args, "wait": False}
            notes.append(WAIT_REASON)
        found = real_handler(self, templar)
        if notes:
            _record(mode, task, action, "; ".join(notes), ran=True)
            action_handler = found[0]
            action_handler.run = _marking(action_handler.run, "; ".join(notes))
        return found

    @functools.wraps(real_step)
    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return real_step(self, *args, **kwargs)
        except _NotRun as stopped:
            return {
                "changed": False,
                "skipped": True,
                "skip_reason": f"not previewable in a plan: {stopped.reason}",
                MARK: {"reason": stopped.reason, "ran": False},
            }

    TaskExecutor._get_action_handler_with_module_context = handler
    setattr(TaskExecutor, step, execute)
    TaskExecutor._runner_preview = True


def _record(mode: PlanMode, task: Any, action: str, reason: str, *, ran: bool) -> None:
    if not mode.record:
        return
    line = {
        "task": str(task.name or action),
        "action": action,
        "reason": reason,
        "ran": ran,
        "uuid": str(getattr(task, "_uuid", "")),
    }
    with open(mode.record, "a", encoding="utf-8") as record:
        record.write(json.dumps(line) + "\n")


def _marking(run: Callable[..., Any], reason: str) -> Callable[..., Any]:
    @functools.wraps(run)
    def marked(*args: Any, **kwargs: Any) -> Any:
        result = run(*args, **kwargs)
        if isinstance(result, dict):
            result[MARK] = {"reason": reason, "ran": True}
        return result

    return marked


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in _TRUE
