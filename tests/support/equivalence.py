"""The backend-equivalence suite's building blocks: cases, the operator project they make
together, and what of a namespace is compared.

A case is a directory under `tests/fixtures/equivalence/<case>/`:

    watches.yaml    its entries of the operator's watches.yaml (roles by name, playbooks
                    as `playbooks/<file>`, relative to the project)
    roles/ playbooks/   copied into the project
    setup.yaml      objects created in the namespace before the operator starts (optional)
    cr.yaml         the objects the operator reconciles, created once it runs
    expected.yaml   what the runs must have done, whatever the backend:
                      configmaps: {name: data}     absent: [configmap names]
                      status: {cr name: {key: value}} (keys of its status)
                      unreconciled: [cr names]     (never given a status)
                      metrics: [lines of /metrics]
                      deleted: {configmaps, absent}  (after the CRs are deleted)

plus whatever the operator as a whole is given (an inventory directory, an ansible.cfg, a
vault password file, a collection), named by the case's table row (`Case.env`,
`Case.ansible_args`) with `{case}` standing for the case's directory.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "equivalence"
GROUP = "equivalence.example.com"
VOLATILE_METADATA = (
    *("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"),
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
NAMESPACE_MARK = "<namespace>"
OPERATOR_MARK = "<operator's own>"
VOLATILE_EVENT = ("uuid", "counter", "runner_ident", "pid", "created", "parent_uuid")
VOLATILE_EVENT_DATA = (
    *("uuid", "pid", "playbook", "playbook_uuid", "play_uuid", "task_uuid"),
    *("start", "end", "duration"),
)
VOLATILE_RESULT = ("start", "end", "delta", "duration")


@dataclass(frozen=True)
class Case:
    """One row of the table: a fixture directory and what the operator needs for it."""

    name: str
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment of the operator (`{case}`: the case's directory)."""
    ansible_args: str = ""
    """Part of `--ansible-args` (`{case}`: the case's directory)."""
    delete: bool = False
    """Delete its CRs once reconciled and compare again (finalizers)."""

    @property
    def directory(self) -> Path:
        return FIXTURES / self.name

    def watches(self) -> list[dict[str, Any]]:
        return list(yaml.safe_load((self.directory / "watches.yaml").read_text()))

    def objects(self, name: str) -> list[dict[str, Any]]:
        path = self.directory / name
        if not path.exists():
            return []
        return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]

    def expected(self) -> dict[str, Any]:
        return dict(yaml.safe_load((self.directory / "expected.yaml").read_text()) or {})

    def manages_status(self) -> dict[str, bool]:
        """Kind -> whether its watch manages status."""
        return {w["kind"]: bool(w.get("manageStatus", True)) for w in self.watches()}


@dataclass(frozen=True)
class Project:
    root: Path
    env: dict[str, str]
    ansible_args: str


def build_project(root: Path, cases: Iterable[Case]) -> Project:
    """One operator project serving every case: their watches, roles and playbooks."""
    watches: list[dict[str, Any]] = []
    env: dict[str, str] = {}
    args: list[str] = []
    for case in cases:
        watches += case.watches()
        for sub in ("roles", "playbooks"):
            if (case.directory / sub).is_dir():
                shutil.copytree(case.directory / sub, root / sub, dirs_exist_ok=True)
        for key, value in case.env.items():
            value = value.format(case=case.directory)
            if env.get(key, value) != value:
                raise ValueError(f"cases disagree on {key}: {env[key]!r} and {value!r}")
            env[key] = value
        if case.ansible_args:
            args.append(case.ansible_args.format(case=case.directory))
    root.mkdir(parents=True, exist_ok=True)
    (root / "watches.yaml").write_text(yaml.safe_dump(watches, sort_keys=False))
    return Project(root=root, env=env, ansible_args=" ".join(args))


def custom_kinds(cases: Iterable[Case]) -> list[str]:
    """The kinds of the suite's own group (each needs a CRD)."""
    return sorted({w["kind"] for case in cases for w in case.watches() if w["group"] == GROUP})


def comparable(value: Any, namespace: str) -> Any:
    """An object as both backends must leave it: without what differs between any two
    runs (uids, versions, times, the namespace's name)."""
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            if key in VOLATILE_METADATA or key in ("lastTransitionTime", "completion"):
                continue
            if key == "ownerReferences":
                item = [{k: v for k, v in ref.items() if k != "uid"} for ref in item]
            kept[key] = comparable(item, namespace)
        return kept
    if isinstance(value, list):
        return [comparable(item, namespace) for item in value]
    if isinstance(value, str):
        return value.replace(namespace, NAMESPACE_MARK)
    return value


