"""Versions of this runtime and of what it runs with, and how it was installed.

The ansible-core line matters most (roles behave differently on 2.18 and 2.19, and the
start-up check of `runner.ansible.hooks` reads it), and so do the collections roles call:
each is reported as Ansible would find it for `ansible-operator run` — the first
`ansible_collections/<namespace>/<name>` along the collections path the operator sets up
(`ANSIBLE_COLLECTIONS_PATH` or its default, then the bundled `operator_sdk.util`), then
the interpreter's own (`site-packages/ansible_collections`, the `ansible` distribution).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from runner import __version__
from runner.ansible import hooks, requirements
from runner.ansible.bundledcollection import bundled_collections_path
from runner.cli import installation

__all__ = ["REPORTED_COLLECTIONS", "collection_search_path", "version_lines"]

REPORTED_COLLECTIONS = ("kubernetes.core", "operator_sdk.util")
_DEFAULT_COLLECTIONS_PATH = "/usr/share/ansible/collections:~/.ansible/collections"


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def collection_search_path(environ: Mapping[str, str]) -> list[Path]:
    """The `ansible_collections` directories `ansible-operator run`'s Ansible searches."""
    configured = environ.get("ANSIBLE_COLLECTIONS_PATH", _DEFAULT_COLLECTIONS_PATH)
    return requirements.search_paths(f"{configured}:{bundled_collections_path()}", sys.path)


def version_lines(environ: Mapping[str, str] | None = None) -> list[str]:
    core = hooks.installed_core_version()
    core_line = f"ansible-core version: {core or 'not installed'}"
    if core is not None:
        core_line += f" ({_support(core)})"
    lines = [
        f"ansible-operator version: {__version__}",
        f"installed: {installation.detect().describe()}",
        core_line,
        f"ansible version: {_dist_version('ansible')}",
        f"ansible-runner version: {_dist_version('ansible-runner')}",
    ]
    search = collection_search_path(os.environ if environ is None else environ)
    found = requirements.installed_versions(REPORTED_COLLECTIONS, search)
    for name in REPORTED_COLLECTIONS:
        installed = found.get(name)
        shown = f"{installed.version} ({installed.path})" if installed else "not found"
        lines.append(f"{name} collection version: {shown}")
    lines += [
        f"python version: {platform.python_version()}",
        f"kubernetes client version: {_dist_version('kubernetes')}",
        f"kubernetes-asyncio version: {_dist_version('kubernetes-asyncio')}",
        f"os/arch: {platform.system().lower()}/{platform.machine()}",
    ]
    return lines


def _support(core: str) -> str:
    left_out = hooks.plan(core, hooks=hooks.BACKEND_HOOKS).left_out
    if not left_out:
        return "supported"
    tested = ", ".join(hooks.tested_lines(hooks.BACKEND_HOOKS))
    return f"not tested: runs go the plain ansible-runner way; tested lines: {tested}"
