"""Reading the YAML files packaging takes in, and the JSON form catalogs hold.

Reading accepts multi-document files and skips empty documents. Packaging writes its
YAML with the one writer, `runner.util.yamlwriter`, in its `CANONICAL` style (sorted keys,
so regenerating gives identical bytes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from runner.errors import ConfigError
from runner.util.yamlerror import describe_yaml_error


def to_json(data: Any) -> str:
    """Compact JSON with sorted keys (what Go's json.Marshal gives for maps)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def load_all_text(text: str, *, source: str) -> list[Any]:
    """Every non-empty document of `text`; `source` names it in errors."""
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML {describe_yaml_error(exc)}") from exc


def load_all(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    return load_all_text(text, source=str(path))


def load_one(path: Path) -> Any:
    """The single document of `path` (None when the file is empty)."""
    documents = load_all(path)
    if len(documents) > 1:
        raise ConfigError(f"{path}: expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None