def condition(status: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    for cond in (status or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def settled(status: Mapping[str, Any] | None) -> bool:
    """The last run finished well: Successful, and Running says it is waiting."""
    successful = condition(status, "Successful")
    running = condition(status, "Running")
    return bool(
        successful
        and successful.get("status") == "True"
        and running
        and running.get("reason") == "Successful"
    )


def failing(status: Mapping[str, Any] | None) -> bool:
    """The last run failed."""
    failure = condition(status, "Failure")
    return bool(failure and failure.get("status") == "True")


def metric_lines(text: str, prefixes: Iterable[str]) -> list[str]:
    """The sample lines of `/metrics` whose names start with one of `prefixes`."""
    wanted = tuple(prefixes)
    return sorted(line for line in text.splitlines() if line.startswith(wanted))


def first_run_events(runner_dir: Path, kind: str, namespace: str, name: str) -> list[Any]:
    """The job events of the first run of CR `namespace/name` under an operator's run
    directory, as both backends must have written them (`event_view`)."""
    from runner.ansible.artifacts import list_runs, read_events

    found = sorted(runner_dir.glob(f"**/{kind}/{namespace}/{name}"))
    runs = [run for data_dir in found for run in list_runs(data_dir)]
    if not runs:
        return []
    first = min(runs, key=lambda run: run.started)
    # What is the operator's own: its run directory (the playbook's path), its temporary
    # directory (TMPDIR, beside the run directory), names made random by mkdtemp.
    own = re.compile(
        re.escape(str(runner_dir.parent)) + r"/(?:runner/operator-[^/\s'\"]+|tmp)"
        r"|ansible\.[A-Za-z0-9_]{8}\b"
    )
    return [
        _replace_strings(event_view(event, namespace), own, OPERATOR_MARK)
        for event in read_events(first)
    ]


def _replace_strings(value: Any, pattern: re.Pattern[str], mark: str) -> Any:
    if isinstance(value, dict):
        return {key: _replace_strings(item, pattern, mark) for key, item in value.items()}
    if isinstance(value, list):
        return [_replace_strings(item, pattern, mark) for item in value]
    if isinstance(value, str):
        return pattern.sub(mark, value)
    return value


def event_view(event: Mapping[str, Any], namespace: str) -> Any:
    """A job event without what differs between any two runs: uuids, pids, times, the
    generated playbook's path, the namespace's name, the values of gathered facts (their
    names stay); results as `comparable` has them, also where the output shows them."""
    view = {key: value for key, value in event.items() if key not in VOLATILE_EVENT}
    if isinstance(view.get("stdout"), str):
        lines = view["stdout"].split("\n")
        view["stdout"] = "\n".join(_line_view(line, namespace) for line in lines)
    data = {
        key: value
        for key, value in (event.get("event_data") or {}).items()
        if key not in VOLATILE_EVENT_DATA
    }
    if isinstance(data.get("res"), dict):
        data["res"] = _result_view(data["res"])
    view["event_data"] = data
    return comparable(view, namespace)


_SHOWN_RESULT = re.compile(r"^(.*? => )(\{.*\})(\x1b\[0m)?(\r?)$")


def _line_view(line: str, namespace: str) -> str:
    """An output line that shows a result (`changed: [host] => {...}`) with the result
    as `_result_view` has it."""
    shown = _SHOWN_RESULT.match(line)
    if not shown:
        return line
    try:
        res = json.loads(shown[2])
    except ValueError:
        return line
    if not isinstance(res, dict):
        return line
    text = json.dumps(comparable(_result_view(res), namespace), sort_keys=True)
    return f"{shown[1]}{text}{shown[3] or ''}{shown[4]}"


def _result_view(res: Mapping[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in res.items() if key not in VOLATILE_RESULT}
    if isinstance(kept.get("ansible_facts"), dict) and "ansible_date_time" in kept["ansible_facts"]:
        kept["ansible_facts"] = sorted(kept["ansible_facts"])  # gathered: names only
    if isinstance(kept.get("results"), list):
        kept["results"] = [
            _result_view(item) if isinstance(item, dict) else item for item in kept["results"]
        ]
    return kept
