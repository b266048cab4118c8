"""The `status.conditions` the runtime writes around each Ansible run (manageStatus).

Users and tools (`kubectl wait`, dashboards, OLM) read the conditions the Go
ansible-operator writes: `Running`, `Successful` and `Failure`, with the playbook stats as
`ansibleResult` on the condition that reports the outcome. These functions compute the
new `status` from the current one; writing it is `runner.status.writer`'s job.

Rules kept from the original (`internal/ansible/controller/status` and the reconciler's
markRunning / markDone / markError):
- setting a condition whose status and reason are unchanged does nothing, except for
  `Failure`, which is always rewritten (its message and ansibleResult are news);
- a condition keeps its `lastTransitionTime` while its status stays the same;
- a condition that is set moves to the end of the list;
- every other key of `status` (those a role sets with `operator_sdk.util.k8s_status`) and
  every condition of another type are kept as they are.

One deliberate difference: when the original flips an existing condition to `False` by
copying it (Successful at the start of a run, Running after a failure), the copy keeps
the old `lastTransitionTime`; here a status change always stamps `now`.

A message goes through `runner.util.redact.redact_message`: a failed task's message may quote
a token, and may be megabytes long (a status write that large fails, leaving the CR
`Running`); it is masked and capped to `runner.util.redact.MESSAGE_LIMIT` characters, keeping
its end, where the error is.

Nothing here mutates its inputs; every result is a fresh structure.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from runner.structs.bodies import Condition
from runner.util.redact import redact_message

__all__ = [
    "FAILURE",
    "RUNNING",
    "SUCCESSFUL",
    "AnsibleResult",
    "failed",
    "format_completion",
    "format_time",
    "get_condition",
    "running",
    "succeeded",
]

# Condition types.
RUNNING = "Running"
SUCCESSFUL = "Successful"
FAILURE = "Failure"

# Reasons and messages, as the original spells them.
REASON_RUNNING = "Running"
REASON_SUCCESSFUL = "Successful"
REASON_FAILED = "Failed"
MESSAGE_RUNNING = "Running reconciliation"
MESSAGE_AWAITING = "Awaiting next reconciliation"
MESSAGE_SUCCEEDED = "Last reconciliation succeeded"

TRUE = "True"
FALSE = "False"


def _utc(when: datetime) -> datetime:
    """`when` in UTC; a naive datetime is taken to be UTC already."""
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when.astimezone(UTC)


def format_time(when: datetime) -> str:
    """A Kubernetes `metav1.Time`: RFC 3339 in UTC, whole seconds (`...T15:04:05Z`)."""
    return _utc(when).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_completion(when: datetime) -> str:
    """`ansibleResult.completion` as the original writes it.

    Go layout `2006-01-02T15:04:05.99999999+00:00`: UTC wall time, the fraction without
    trailing zeros (no dot when it is zero), then a literal `+00:00`.
    """
    utc = _utc(when)
    fraction = f"{utc.microsecond:06d}".rstrip("0")
    dot_fraction = f".{fraction}" if fraction else ""
    return f"{utc.strftime('%Y-%m-%dT%H:%M:%S')}{dot_fraction}+00:00"


@dataclass(frozen=True, kw_only=True)
class AnsibleResult:
    """The playbook stats for host `localhost`, shown as a condition's `ansibleResult`."""

    ok: int = 0
    changed: int = 0
    skipped: int = 0
    failures: int = 0
    completion: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "changed": self.changed,
            "skipped": self.skipped,
            "failures": self.failures,
            "completion": format_completion(self.completion),
        }


def get_condition(status: Mapping[str, Any] | None, cond_type: str) -> Condition | None:
    """A copy of the first condition of `cond_type` in `status`, or None."""
    for cond in _conditions(status):
        if cond.get("type") == cond_type:
            return copy.deepcopy(cond)
    return None


def running(status: Mapping[str, Any] | None, *, now: datetime) -> dict[str, Any]:
    """The status at the start of a run.

    An existing Successful condition turns `False` (keeping its reason and message);
    Running becomes `True` with reason `Running`, "Running reconciliation".
    """
    conds = _conditions(status)
    conds = _flip_false(conds, SUCCESSFUL, now=now)
    conds = _set(conds, _new(RUNNING, TRUE, REASON_RUNNING, MESSAGE_RUNNING, now=now))
    return _with_conditions(status, conds)


