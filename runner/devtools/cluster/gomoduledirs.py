"""Where the Go wrapper modules are: package data of `runner.devtools`, as a directory.

The wrapper modules (`go.mod`, `go.sum`, `tools.go`, the files the builds add to module
copies, OLM v1's stand-in module) ship inside the package, under
`runner/devtools/gomodules/{cluster,tools}/<module>/`, and are found through
`importlib.resources`, so a wheel install builds the same binaries as a checkout. `go`
needs a real directory: an installed package (a checkout, a wheel unpacked into
site-packages) has one; a package imported from a zip archive gets its modules copied
once into `<cache>/gomodules/<digest of their content>/`. The binary cache is keyed by
versions and file contents only (see `build.binary_path`), never by where the modules
are, so both places share it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from runner.errors import ClusterError

__all__ = ["PACKAGE", "RESOURCE", "cluster_dir", "content_digest", "module_root", "tools_dir"]

# The package whose data holds the modules, and the directory name inside it.
PACKAGE = "runner.devtools"
RESOURCE = "gomodules"


def module_root(cache: Path | None = None) -> Path:
    """The `gomodules` directory, as a real directory `go` can build in."""
    found = resources.files(PACKAGE) / RESOURCE
    if isinstance(found, Path):
        if not (found / "cluster").is_dir():
            raise ClusterError(
                f"{found}: the Go wrapper modules are missing from this installation of "
                "ansible-operator (reinstall it; a wheel built by `python -m build` has them)"
            )
        return found
    return materialize(found, cache)


def cluster_dir(cache: Path | None = None) -> Path:
    """The wrapper modules of the control plane (etcd, kubernetes, kwok, registry)."""
    return module_root(cache) / "cluster"


def tools_dir(cache: Path | None = None) -> Path:
    """The wrapper modules of the tools (operator-sdk, opm, OLM v0 and v1, the Go
    ansible-operator)."""
    return module_root(cache) / "tools"


def _files(top: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    """Every file below `top` as (relative posix path, resource), sorted by path."""
    found: list[tuple[str, Traversable]] = []
    for entry in top.iterdir():
        relative = f"{prefix}{entry.name}"
        if entry.is_dir():
            found += _files(entry, relative + "/")
        elif entry.is_file():
            found.append((relative, entry))
    return sorted(found, key=lambda item: item[0])


def content_digest(top: Traversable) -> str:
    """A short digest of the relative paths and contents of every file below `top`."""
    digest = hashlib.sha256()
    for relative, entry in _files(top):
        digest.update(relative.encode() + b"\0" + entry.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def materialize(top: Traversable, cache: Path | None = None) -> Path:
    """Copy the files below `top` (a resource that is no real directory, e.g. inside a
    zip archive) once into `<cache>/gomodules/<content digest>/`; return that directory."""
    if cache is None:
        from runner.devtools.cluster.build import cache_root

        cache = cache_root()
    target = cache / RESOURCE / content_digest(top)
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=target.parent))
    try:
        for relative, entry in _files(top):
            path = partial / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(entry.read_bytes())
        try:
            os.rename(partial, target)
        except OSError:
            if not target.is_dir():  # not another process that got there first
                raise
    except OSError as exc:
        raise ClusterError(f"{target}: cannot copy the Go wrapper modules there: {exc}") from exc
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target
