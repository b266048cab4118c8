"""What one Ansible run prints, per `--ansible-log-events` and `ANSIBLE_DEBUG_LOGS`.

Both backends log a run's job events the same way, as the Go operator did: a line per
task result (`tasks`), every event as JSON (`everything`) or nothing, and with
`ANSIBLE_DEBUG_LOGS` Ansible's own output. Everything taken from events goes through
`runner.util.redact` first: task results hold what modules saw (headers, Secrets, kubeconfig
tokens, module passwords).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Literal

from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import RunResult, strip_ansi
from runner.util.redact import LOG_LIMIT, redact, redact_message, redact_text

__all__ = ["LogEvents", "RunLog"]

LogEvents = Literal["tasks", "everything", "nothing"]
"""`--ansible-log-events`: task results, every event, or nothing."""

_RESULT_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
}


class RunLog:
    """The log lines of one run (see the module docstring)."""

    def __init__(
        self,
        logger: logging.Logger,
        request: RunRequest,
        *,
        log_events: LogEvents,
        debug: bool,
    ) -> None:
        self._logger = logger
        self._log_events = log_events
        self._debug = debug
        cr = f"{request.namespace}/{request.name}" if request.namespace else request.name
        self._prefix = f"[{request.gvk.kind} {cr} job={request.ident}]"
        self._extra = {
            "job": request.ident,
            "gvk": str(request.gvk),
            "cr_namespace": request.namespace,
            "cr_name": request.name,
        }

    def event(self, event: Mapping[str, Any]) -> None:
        if self._log_events == "everything":
            self._everything(event)
        elif self._log_events == "tasks":
            self._task(event)
        if self._debug:
            stdout = event.get("stdout")
            if isinstance(stdout, str) and stdout:
                text = redact_message(strip_ansi(stdout), LOG_LIMIT)
                self._logger.info("%s %s", self._prefix, text, extra=self._extra)

    def finished(self, *, status: str, rc: int | None, result: RunResult, seconds: float) -> None:
        self._logger.debug(
            "%s ansible-runner %s (rc %s) in %.2fs: ok=%d changed=%d failures=%d",
            self._prefix,
            status,
            rc,
            seconds,
            result.ok,
            result.changed,
            result.failures,
            extra=self._extra,
        )

    def _everything(self, event: Mapping[str, Any]) -> None:
        data = event.get("event_data")
        self._logger.info(
            "%s event %s %s",
            self._prefix,
            event.get("event"),
            json.dumps(
                redact(data) if isinstance(data, Mapping) else {}, default=str, sort_keys=True
            ),
            extra=self._extra,
        )

    def _task(self, event: Mapping[str, Any]) -> None:
        outcome = _RESULT_EVENTS.get(str(event.get("event")))
        data = event.get("event_data")
        if outcome is None or not isinstance(data, Mapping):
            return
        res = data.get("res")
        res = res if isinstance(res, Mapping) else {}
        level = logging.INFO
        if outcome == "ok" and res.get("changed") is True:
            outcome = "changed"
        elif outcome == "failed":
            ignored = data.get("ignore_errors") is True
            outcome = "failed (ignored)" if ignored else "failed"
            level = logging.WARNING if ignored else logging.ERROR
        elif outcome == "unreachable":
            level = logging.ERROR
        msg = res.get("msg")
        shows_msg = outcome not in ("ok", "changed", "skipped") or _is_debug(
            data.get("task_action")
        )
        detail = f": {msg}" if shows_msg and isinstance(msg, str) and msg else ""
        task = str(data.get("task", ""))
        action = data.get("task_action", "")
        line = f"{self._prefix} task {outcome}: {task} ({action}){detail}"
        self._logger.log(
            level,
            "%s",
            redact_message(line, LOG_LIMIT),
            extra={**self._extra, "task": redact_text(task), "outcome": outcome},
        )


def _is_debug(action: Any) -> bool:
    return action in ("debug", "ansible.builtin.debug", "ansible.legacy.debug")
