"""The project's `requirements.yml` against the collections a run would really load.

A project written for the Go operator pins its collections (`kubernetes.core` 3.2.0,
`cloud.common`, `community.docker` ...) and its image build installs them with
`ansible-galaxy collection install -r requirements.yml`. Run without that step (from a
checkout, or an image that skipped it), Ansible silently takes whatever it finds first:
the `ansible` distribution's newer major version, or nothing. At start-up the operator
compares the two once and says what to do about each difference: a collection that is
missing, or found at another major version than an exact pin (`3.2.0`, `==3.2.0`), or
outside a range (`>=2.0.0,<3.0.0`).

Parsing and comparing are pure; `installed_versions` reads the collections' metadata
(`MANIFEST.json`, else `galaxy.yml`) along the paths Ansible searches, first found wins.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = [
    "FILE_NAME",
    "Installed",
    "Requirement",
    "check",
    "installed_versions",
    "parse",
    "search_paths",
]

FILE_NAME = "requirements.yml"
_COLLECTIONS_DIR = "ansible_collections"


@dataclass(frozen=True)
class Requirement:
    """One entry of `collections:`: `name` (namespace.collection) and its version spec
    as written (`*` when none)."""

    name: str
    version: str = "*"


@dataclass(frozen=True)
class Installed:
    """Where the first copy of a collection Ansible would load is, and its version."""

    version: str
    path: Path


def parse(text: str, *, source: str = FILE_NAME) -> list[Requirement]:
    """The Galaxy collections a requirements file names; ValueError naming the entry
    for one that is malformed. Entries from git, URLs or files (`type`, or a name that
    is not `namespace.collection`) are left out: their installed name is not known here.
    """
    data = yaml.safe_load(text)
    if not isinstance(data, Mapping):
        return []  # the old roles-only format: a list of roles
    entries = data.get("collections") or []
    if not isinstance(entries, list):
        raise ValueError(f"{source}: collections: expected a list, got {entries!r}")
    found = []
    for index, entry in enumerate(entries):
        if isinstance(entry, str):
            name, version = entry, "*"
        elif isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            if entry.get("type", "galaxy") != "galaxy" or entry.get("source", "").startswith(
                ("git+", "file:")
            ):
                continue
            name, version = entry["name"], str(entry.get("version") or "*")
        else:
            raise ValueError(f"{source}: collections[{index}]: expected a name, got {entry!r}")
        if _is_collection_name(name):
            found.append(Requirement(name, version.strip() or "*"))
    return found


def search_paths(collections_path: str, sys_path: Sequence[str]) -> list[Path]:
    """The `ansible_collections` directories Ansible searches, in its order: each
    `ANSIBLE_COLLECTIONS_PATH` entry, then those on Python's path (the `ansible`
    distribution's)."""
    paths = []
    for entry in [*collections_path.split(":"), *sys_path]:
        if not entry:
            continue
        base = Path(entry).expanduser()
        directory = base if base.name == _COLLECTIONS_DIR else base / _COLLECTIONS_DIR
        if directory not in paths:
            paths.append(directory)
    return paths


def installed_versions(names: Iterable[str], paths: Sequence[Path]) -> dict[str, Installed]:
    """The first copy of each named collection found along `paths` (IO)."""
    found: dict[str, Installed] = {}
    for name in names:
        namespace, collection = name.split(".", 1)
        for base in paths:
            directory = base / namespace / collection
            version = _version_of(directory)
            if version is not None:
                found[name] = Installed(version, directory)
                break
    return found


def check(
    requirements: Iterable[Requirement],
    installed: Mapping[str, Installed],
    *,
    source: str = FILE_NAME,
) -> list[str]:
    """One message per requirement the installed collections do not meet, saying what
    to do."""
    install = (
        f"install it with `ansible-galaxy collection install -r {source}` (the project's "
        "Dockerfile does this) into a directory on ANSIBLE_COLLECTIONS_PATH "
        "(--ansible-collections-path), which is searched before the `ansible` package"
    )
    messages = []
    for requirement in requirements:
        found = installed.get(requirement.name)
        wanted = requirement.version
        if found is None:
            version = "" if wanted == "*" else f" {wanted}"
            messages.append(
                f"{source}: collection {requirement.name}{version} is not installed, so "
                f"tasks using it will fail; {install}"
            )
            continue
        problem = _mismatch(wanted, found.version)
        if problem:
            messages.append(
                f"{source}: collection {requirement.name} is pinned to {wanted}, but the "
                f"version Ansible loads is {found.version} ({found.path}): {problem}; "
                f"{install}, or change the pin"
            )
    return messages


def _mismatch(wanted: str, installed: str) -> str:
    """Why `installed` does not meet `wanted`, or "" when it does (or cannot be told)."""
    if wanted in ("*", ""):
        return ""
    try:
        have = Version(installed)
    except InvalidVersion:
        return ""
    exact = wanted[2:].strip() if wanted.startswith("==") else wanted
    try:
        pinned = Version(exact)
    except InvalidVersion:
        pinned = None
    if pinned is not None:
        if pinned.major != have.major:
            return "another major version, whose modules may behave differently"
        return ""
    try:
        spec = SpecifierSet(wanted.replace(" ", ""))
    except InvalidSpecifier:
        return ""
    return "" if spec.contains(have, prereleases=True) else "outside the range asked for"


def _version_of(directory: Path) -> str | None:
    manifest = directory / "MANIFEST.json"
    galaxy = directory / "galaxy.yml"
    try:
        if manifest.is_file():
            info: Any = json.loads(manifest.read_text(encoding="utf-8"))
            return str(info["collection_info"]["version"])
        if galaxy.is_file():
            meta: Any = yaml.safe_load(galaxy.read_text(encoding="utf-8"))
            return str(meta["version"])
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return None
    return None


def _is_collection_name(name: str) -> bool:
    parts = name.split(".")
    return len(parts) == 2 and all(part.isidentifier() for part in parts)
