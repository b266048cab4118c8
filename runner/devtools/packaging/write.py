"""The one place packaging writes files: a {relative path: content} map under a root.

Files are written in sorted order and only when their content changes. Directories
named in `owned` belong entirely to the generator: files there that the new map does not
contain are removed, so a renamed manifest never lingers in a bundle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from runner.errors import ConfigError


def write_files(root: Path, files: Mapping[str, str], *, owned: Iterable[str] = ()) -> list[Path]:
    """Write `files` under `root`; return the paths whose content changed or went away."""
    changed: list[Path] = []
    wanted = {(root / relative).resolve() for relative in files}
    for directory in owned:
        base = root / directory
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.is_file() and path.resolve() not in wanted:
                path.unlink()
                changed.append(path)
    for relative in sorted(files):
        path = root / relative
        content = files[relative]
        try:
            if path.is_file() and path.read_text(encoding="utf-8") == content:
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot write: {exc}") from exc
        changed.append(path)
    return changed
