"""Fixture operators of the differential suite and their scenarios.

A fixture is a directory `tests/differential/fixtures/<name>/`:

    watches.yaml   its entries of the operator's watches.yaml (roles by name,
                   playbooks as `playbooks/<file>`, relative to the project)
    roles/ playbooks/   copied into the project (role names unique in the suite)
    scenario.yaml  what the suite does and waits for, in the fixture's own namespace:
                     kinds:    {Kind: Namespaced | Cluster}  (group differential.example.com)
                     setup:    [objects]  created before the operator starts
                     steps:    [{create: [objects], patch: {ref: body}, delete: [refs],
                                 wait: {runs: {ref: n}, gone: [refs],
                                        conditions: {ref: Type}, sleep: s,
                                        quiet: s, timeout: s}}]
                     periodic: {ref: n}   objects whose number of runs depends on timing
                                          (a period, a retry backoff): only their first
                                          n runs are compared
                     unsettled: {ref: [step indexes] | all}  where the object's status
                                          depends on when the step's snapshot is taken
                                          (a run on a timer or a retry may be going
                                          on): its status there is not compared
                     random:   [path patterns]  values the role makes up (masked)
                     secrets:  [texts]  must appear in no run's output or events

A ref is `Kind/name`. Objects are manifests; `apiVersion` may be left out for the
suite's kinds and ConfigMap, Secret, Service; `{namespace}` in any string stands for the
fixture's namespace of the operator under test (cluster-scoped CRs name it in their spec).
`_shared/roles/` (the recorder role) goes into every project.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
SUITE = REPO / "tests" / "differential"
FIXTURES = SUITE / "fixtures"
SHARED = FIXTURES / "_shared"
GROUP = "differential.example.com"
VERSION = "v1alpha1"
CORE_KINDS = {"ConfigMap": "v1", "Secret": "v1", "Service": "v1"}


@dataclass(frozen=True)
class Wait:
    """What ends a step: runs finished, objects gone, then no run for `quiet` seconds."""

    runs: Mapping[str, int] = field(default_factory=dict)
    gone: tuple[str, ...] = ()
    conditions: Mapping[str, str] = field(default_factory=dict)
    """ref -> a condition type that must be True."""
    sleep: float = 0.0
    quiet: float = 3.0
    timeout: float = 300.0


@dataclass(frozen=True)
class Step:
    create: tuple[Mapping[str, Any], ...] = ()
    patch: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    delete: tuple[str, ...] = ()
    wait: Wait = field(default_factory=Wait)


@dataclass(frozen=True)
class Fixture:
    name: str
    kinds: Mapping[str, str]
    setup: tuple[Mapping[str, Any], ...]
    steps: tuple[Step, ...]
    periodic: Mapping[str, int]
    random: tuple[str, ...]
    secrets: tuple[str, ...] = ()
    unsettled: Mapping[str, tuple[int, ...] | None] = field(default_factory=dict)
    """ref -> the steps whose snapshot leaves its status out (None: every step)."""

    def settled(self, ref: str, step: int) -> bool:
        """Whether `ref`'s status in the snapshot after `step` is compared."""
        if ref not in self.unsettled:
            return True
        steps = self.unsettled[ref]
        return steps is not None and step not in steps

    @property
    def directory(self) -> Path:
        return FIXTURES / self.name

    def watches(self) -> list[dict[str, Any]]:
        return list(yaml.safe_load((self.directory / "watches.yaml").read_text()))

    def api_version(self, kind: str) -> str:
        if kind in self.kinds:
            return f"{GROUP}/{VERSION}"
        if kind in CORE_KINDS:
            return CORE_KINDS[kind]
        raise ValueError(f"fixture {self.name}: unknown kind {kind!r}")

    def namespaced(self, kind: str) -> bool:
        return self.kinds.get(kind, "Namespaced") == "Namespaced"

    def crs(self) -> list[str]:
        """Refs of every CR of the fixture's own kinds its scenario creates."""
        refs = [
            f"{obj['kind']}/{obj['metadata']['name']}"
            for step in self.steps
            for obj in step.create
            if obj["kind"] in self.kinds
        ]
        return list(dict.fromkeys(refs))

    def watched(self) -> list[str]:
        """Refs of every object whose runs are recorded: CRs of the fixture's kinds and
        objects of a watched core kind it sets up or creates."""
        watched = {w["kind"] for w in self.watches()}
        objects = [*self.setup, *(obj for step in self.steps for obj in step.create)]
        refs = [f"{o['kind']}/{o['metadata']['name']}" for o in objects if o["kind"] in watched]
        return list(dict.fromkeys(refs))

    def group_of(self, kind: str) -> tuple[str, str]:
        """(group, version) of a kind, as data directories are laid out."""
        api_version = self.api_version(kind)
        group, _, version = api_version.rpartition("/")
        return group, version

    def manifest(self, obj: Mapping[str, Any], namespace: str) -> dict[str, Any]:
        """`obj` ready to send: apiVersion filled in, `{namespace}` replaced, in the
        fixture's namespace when its kind is namespaced."""
        body = _substitute(dict(obj), namespace)
        body.setdefault("apiVersion", self.api_version(body["kind"]))
        meta = body.setdefault("metadata", {})
        if self.namespaced(body["kind"]):
            meta["namespace"] = namespace
        return body