def succeeded(
    status: Mapping[str, Any] | None, *, result: AnsibleResult, now: datetime
) -> dict[str, Any]:
    """The status after a run without failed tasks.

    Running `True` (reason `Successful`, "Awaiting next reconciliation", with
    `ansibleResult`), Successful `True` ("Last reconciliation succeeded"), then Failure
    `False` with empty reason and message. Like the original, Failure is added even when
    the CR never had one, so that it is present after the first success.
    """
    conds = _conditions(status)
    conds = _set(
        conds,
        _new(RUNNING, TRUE, REASON_SUCCESSFUL, MESSAGE_AWAITING, now=now, result=result),
    )
    conds = _set(conds, _new(SUCCESSFUL, TRUE, REASON_SUCCESSFUL, MESSAGE_SUCCEEDED, now=now))
    conds = _set(conds, _new(FAILURE, FALSE, "", "", now=now))
    return _with_conditions(status, conds)


def restored(status: Mapping[str, Any] | None, before: Mapping[str, Any] | None) -> dict[str, Any]:
    """`status` with the conditions it had in `before`: a run that never really started
    (its role was being edited) leaves no trace, while what the role wrote stays."""
    return _with_conditions(status, _conditions(before))


def failed(
    status: Mapping[str, Any] | None,
    *,
    message: str,
    result: AnsibleResult | None,
    now: datetime,
) -> dict[str, Any]:
    """The status after a failed run (`result` given) or a run that could not happen.

    With a `result` (failed tasks; the original's markDone): an existing Running turns
    `False` keeping reason and message; Failure `True`, reason `Failed`, `message`, with
    `ansibleResult`; then Successful `False` with empty reason and message.

    Without one (e.g. "Unable to run reconciliation"; the original's markError): existing
    Running and Successful conditions turn `False` keeping reason and message, then
    Failure `True`, reason `Failed`, `message`, no `ansibleResult`.
    """
    conds = _conditions(status)
    conds = _flip_false(conds, RUNNING, now=now)
    if result is None:
        conds = _flip_false(conds, SUCCESSFUL, now=now)
        conds = _set(conds, _new(FAILURE, TRUE, REASON_FAILED, message, now=now))
    else:
        conds = _set(conds, _new(FAILURE, TRUE, REASON_FAILED, message, now=now, result=result))
        conds = _set(conds, _new(SUCCESSFUL, FALSE, "", "", now=now))
    return _with_conditions(status, conds)


# -- internals ------------------------------------------------------------------------


def _conditions(status: Mapping[str, Any] | None) -> list[Condition]:
    """Deep copies of the condition maps in `status` (entries that are not maps dropped;
    a condition written by someone else may carry more keys than `Condition` names)."""
    if not isinstance(status, Mapping):
        return []
    raw = status.get("conditions")
    if not isinstance(raw, list):
        return []
    return [cast(Condition, copy.deepcopy(dict(c))) for c in raw if isinstance(c, Mapping)]


def _with_conditions(status: Mapping[str, Any] | None, conds: list[Condition]) -> dict[str, Any]:
    new = copy.deepcopy(dict(status)) if isinstance(status, Mapping) else {}
    new["conditions"] = conds
    return new


def _new(
    cond_type: str,
    cond_status: str,
    reason: str,
    message: str,
    *,
    now: datetime,
    result: AnsibleResult | None = None,
) -> Condition:
    # Key order follows the original's JSON (type, status, lastTransitionTime,
    # ansibleResult, reason, message) so that our writes diff cleanly against its.
    cond: Condition = {
        "type": cond_type,
        "status": cond_status,
        "lastTransitionTime": format_time(now),
    }
    if result is not None:
        cond["ansibleResult"] = result.to_dict()
    cond["reason"] = reason
    cond["message"] = redact_message(message)
    return cond


def _find(conds: list[Condition], cond_type: str) -> Condition | None:
    return next((c for c in conds if c.get("type") == cond_type), None)


def _set(conds: list[Condition], cond: Condition) -> list[Condition]:
    """Set `cond` in `conds` by the rules in the module docstring."""
    cond_type = cond["type"]
    current = _find(conds, cond_type)
    if current is not None:
        same_status = current.get("status") == cond["status"]
        if same_status and cond_type != FAILURE and current.get("reason") == cond["reason"]:
            return conds
        if same_status and "lastTransitionTime" in current:
            cond = {**cond, "lastTransitionTime": current["lastTransitionTime"]}
    return [c for c in conds if c.get("type") != cond_type] + [cond]


def _flip_false(conds: list[Condition], cond_type: str, *, now: datetime) -> list[Condition]:
    """Set an existing condition of `cond_type` to `False`, all its other fields kept."""
    current = _find(conds, cond_type)
    if current is None:
        return conds
    flipped: Condition = {**current, "status": FALSE}
    if current.get("status") != FALSE:
        flipped["lastTransitionTime"] = format_time(now)
    return _set(conds, flipped)
