"""ansible-operator: reconcile Kubernetes custom resources with Ansible.

`runner.__version__` is the installed distribution's version, which pyproject.toml's
`[project] version` (the one place it is written) sets. It is read on first use, so
that commands that never show it (`--help`, `completion`) skip importlib.metadata.
"""

from __future__ import annotations

DISTRIBUTION = "ansible-operator"
UNKNOWN_VERSION = "0+unknown"


def _installed_version() -> str:
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # imported from a tree nobody installed
        return UNKNOWN_VERSION


def __getattr__(name: str) -> str:
    if name == "__version__":
        version = _installed_version()
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
