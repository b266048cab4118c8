"""How this ansible-operator was installed: what `version` reports, and what a new
project's Makefile installs when the command is not on PATH.

Read from the installed distribution's metadata: `direct_url.json` (PEP 610) says where
pip took it from (an editable checkout, a directory, a wheel or sdist file or URL; no
such file: a package index), and the environment says who ran pip: pipx leaves
`pipx_metadata.json` in the virtualenv it made, `uv tool install` leaves
`uv-receipt.toml`. A package imported from a tree nobody installed is a source tree.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from runner import DISTRIBUTION

__all__ = ["Installation", "detect", "index_options"]

# pip options naming an index, carried from pipx's record into a project's Makefile.
_INDEX_OPTIONS = ("--index-url", "-i", "--extra-index-url")


@dataclass(frozen=True)
class Installation:
    """Where the running package came from."""

    tool: str  # pip, pipx, uv tool, editable, source tree
    origin: str  # a checkout, directory, file or URL; "" for a package index
    prefix: str = ""  # the environment it is installed in
    index_args: tuple[str, ...] = ()  # pip's index options the installer recorded

    @property
    def checkout(self) -> str:
        """The checkout it runs from (editable install or source tree), else ""."""
        return self.origin if self.tool in ("editable", "source tree") else ""

    def describe(self) -> str:
        """One line for `version`: who installed it, where, and from what."""
        where = f" in {self.prefix}" if self.prefix else ""
        if self.tool == "source tree":
            return f"not installed: imported from the source tree {self.origin}"
        if self.tool == "editable":
            return f"editable{where}, from the checkout {self.origin}"
        return f"{self.tool}{where}, from {_origin_words(self.origin)}"

    def pip_install_args(self, version: str) -> str:
        """What `pip install` needs to install this same ansible-operator again, as
        Makefile words: the wheel, archive or directory it came from, else this version
        from the package index (with the index options pipx recorded, if any)."""
        if self.origin and not self.checkout:
            return _quoted(self.origin)
        return " ".join([*self.index_args, _quoted(f"{DISTRIBUTION}=={version}")])


def _origin_words(origin: str) -> str:
    if not origin:
        return "a package index"
    if origin.endswith(".whl"):
        return f"the wheel {origin}"
    if origin.endswith((".tar.gz", ".zip")):
        return f"the archive {origin}"
    return origin if "://" in origin else f"the directory {origin}"


def _quoted(word: str) -> str:
    return f"'{word}'" if any(c in word for c in " \t$#;&|<>()*?[]") else word


def detect(prefix: str | None = None) -> Installation:
    """How the imported `runner` package was installed."""
    import runner

    package = Path(runner.__file__).resolve().parent
    environment = sys.prefix if prefix is None else prefix
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return Installation("source tree", str(package.parent))
    direct = _direct_url(dist)
    url = str(direct.get("url", ""))
    if (direct.get("dir_info") or {}).get("editable"):
        return Installation("editable", _local_path(url), environment)
    installed = Path(str(dist.locate_file("runner"))).resolve()
    if installed != package:  # another copy is imported (e.g. a tree on PYTHONPATH)
        return Installation("source tree", str(package.parent))
    tool = "pip"
    index_args: tuple[str, ...] = ()
    if (Path(environment) / "pipx_metadata.json").is_file():
        tool = "pipx"
        index_args = index_options(_pipx_pip_args(Path(environment)))
    elif (Path(environment) / "uv-receipt.toml").is_file():
        tool = "uv tool"
    origin = _local_path(url) if url.startswith("file:") else url
    if "vcs_info" in direct and origin:
        origin = f"{direct['vcs_info'].get('vcs', 'git')}+{origin}"
    return Installation(tool, origin, environment, index_args)


def _direct_url(dist: metadata.Distribution) -> dict[str, Any]:
    try:
        data = json.loads(dist.read_text("direct_url.json") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _local_path(url: str) -> str:
    parsed = urlparse(url)
    return unquote(parsed.path) if parsed.scheme == "file" else url


def _pipx_pip_args(venv: Path) -> list[str]:
    try:
        data = json.loads((venv / "pipx_metadata.json").read_text(encoding="utf-8"))
        args = data["main_package"]["pip_args"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [str(arg) for arg in args] if isinstance(args, list) else []


def index_options(pip_args: list[str]) -> tuple[str, ...]:
    """The index options among `pip_args`, as `--option=value` words; an index whose
    URL carries credentials is left out (they would end up in a project's Makefile)."""
    found: list[str] = []
    words = iter(pip_args)
    for word in words:
        name, sep, value = word.partition("=")
        if name not in _INDEX_OPTIONS:
            continue
        if not sep:
            value = next(words, "")
        if value and "@" not in urlparse(value).netloc:
            option = "--index-url" if name == "-i" else name
            found.append(f"{option}={value}")
    return tuple(found)
