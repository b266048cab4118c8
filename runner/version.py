"""Versions of this runtime and of what it runs with.

The ansible-core line matters most (roles behave differently on 2.18 and 2.19, and the
start-up check of `runner.ansible.hooks` reads it), and so do the collections roles call:
each is reported as Ansible would find it for `ansible-operator run` — the first
`ansible_collections/<namespace>/<name>` along the collections path the operator sets up
(`ANSIBLE_COLLECTIONS_PATH` or its default, then the bundled `operator_sdk.util`), then
the interpreter's own (`site-packages/ansible_collections`, the `ansible` distribution).
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

import yaml

from runner import __version__
from runner.ansible import hooks
from runner.collections_path import bundled_collections_path

__all__ = ["REPORTED_COLLECTIONS", "collection_version", "version_lines"]

REPORTED_COLLECTIONS = ("kubernetes.core", "operator_sdk.util")
_DEFAULT_COLLECTIONS_PATH = "/usr/share/ansible/collections:~/.ansible/collections"


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def collection_search_path(environ: Mapping[str, str]) -> list[Path]:
    """Where `ansible-operator run`'s Ansible looks for collections, in its order."""
    configured = environ.get("ANSIBLE_COLLECTIONS_PATH", _DEFAULT_COLLECTIONS_PATH)
    entries = [Path(entry).expanduser() for entry in configured.split(os.pathsep) if entry]
    entries.append(bundled_collections_path())
    entries += [Path(entry) for entry in sys.path if entry]
    return entries


def collection_version(name: str, search: Sequence[Path]) -> tuple[str, Path] | None:
    """(version, directory) of the first collection `name` (`namespace.name`) along
    `search`, as Ansible would load it; None when there is none."""
    namespace, _, short = name.partition(".")
    for root in search:
        directory = root / "ansible_collections" / namespace / short
        if not directory.is_dir():
            continue
        return _read_version(directory) or "unknown", directory
    return None


def _read_version(directory: Path) -> str | None:
    """A collection's version: its MANIFEST.json (installed) or galaxy.yml (source)."""
    try:
        manifest = json.loads((directory / "MANIFEST.json").read_text(encoding="utf-8"))
        version = manifest["collection_info"]["version"]
        return str(version) if version else None
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        galaxy = yaml.safe_load((directory / "galaxy.yml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    version = galaxy.get("version") if isinstance(galaxy, dict) else None
    return str(version) if version else None


def version_lines(environ: Mapping[str, str] | None = None) -> list[str]:
    core = hooks.installed_core_version()
    core_line = f"ansible-core version: {core or 'not installed'}"
    if core is not None:
        core_line += f" ({_support(core)})"
    lines = [
        f"ansible-operator version: {__version__}",
        core_line,
        f"ansible version: {_dist_version('ansible')}",
        f"ansible-runner version: {_dist_version('ansible-runner')}",
    ]
    search = collection_search_path(os.environ if environ is None else environ)
    for name in REPORTED_COLLECTIONS:
        found = collection_version(name, search)
        shown = f"{found[0]} ({found[1]})" if found else "not found"
        lines.append(f"{name} collection version: {shown}")
    lines += [
        f"python version: {platform.python_version()}",
        f"kubernetes client version: {_dist_version('kubernetes')}",
        f"kubernetes-asyncio version: {_dist_version('kubernetes-asyncio')}",
        f"os/arch: {platform.system().lower()}/{platform.machine()}",
    ]
    return lines


def _support(core: str) -> str:
    left_out = hooks.plan(core).left_out
    if not left_out:
        return "supported"
    tested = ", ".join(hooks.tested_lines())
    return f"not tested: runs go the plain ansible-runner way; tested lines: {tested}"
