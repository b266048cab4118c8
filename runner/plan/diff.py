"""The plan's changes: each written object as the cluster has it against the plan's result.

Objects are compared without what the API server manages itself and a dry run cannot
predict or a reviewer does not care about (`without_noise`): `managedFields`,
`resourceVersion`, `uid`, `generation`, `creationTimestamp`, `selfLink`, and the time
stamps of conditions (`lastTransitionTime`, `lastUpdateTime`, `lastHeartbeatTime`,
`lastProbeTime`) and of the operator's `ansibleResult.completion`. What is left is
printed as YAML, and the two YAML texts are compared line by line (a unified diff).

Credentials are masked before anything is compared for printing (`runner.util.redact`):
the `data`, `stringData` and `binaryData` of Secrets, and the values under
credential-like keys anywhere (`password`, `token`, ...). So that a reviewer still sees
*that* a Secret's value changes, a changed value reads `<redacted: changed>` on the
planned side. `--show-secrets` turns masking off. Pure.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

from runner.plan.overlay import Entry
from runner.structs import bodies
from runner.util.redact import REDACTED, redact

__all__ = ["Action", "Change", "change_of", "masked", "unified", "without_noise"]

_NOISY_METADATA: Final = frozenset(
    {"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"}
)
_NOISY_TIMES: Final = frozenset(
    {"lastTransitionTime", "lastUpdateTime", "lastHeartbeatTime", "lastProbeTime"}
)
_SECRET_DATA: Final = ("data", "stringData", "binaryData")
CHANGED_SECRET: Final = "<redacted: changed>"


class Action(enum.Enum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    NONE = "none"


@dataclass(frozen=True)
class Change:
    """One object of the plan, its action and its diff (both sides noise-free, masked)."""

    action: Action
    api_version: str
    kind: str
    namespace: str
    name: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    diff: str

    @property
    def label(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


def without_noise(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` without the server-managed fields and time stamps (a new object)."""
    result: dict[str, Any] = _without_times(obj, under_status=False)
    meta = result.get("metadata")
    if isinstance(meta, dict):
        result["metadata"] = {k: v for k, v in meta.items() if k not in _NOISY_METADATA}
    if result.get("status") == {}:
        del result["status"]
    return result


def masked(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Both sides with credentials masked; a Secret value that changes reads
    `<redacted: changed>` on the `after` side."""
    left = redact(dict(before)) if before is not None else None
    right = redact(dict(after)) if after is not None else None
    if before is not None and after is not None and right is not None:
        for key in _SECRET_DATA:
            old, new, shown = before.get(key), after.get(key), right.get(key)
            if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
                continue
            if not isinstance(shown, dict):
                continue
            for name in new:
                if name in old and old[name] != new[name] and shown.get(name) == REDACTED:
                    shown[name] = CHANGED_SECRET
    return left, right


def unified(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> str:
    """A unified diff of the two objects as YAML (`live` against `planned`)."""
    left = _yaml(before).splitlines(keepends=True) if before is not None else []
    right = _yaml(after).splitlines(keepends=True) if after is not None else []
    lines = difflib.unified_diff(left, right, fromfile="live", tofile="planned", n=3)
    return "".join(line if line.endswith("\n") else f"{line}\n" for line in lines)


def change_of(entry: Entry, *, show_secrets: bool = False, without_status: bool = False) -> Change:
    """The change an overlay entry makes (action NONE when there is nothing to see);
    `without_status`: leave the status out of the comparison (the CR's is shown whole)."""
    live, current = entry.live, entry.current
    if without_status:
        live = _no_status(live)
        current = _no_status(current)
    if live is None and current is None:
        action = Action.NONE
    elif live is None:
        action = Action.CREATE
    elif current is None:
        action = Action.DELETE
    else:
        action = Action.UPDATE
    before = without_noise(live) if live is not None else None
    after = without_noise(current) if current is not None else None
    if action is Action.UPDATE and before == after:
        action = Action.NONE
    if not show_secrets:
        before, after = masked(before, after)
    sample = current if current is not None else live or {}
    return Change(
        action=action,
        api_version=str(sample.get("apiVersion") or ""),
        kind=str(sample.get("kind") or entry.key.resource),
        namespace=bodies.namespace(sample) or entry.key.namespace,
        name=bodies.name(sample) or entry.key.name,
        before=before,
        after=after,
        diff=unified(before, after) if action is not Action.NONE else "",
    )


# -- internals ------------------------------------------------------------------------


def _no_status(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    if obj is None:
        return None
    return {key: value for key, value in obj.items() if key != "status"}


def _without_times(value: Any, *, under_status: bool) -> Any:
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if key in _NOISY_TIMES:
                continue
            if under_status and key == "completion" and isinstance(item, str):
                continue  # ansibleResult.completion
            result[key] = _without_times(item, under_status=under_status or key == "status")
        return result
    if isinstance(value, list):
        return [_without_times(item, under_status=under_status) for item in value]
    return value


class _Dumper(yaml.SafeDumper):
    """Block-style YAML with multi-line strings as literal blocks (readable diffs)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def _yaml(obj: Mapping[str, Any]) -> str:
    text: str = yaml.dump(
        dict(obj), Dumper=_Dumper, sort_keys=True, default_flow_style=False, allow_unicode=True
    )
    return text
