"""Which tasks a plan can preview, and how a planned run is told what to do.

A plan (`ansible-operator plan`) sees only what goes through the API proxy; the proxy
turns every write into a dry run. A task that acts anywhere else — runs a program, calls a
URL, execs into a container, waits for a controller — would act for real, or wait for
something that never comes. So a planned run lets through only the actions known to act
on nothing but the Kubernetes API (through the proxy), on Ansible's own state, or on the
local files of the process that runs the plan (`PREVIEWABLE`); every other action is
not previewable, with the reason in `REASONS` when there is a specific one, and is
skipped unless the user allowed side effects. The `wait` of the Kubernetes modules is
turned off in any case (`WAITING`): a dry-run object never gets the status a controller
would give it.

The plan hands its mode to the run in `PLAN_ENV` (JSON). Pure: no ansible import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "MARK",
    "PLAN_ENV",
    "PREVIEWABLE",
    "REASONS",
    "WAITING",
    "WAIT_REASON",
    "PlanMode",
    "canonical",
    "not_previewable",
]

PLAN_ENV: Final = "ANSIBLE_OPERATOR_PLAN"
MARK: Final = "ansible_operator_plan"
"""The key of a task result that says what the plan did with the task:
`{"reason": str, "ran": bool}`."""

_BUILTIN_LOGIC: Final = (
    "add_host",
    "assert",
    "async_status",
    "debug",
    "fail",
    "gather_facts",
    "group_by",
    "import_playbook",
    "import_role",
    "import_tasks",
    "include_role",
    "include_tasks",
    "include_vars",
    "meta",
    "pause",
    "ping",
    "set_fact",
    "set_stats",
    "setup",
    "validate_argument_spec",
)
_BUILTIN_LOCAL_FILES: Final = (
    "assemble",
    "blockinfile",
    "copy",
    "file",
    "find",
    "lineinfile",
    "replace",
    "slurp",
    "stat",
    "tempfile",
    "template",
)
_KUBERNETES: Final = (
    "k8s",
    "k8s_cluster_info",
    "k8s_info",
    "k8s_json_patch",
    "k8s_log",
    "k8s_rollback",
    "k8s_scale",
    "k8s_service",
    "k8s_taint",
    "helm_info",
    "helm_template",
)
_OPERATOR_SDK: Final = ("k8s_event", "k8s_status", "requeue_after")

PREVIEWABLE: Final = frozenset(
    [f"ansible.builtin.{name}" for name in (*_BUILTIN_LOGIC, *_BUILTIN_LOCAL_FILES)]
    + [f"kubernetes.core.{name}" for name in _KUBERNETES]
    + [f"operator_sdk.util.{name}" for name in _OPERATOR_SDK]
)
"""Actions a plan runs: they act only through the Kubernetes API (dry-run by the proxy),
on Ansible's own state, or on local files of the process running the plan."""

_RUNS_PROGRAMS: Final = "runs a program on the operator's host, which may act outside the API"
REASONS: Final = {
    "ansible.builtin.command": _RUNS_PROGRAMS,
    "ansible.builtin.shell": _RUNS_PROGRAMS,
    "ansible.builtin.script": _RUNS_PROGRAMS,
    "ansible.builtin.raw": _RUNS_PROGRAMS,
    "ansible.builtin.expect": _RUNS_PROGRAMS,
    "ansible.builtin.uri": "sends an HTTP request outside the Kubernetes API",
    "ansible.builtin.get_url": "downloads over the network, outside the Kubernetes API",
    "ansible.builtin.git": "reaches a Git server outside the Kubernetes API",
    "ansible.builtin.wait_for": "waits for a port or file outside the Kubernetes API",
    "ansible.builtin.wait_for_connection": "waits for a host outside the Kubernetes API",
    "kubernetes.core.k8s_exec": "runs a command in a container (exec)",
    "kubernetes.core.k8s_cp": "copies files into or out of a container (exec)",
    "kubernetes.core.k8s_drain": "evicts pods and waits for them to go",
    "kubernetes.core.helm": "runs helm, whose releases a plan cannot preview",
    "kubernetes.core.helm_plugin": "runs helm",
    "kubernetes.core.helm_repository": "runs helm",
    "kubernetes.core.helm_pull": "downloads a chart outside the Kubernetes API",
    "operator_sdk.util.osdk_metric": "updates the operator's metrics",
}
DEFAULT_REASON: Final = "not known to act only through the Kubernetes API"

WAITING: Final = frozenset(
    f"kubernetes.core.{name}" for name in ("k8s", "k8s_info", "k8s_scale", "k8s_rollback")
)
"""Kubernetes modules whose `wait` a plan turns off."""
WAIT_REASON: Final = (
    "its wait was not performed: a dry-run object never gets the status a controller "
    "would set (its API writes were previewed)"
)

_ALIASES: Final = {
    "community.kubernetes.": "kubernetes.core.",
    "community.okd.k8s": "kubernetes.core.k8s",
    "ansible.legacy.": "ansible.builtin.",
}
_SHORT: Final = {
    name.rpartition(".")[2]: name
    for name in sorted(PREVIEWABLE | frozenset(REASONS))
    if name.startswith(("ansible.builtin.", "kubernetes.core.", "operator_sdk.util."))
}


@dataclass(frozen=True)
class PlanMode:
    """What a planned run does with tasks it cannot preview, and where it writes down
    what it did with them (`record`: a file of JSON lines, one per task and reason:
    `{"task", "action", "reason", "ran", "uuid"}`; the job event of a skipped task does
    not carry its result)."""

    allow_side_effects: bool = False
    record: str = ""

    def encode(self) -> str:
        return json.dumps({"allow_side_effects": self.allow_side_effects, "record": self.record})

    @classmethod
    def decode(cls, text: str) -> PlanMode:
        """`encode`'s inverse; ValueError for anything else."""
        data: Any = json.loads(text)
        if (
            not isinstance(data, Mapping)
            or not isinstance(data.get("allow_side_effects"), bool)
            or not isinstance(data.get("record", ""), str)
        ):
            raise ValueError(f"{PLAN_ENV} is not a plan mode: {text!r}")
        return cls(allow_side_effects=data["allow_side_effects"], record=data.get("record", ""))


def canonical(action: str) -> str:
    """The action's fully qualified name as the tables spell it (`ansible.legacy.shell`,
    `shell` -> `ansible.builtin.shell`; `community.kubernetes.k8s` -> `kubernetes.core.k8s`)."""
    for prefix, replacement in _ALIASES.items():
        if action.startswith(prefix):
            return replacement + action[len(prefix) :]
    if "." not in action:
        return _SHORT.get(action, f"ansible.builtin.{action}")
    return action


def not_previewable(action: str) -> str | None:
    """Why a task of `action` cannot be previewed; None when it can."""
    name = canonical(action)
    if name in PREVIEWABLE:
        return None
    return REASONS.get(name, DEFAULT_REASON)