def _substitute(value: Any, namespace: str) -> Any:
    if isinstance(value, str):
        return value.replace("{namespace}", namespace)
    if isinstance(value, dict):
        return {key: _substitute(item, namespace) for key, item in value.items()}
    if isinstance(value, list):
        return [_substitute(item, namespace) for item in value]
    return value


def _wait(raw: Mapping[str, Any] | None) -> Wait:
    raw = raw or {}
    return Wait(
        runs=dict(raw.get("runs") or {}),
        gone=tuple(raw.get("gone") or ()),
        conditions=dict(raw.get("conditions") or {}),
        sleep=float(raw.get("sleep", 0.0)),
        quiet=float(raw.get("quiet", 3.0)),
        timeout=float(raw.get("timeout", 300.0)),
    )


def load(name: str) -> Fixture:
    directory = FIXTURES / name
    raw = yaml.safe_load((directory / "scenario.yaml").read_text()) or {}
    steps = tuple(
        Step(
            create=tuple(step.get("create") or ()),
            patch=dict(step.get("patch") or {}),
            delete=tuple(step.get("delete") or ()),
            wait=_wait(step.get("wait")),
        )
        for step in raw.get("steps") or ()
    )
    return Fixture(
        name=name,
        kinds=dict(raw.get("kinds") or {}),
        setup=tuple(raw.get("setup") or ()),
        steps=steps,
        periodic=dict(raw.get("periodic") or {}),
        random=tuple(raw.get("random") or ()),
        secrets=tuple(raw.get("secrets") or ()),
        unsettled={
            ref: None if steps == "all" else tuple(int(step) for step in steps)
            for ref, steps in (raw.get("unsettled") or {}).items()
        },
    )


def load_all() -> list[Fixture]:
    return [
        load(path.name)
        for path in sorted(FIXTURES.iterdir())
        if path.is_dir() and not path.name.startswith("_")
    ]


def build_project(root: Path, fixtures: Iterable[Fixture]) -> Path:
    """One operator project serving every fixture: their watches, roles and playbooks,
    and the shared recorder role."""
    watches: list[dict[str, Any]] = []
    roles: dict[str, str] = {}
    root.mkdir(parents=True, exist_ok=True)
    for directory, owner in [
        (SHARED, "_shared"),
        *((fixture.directory, fixture.name) for fixture in fixtures),
    ]:
        for role in sorted((directory / "roles").glob("*")):
            if role.name in roles:
                raise ValueError(f"role {role.name} of {owner} is also {roles[role.name]}'s")
            roles[role.name] = owner
            shutil.copytree(role, root / "roles" / role.name)
        if (directory / "playbooks").is_dir():
            shutil.copytree(directory / "playbooks", root / "playbooks", dirs_exist_ok=True)
        if (directory / "watches.yaml").is_file():
            watches += yaml.safe_load((directory / "watches.yaml").read_text())
    (root / "watches.yaml").write_text(yaml.safe_dump(watches, sort_keys=False))
    return root
