"""What a role could observe or do, as the differential suite records it per operator:

- runs: each Ansible run of a watched object, from its artifact directory (the same
  layout for the Go operator's ansible-runner and ours): its task outcomes in order (from
  the job events) and the stats;
- dumps: what each run's recorder task wrote (`_shared/roles/rec`): its variables, the
  names of all variables and of the environment, whether its CR variable matched the live
  CR;
- after each scenario step: the fixture's CRs (metadata that matters, status), the
  objects in its namespace, its Kubernetes Events, and how many runs each object had.

Then `normalise` takes out what differs between any two runs on the same operator: uids,
resourceVersions, timestamps, namespace names, generated names, Service IPs, and what the
fixture declares random.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes.dynamic.exceptions import NotFoundError

from runner.ansible.artifacts import RunInfo, list_runs, read_events, read_stdout

from .fixtures import Fixture

RECORD_LABEL = "differential.example.com/record=true"
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_OPERATOR_DIR = re.compile(r"\boperator-[a-z0-9_]{8}\b")
"""Ours: the process's own run directory (`runner/ansible/rundir.py`)."""
_TIME_KEYS = frozenset(
    {"creationTimestamp", "lastTransitionTime", "deletionTimestamp", "completion", "time"}
)
_MANAGED_FIELDS = ("manager", "operation", "subresource")
"""What of a managedFields entry is kept: who wrote, how, and which subresource."""
_DROPPED_OBJECTS = frozenset({"ConfigMap/kube-root-ca.crt"})
_ITEM_EVENTS = {
    "runner_item_on_ok": "item ok",
    "runner_item_on_failed": "item failed",
    "runner_item_on_skipped": "item skipped",
}


# -- runs ---------------------------------------------------------------------------


def data_dir(base: Path, fixture: Fixture, ref: str, namespace: str) -> Path:
    kind, name = ref.split("/", 1)
    group, version = fixture.group_of(kind)
    namespace = namespace if fixture.namespaced(kind) else ""
    parts = [part for part in (group, version, kind, namespace, name) if part]
    return base.joinpath(*parts)


def runs(base: Path | None, fixture: Fixture, ref: str, namespace: str) -> list[RunInfo]:
    """The runs of `ref`, oldest first (`status` None: still running)."""
    if base is None:
        return []
    return list(reversed(list_runs(data_dir(base, fixture, ref, namespace))))


def finished(run: RunInfo) -> bool:
    """The run has ended: ansible-runner wrote its status, or (the status file may be
    gone with a deleted CR's directory before it was mirrored) its stats event is there."""
    if run.status is not None:
        return True
    return any(event.get("event") == "playbook_on_stats" for event in read_events(run))


def run_record(run: RunInfo, *, secrets: tuple[str, ...] = ()) -> dict[str, Any]:
    """A run's task outcomes in order, its stats for localhost, and which of `secrets`
    its output or events show."""
    tasks: list[str] = []
    stats: dict[str, Any] = {}
    events = read_events(run)
    shown = json.dumps(events, default=str) + read_stdout(run)
    for event in events:
        kind = event.get("event")
        data = event.get("event_data") or {}
        res = data.get("res") if isinstance(data.get("res"), Mapping) else {}
        name = f"{data.get('role') or ''}: {data.get('task') or ''}".strip(": ")
        censored = " (censored)" if "censored" in res else ""
        if kind == "runner_on_ok":
            tasks.append(f"{name} => {'changed' if res.get('changed') else 'ok'}{censored}")
        elif kind == "runner_on_skipped":
            tasks.append(f"{name} => skipped")
        elif kind == "runner_on_unreachable":
            tasks.append(f"{name} => unreachable")
        elif kind == "runner_on_failed":
            ignored = " (ignored)" if data.get("ignore_errors") else ""
            msg = res.get("msg") if isinstance(res.get("msg"), str) else ""
            tasks.append(f"{name} => failed{ignored}{censored}: {msg}".rstrip(": "))
        elif kind in _ITEM_EVENTS:
            label = res.get("_ansible_item_label", res.get("item", ""))
            tasks.append(f"{name} => {_ITEM_EVENTS[kind]} {json.dumps(label, default=str)}")
        elif kind == "playbook_on_stats":
            stats = {
                key: (data.get(key) or {}).get("localhost", 0)
                for key in ("ok", "changed", "failures", "skipped", "rescued", "ignored")
            }
    record: dict[str, Any] = {"tasks": tasks, "stats": stats}
    if secrets:
        record["leaked"] = [secret for secret in secrets if secret in shown]
    return record


# -- dumps --------------------------------------------------------------------------


