"""The only IO of scaffolding: read a project's files, write a plan.

`apply` checks the whole plan first (no file to create may exist, every file to update
must), so a refused plan writes nothing.
"""

from __future__ import annotations

from pathlib import Path

from runner.devtools.scaffold.generate import Plan, extended_paths
from runner.devtools.scaffold.projectfile import PROJECT_FILE, parse_project
from runner.errors import ConfigError

__all__ = ["apply", "read_project_files"]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def read_project_files(root: Path) -> dict[str, str]:
    """PROJECT and the files `create api` extends, those that exist, by relative path."""
    project_path = root / PROJECT_FILE
    if not project_path.is_file():
        return {}
    files = {PROJECT_FILE: _read(project_path)}
    for relative in extended_paths(parse_project(files[PROJECT_FILE])):
        if (root / relative).is_file():
            files[relative] = _read(root / relative)
    return files


def apply(root: Path, plan: Plan) -> list[str]:
    """Write `plan` under `root`; return the relative paths written, sorted."""
    clashes = sorted(path for path in plan.create if (root / path).exists())
    if clashes:
        raise ConfigError(
            f"refusing to overwrite existing files in {root}: {', '.join(clashes)}; "
            "nothing was written"
        )
    missing = sorted(path for path in plan.update if not (root / path).is_file())
    if missing:
        raise ConfigError(f"files to extend are missing in {root}: {', '.join(missing)}")
    written = []
    for relative, text in [*plan.create.items(), *plan.update.items()]:
        target = root / relative
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{target}: cannot write: {exc}") from None
        written.append(relative)
    return sorted(written)
