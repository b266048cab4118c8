"""Which plays a warm runner may run in its own process: the rules, as pure functions.

A warm runner (`warmrole.py`) runs a webhook's tasks with ansible-core's `TaskExecutor`
in a long-lived process, without ansible-playbook's strategy around them. That is exact
only for tasks whose whole effect is their result: controller-side actions without side
effects (`assert`, `fail`, `set_fact` without `cacheable`, `debug`), with keywords the
executor itself applies (`when`, `vars`, `failed_when`, `changed_when`, `no_log`,
`ignore_errors`) or that are applied to the result exactly as the strategy does
(`register`, `loop` with the items' facts), in plain blocks. Everything else keeps the
full ansible-playbook run: modules (they change things elsewhere), lookups (they read the
world, such as the Kubernetes API; `with_*` loops are lookups), a loop's `pause`,
retries, `delegate_to`, handlers and notifications,
`rescue`/`always`, includes, `meta` tasks, `never` tags, more than one play...

The rules look at what the YAML said (each task's and block's keys, the values'
strings), handed over by `warmrole.py` as `Shape`s; each answer is the first reason found
(None: the play runs warm).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BLOCK_KEYWORDS",
    "LOOP_CONTROLS",
    "PLAY_KEYWORDS",
    "TASK_ACTIONS",
    "TASK_KEYWORDS",
    "Shape",
    "lookup_in",
    "why_not_warm",
]

TASK_ACTIONS = frozenset(
    {
        "ansible.builtin.assert",
        "ansible.builtin.fail",
        "ansible.builtin.set_fact",
        "ansible.builtin.debug",
    }
)
"""Actions (resolved names) that run on the controller and only return a result."""

TASK_KEYWORDS = frozenset(
    {
        "name",
        "action",
        "args",
        "when",
        "vars",
        "register",
        "no_log",
        "ignore_errors",
        "failed_when",
        "changed_when",
        "tags",
        "loop",
        "loop_control",
    }
)
"""Task keywords with the same effect in the warm runner as under ansible-playbook."""

LOOP_CONTROLS = frozenset({"loop_var", "index_var", "label", "extended", "extended_allitems"})
"""`loop_control` keys the warm runner allows (not `pause`: a request would sleep)."""

BLOCK_KEYWORDS = frozenset({"block", "name", "when", "vars", "no_log", "ignore_errors", "tags"})
"""Block keywords the tasks inherit (the executor applies them through the task)."""

PLAY_KEYWORDS = frozenset(
    {"name", "hosts", "gather_facts", "vars", "tasks", "pre_tasks", "post_tasks", "roles"}
)
"""Keys of a playbook's play the warm runner reproduces (a role webhook's play is ours)."""

_LOOKUP = re.compile(r"\b(lookup|query|q)\s*\(")
_TEMPLATE_START = ("{{", "{%")


@dataclass(frozen=True)
class Shape:
    """One task or block as written: where, what kind, its keys and its data."""

    where: str
    """For the reason: `<file>:<line>` or the task's name."""
    kind: str
    """`task`, `block` or `play`."""
    keys: frozenset[str]
    """Its keywords as written (for a task, without the key naming the action)."""
    action: str = ""
    """For a task: its action's resolved name."""
    args: Mapping[str, Any] = field(default_factory=dict)
    """For a task: its action's arguments."""
    data: Any = None
    """Everything it holds, scanned for lookups (the raw YAML data)."""
    implicit: bool = False
    """A task ansible-core adds itself (`flush_handlers`, `role_complete`): no effect here."""


def lookup_in(value: Any) -> str | None:
    """The first string in `value` (nested lists and mappings, keys too) that calls a
    lookup (`lookup(`, `query(`, `q(`); None when none does."""
    if isinstance(value, str):
        return value if _LOOKUP.search(value) else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = lookup_in(key) or lookup_in(item)
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for item in value:
            found = lookup_in(item)
            if found is not None:
                return found
    return None


def why_not_warm(
    shapes: Iterable[Shape], *, variables: Iterable[tuple[str, Any]] = ()
) -> str | None:
    """Why these shapes (the play, its blocks and tasks, in order) need a full run; None
    when the warm runner runs them exactly. `variables`: (where, data) of the variables
    the play and its roles define (role defaults and vars, play vars), scanned for
    lookups too."""
    for where, data in variables:
        found = lookup_in(data)
        if found is not None:
            return f"{where} calls a lookup ({_short(found)})"
    tasks = 0
    for shape in shapes:
        reason = _why_not(shape)
        if reason is not None:
            return f"{shape.where}: {reason}"
        tasks += shape.kind == "task" and not shape.implicit
    if tasks == 0:
        return "no tasks"
    return None


def _why_not(shape: Shape) -> str | None:
    if shape.kind == "play":
        return _unsupported(shape.keys, PLAY_KEYWORDS, "play") or _lookup(shape)
    if shape.kind == "block":
        return _unsupported(shape.keys, BLOCK_KEYWORDS, "block") or _tags(shape) or _lookup(shape)
    if shape.implicit:
        return None
    if shape.action not in TASK_ACTIONS:
        return f"the action {shape.action or '(none)'} runs only in a full run"
    if shape.action == "ansible.builtin.set_fact" and "cacheable" in shape.args:
        return "set_fact with cacheable (the fact cache outlives a request)"
    return (
        _unsupported(shape.keys, TASK_KEYWORDS, "task")
        or _loop_control(shape)
        or _tags(shape)
        or _lookup(shape)
    )


def _loop_control(shape: Shape) -> str | None:
    data = shape.data if isinstance(shape.data, Mapping) else {}
    control = data.get("loop_control")
    if control is None:
        return None
    if not isinstance(control, Mapping):
        return "a loop_control that is not a mapping runs only in a full run"
    return _unsupported(control, LOOP_CONTROLS, "loop_control")


def _unsupported(keys: Iterable[str], allowed: frozenset[str], kind: str) -> str | None:
    extra = sorted(set(keys) - allowed)
    if extra:
        return f"the {kind} keyword {extra[0]} runs only in a full run"
    return None


def _tags(shape: Shape) -> str | None:
    """`never` skips a task unless asked for; templated tags are decided at run time."""
    data = shape.data if isinstance(shape.data, Mapping) else {}
    tags = data.get("tags")
    names = tags if isinstance(tags, list) else [tags] if tags is not None else []
    for tag in names:
        text = str(tag)
        if "never" in [part.strip() for part in text.split(",")]:
            return "the tag never runs only in a full run"
        if any(start in text for start in _TEMPLATE_START):
            return "templated tags run only in a full run"
    return None


def _lookup(shape: Shape) -> str | None:
    found = lookup_in(shape.data) or lookup_in(shape.args)
    return f"calls a lookup ({_short(found)})" if found is not None else None


def _short(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