def dumps(dyn: Any, recorder_namespace: str) -> dict[tuple[str, str, str], list[Any]]:
    """(kind, namespace, name) -> what each of its runs recorded, in run order."""
    resource = dyn.resources.get(api_version="v1", kind="ConfigMap")
    listed = resource.get(namespace=recorder_namespace, label_selector=RECORD_LABEL)
    found: dict[tuple[str, str, str], list[Any]] = {}
    for item in listed.to_dict().get("items") or []:
        data = item.get("data") or {}
        records = [json.loads(data[key]) for key in sorted(data)]
        if records:
            cr = records[0]["cr"]
            found[(cr["kind"], cr["namespace"], cr["name"])] = records
    return found


# -- objects --------------------------------------------------------------------------


def _list(dyn: Any, api_version: str, kind: str, namespace: str | None) -> list[dict[str, Any]]:
    try:
        resource = dyn.resources.get(api_version=api_version, kind=kind)
        listed = resource.get(namespace=namespace) if namespace else resource.get()
    except NotFoundError:
        return []
    return list(listed.to_dict().get("items") or [])


def objects(dyn: Any, fixture: Fixture, namespace: str) -> dict[str, Any]:
    """`Kind/name` -> the object, of the core kinds roles create and the fixture's own
    kinds (its cluster-scoped CRs included)."""
    found: dict[str, Any] = {}
    kinds = [(api, kind, namespace) for kind, api in (("ConfigMap", "v1"), ("Secret", "v1"))]
    kinds.append(("v1", "Service", namespace))
    for kind in fixture.kinds:
        scoped = namespace if fixture.namespaced(kind) else None
        kinds.append((fixture.api_version(kind), kind, scoped))  # type: ignore[arg-type]
    for api, kind, scoped in kinds:
        for item in _list(dyn, api, kind, scoped):
            meta = item["metadata"]
            name = meta["name"]
            generated = meta.get("generateName")
            if generated and name.startswith(generated):
                name = meta["name"] = f"{generated}<generated>"
            ref = f"{kind}/{name}"
            if ref in _DROPPED_OBJECTS:
                continue
            if scoped is None and not _is_fixtures(item, fixture):
                continue
            found[ref] = _object_view(item)
    return dict(sorted(found.items()))


def _is_fixtures(item: Mapping[str, Any], fixture: Fixture) -> bool:
    """A cluster-scoped CR of the fixture's kinds is its own (its kinds are its alone)."""
    return item.get("kind") in fixture.kinds


def _object_view(item: Mapping[str, Any]) -> dict[str, Any]:
    view = {key: value for key, value in item.items() if key not in ("apiVersion", "kind")}
    if item.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if isinstance(view.get(key), Mapping):
                view[key] = {name: "<masked>" for name in view[key]}
    return view


def events(dyn: Any, namespace: str) -> list[str]:
    """The Kubernetes Events in the namespace, one line each, sorted (no counts)."""
    lines = set()
    for item in _list(dyn, "v1", "Event", namespace):
        involved = item.get("involvedObject") or item.get("involved_object") or {}
        lines.add(
            f"{item.get('type')} {item.get('reason')} "
            f"{involved.get('kind')}/{involved.get('name')}: {item.get('message')}"
        )
    return sorted(lines)


# -- normalising ----------------------------------------------------------------------


def normalise(value: Any, *, names: Mapping[str, str], random: tuple[str, ...] = ()) -> Any:
    """`value` without what differs between any two runs on one operator; `names`:
    texts to replace (namespace names -> placeholders); `random`: path patterns
    (`/`-joined keys and indexes) whose values the role made up."""
    return _normalise(value, "", names, random)


def _normalise(value: Any, path: str, names: Mapping[str, str], random: tuple[str, ...]) -> Any:
    if random and any(fnmatch.fnmatchcase(path, pattern) for pattern in random):
        return "<random>"
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            key = str(key)
            sub = f"{path}/{key}" if path else key
            if key == "managedFields" and isinstance(item, list):
                out[key] = sorted(
                    "|".join(str(entry.get(k) or "") for k in _MANAGED_FIELDS)
                    for entry in item
                    if isinstance(entry, Mapping)
                )
            elif key == "resourceVersion" and isinstance(item, str):
                out[key] = "<rv>"
            elif key in ("uid", "clusterIP") and isinstance(item, str):
                out[key] = f"<{key}>"
            elif key == "clusterIPs" and isinstance(item, list):
                out[key] = ["<clusterIP>" for _ in item]
            elif key in _TIME_KEYS and isinstance(item, str):
                out[key] = "<time>"
            else:
                out[_text(key, names)] = _normalise(item, sub, names, random)
        return out
    if isinstance(value, list):
        return [
            _normalise(item, f"{path}/{index}", names, random) for index, item in enumerate(value)
        ]
    if isinstance(value, str):
        return _text(value, names)
    return value


def _text(text: str, names: Mapping[str, str]) -> str:
    for name, placeholder in names.items():
        text = text.replace(name, placeholder)
    text = _OPERATOR_DIR.sub("operator-<id>", text)
    text = _UUID.sub("<uid>", text)
    return _TIME.sub("<time>", text)
