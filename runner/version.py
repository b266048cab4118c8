"""Versions of this runtime and of what it runs with."""

from __future__ import annotations

import platform
from importlib import metadata

from runner import __version__


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
    ]
