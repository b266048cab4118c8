"""One YAML style for everything packaging writes, so regenerating gives identical bytes.

Keys are sorted (as operator-sdk's output is, since it goes through Go maps), sequences
sit at their key's indentation, multi-line strings are literal blocks (`|-`), and lines
are never folded. Reading accepts multi-document files and skips empty documents.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from runner.errors import ConfigError
from runner.yamlerror import describe_yaml_error


class _Dumper(yaml.SafeDumper):
    """SafeDumper with literal blocks for multi-line strings."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _represent_str)


def dump(data: Any) -> str:
    """One YAML document in the packaging style (no leading `---`)."""
    text: str = yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 16,
    )
    return text


def dump_all(documents: Iterable[Any]) -> str:
    """Several documents, each introduced by `---` (the way opm writes catalogs)."""
    return "".join("---\n" + dump(document) for document in documents)


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
