"""The comparison of two normalised records, and the allow-list of differences we keep.

A difference is a path (keys and list indexes joined by `/`, e.g.
`dumps/StatusSeen/first/0/vars/_differential_example_com_statusseen/status`) with the
Go operator's value and ours (`<absent>` where one has no such key). Lists of the same
length are compared item by item; of different lengths, as a whole.

`tests/differential/allowlist.yaml` lists the differences we chose, each:

    id:       a name, which docs/differential.md explains (a heading of its own)
    what:     what differs
    why:      why we keep it
    paths:    [fnmatch patterns of paths]   (`*` crosses `/`)
    go:       the Go operator's value there (optional; exact, after normalising; a
              text with `*` is an fnmatch pattern)
    ours:     ours (optional; the same)
    fixtures: [names]   (optional: only there)
    backends: [runner | fast]   (optional)
    core:     [ansible-core lines, e.g. "2.19"]   (optional)
    sometimes: true   when the difference depends on timing (not required to show)
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ABSENT = "<absent>"
_ANY = object()


@dataclass(frozen=True)
class Difference:
    path: str
    go: Any
    ours: Any

    def __str__(self) -> str:
        return f"{self.path}\n    go:   {_short(self.go)}\n    ours: {_short(self.ours)}"


def _short(value: Any, limit: int = 600) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def differences(go: Any, ours: Any, path: str = "") -> Iterator[Difference]:
    if isinstance(go, Mapping) and isinstance(ours, Mapping):
        for key in sorted(set(go) | set(ours), key=str):
            sub = f"{path}/{key}" if path else str(key)
            yield from differences(go.get(key, ABSENT), ours.get(key, ABSENT), sub)
    elif isinstance(go, list) and isinstance(ours, list) and len(go) == len(ours):
        for index, (left, right) in enumerate(zip(go, ours, strict=True)):
            yield from differences(left, right, f"{path}/{index}")
    elif go != ours:
        yield Difference(path, go, ours)


@dataclass(frozen=True)
class Entry:
    id: str
    what: str
    why: str
    paths: tuple[str, ...]
    go: Any = _ANY
    ours: Any = _ANY
    fixtures: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    core: tuple[str, ...] = ()
    sometimes: bool = False

    def applies(self, *, fixture: str, backend: str, core: str) -> bool:
        return (
            (not self.fixtures or fixture in self.fixtures)
            and (not self.backends or backend in self.backends)
            and (not self.core or core in self.core)
        )

    def matches(self, diff: Difference) -> bool:
        if not any(fnmatch.fnmatchcase(diff.path, pattern) for pattern in self.paths):
            return False
        return _value_matches(self.go, diff.go) and _value_matches(self.ours, diff.ours)


def _value_matches(expected: Any, value: Any) -> bool:
    if expected is _ANY:
        return True
    if isinstance(expected, str) and "*" in expected and isinstance(value, str):
        return fnmatch.fnmatchcase(value, expected)
    return bool(value == expected)


def load_allowlist(path: Path) -> list[Entry]:
    raw = yaml.safe_load(path.read_text()) or []
    entries = []
    for index, item in enumerate(raw):
        missing = [key for key in ("id", "what", "why", "paths") if not item.get(key)]
        if missing:
            raise ValueError(f"{path}: entry {index + 1}: missing {', '.join(missing)}")
        entries.append(
            Entry(
                id=item["id"],
                what=item["what"],
                why=item["why"],
                paths=tuple(item["paths"]),
                go=item.get("go", _ANY),
                ours=item.get("ours", _ANY),
                fixtures=tuple(item.get("fixtures") or ()),
                backends=tuple(item.get("backends") or ()),
                core=tuple(str(line) for line in item.get("core") or ()),
                sometimes=bool(item.get("sometimes", False)),
            )
        )
    ids = [entry.id for entry in entries]
    doubled = sorted({name for name in ids if ids.count(name) > 1})
    if doubled:
        raise ValueError(f"{path}: ids used twice: {doubled}")
    return entries


def unexplained(
    diffs: list[Difference],
    entries: list[Entry],
    *,
    fixture: str,
    backend: str,
    core: str,
    used: set[str],
) -> list[Difference]:
    """The differences no entry explains; the ids of the entries that explained one are
    added to `used`."""
    left = []
    for diff in diffs:
        entry = next(
            (
                e
                for e in entries
                if e.applies(fixture=fixture, backend=backend, core=core) and e.matches(diff)
            ),
            None,
        )
        if entry is None:
            left.append(diff)
        else:
            used.add(entry.id)
    return left
