"""Versions of this runtime and of what it runs with."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

import yaml

from runner import __version__
from runner.collections_path import bundled_collections_path
from runner.watches import DEFAULT_COLLECTIONS_PATH


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_lines() -> list[str]:
    return [
        f"ansible-operator version: {__version__}",
        f"ansible-core version: {_dist_version('ansible-core')}",
        f"ansible-runner version: {_dist_version('ansible-runner')}",
        f"python version: {platform.python_version()}",
        f"kubernetes client version: {_dist_version('kubernetes')}",
        f"kubernetes-asyncio version: {_dist_version('kubernetes-asyncio')}",
        f"os/arch: {platform.system().lower()}/{platform.machine()}",
        "collections:",
        *(f"  {name} {version}" for name, version in sorted(installed_collections().items())),
    ]


def collection_search_path(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Where Ansible finds collections, in its order: ANSIBLE_COLLECTIONS_PATH (or its
    default), then `sys.path` (pip-installed collections), then our bundled ones."""
    env = os.environ if environ is None else environ
    configured = env.get("ANSIBLE_COLLECTIONS_PATH")
    entries = configured.split(os.pathsep) if configured else list(DEFAULT_COLLECTIONS_PATH)
    paths = [Path(os.path.expanduser(entry)) for entry in entries if entry]
    paths += [Path(entry) for entry in sys.path if entry]
    return [*paths, bundled_collections_path()]


def installed_collections(paths: Iterable[Path] | None = None) -> dict[str, str]:
    """`namespace.name` -> version of each collection found (the first one on the path)."""
    found: dict[str, str] = {}
    for entry in collection_search_path() if paths is None else paths:
        root = entry / "ansible_collections"
        if not root.is_dir():
            continue
        for directory in sorted(root.glob("*/*")):
            name = f"{directory.parent.name}.{directory.name}"
            if name not in found and directory.is_dir():
                version = _collection_version(directory)
                if version is not None:
                    found[name] = version
    return found


def _collection_version(directory: Path) -> str | None:
    try:
        manifest = json.loads((directory / "MANIFEST.json").read_text(encoding="utf-8"))
        return str(manifest["collection_info"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        galaxy = yaml.safe_load((directory / "galaxy.yml").read_text(encoding="utf-8"))
        return str(galaxy["version"])
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        return None
