"""YAML as the scaffolded files write it, and small edits that keep a file's comments.

Renderers build plain data and dump it here, so every file has the same style: the one
YAML writer's `EDITABLE` style (block lists indented under their key, keys in the order
given, no line wrapping), each document opened by `---`. `create api`
extends files a user may have edited and commented; the edits below therefore work on
the text and are checked by parsing the result, never by re-dumping the whole file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import yaml

from runner.errors import ConfigError
from runner.util import yamlwriter
from runner.util.yamlerror import describe_yaml_error
from runner.util.yamlwriter import EDITABLE

__all__ = ["add_list_item", "append_block", "dump", "dump_all", "leading_comments", "load"]


def dump(data: Any, *, header: str = "", start: bool = True) -> str:
    """One document in the scaffold's style (`yamlwriter.EDITABLE`), opened by `---`."""
    return yamlwriter.dump(data, style=EDITABLE, header=header, start=start)


def dump_all(documents: Sequence[Any], *, header: str = "") -> str:
    """Several documents in the scaffold's style, each opened by `---`."""
    return yamlwriter.dump_all(documents, style=EDITABLE, header=header)


def load(text: str, *, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML {describe_yaml_error(exc)}") from None


def leading_comments(text: str) -> str:
    """The comment lines (and blank lines) a file opens with, kept when it is rewritten."""
    kept = []
    for line in text.splitlines(keepends=True):
        if line.strip() and not line.lstrip().startswith("#"):
            break
        kept.append(line)
    return "".join(kept)


def append_block(text: str, block: str) -> str:
    """`block` after the last line of `text` (which gets a final newline if it lacks one)."""
    if text and not text.endswith("\n"):
        text += "\n"
    return text + block


_EMPTY_FLOW = re.compile(r"^(?P<key>[A-Za-z_][\w-]*):\s*\[\]\s*(#.*)?$")


def add_list_item(text: str, key: str, item: str, *, source: str) -> str:
    """Add the string `item` to the top-level list `key` of the YAML `text`, keeping the
    rest of the text (comments included) as it is; unchanged if the item is there.

    Handles `key: []`, a block list (the new line goes after its last item, with the same
    indentation) and a missing key (appended at the end). Raises ConfigError when the
    file has another shape, naming the file and what to add by hand.
    """
    data = load(text, source=source) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with {key!r}; add {item!r} by hand")
    current = data.get(key)
    if isinstance(current, list) and item in current:
        return text
    if current is not None and not isinstance(current, list):
        raise ConfigError(f"{source}: {key!r} is not a list; add {item!r} by hand")
    lines = text.splitlines(keepends=True)
    edited = _insert(lines, key, item)
    result = "".join(edited) if edited is not None else append_block(text, f"{key}:\n  - {item}\n")
    try:
        after = load(result, source=source)
    except ConfigError:
        after = None
    if not isinstance(after, dict) or after.get(key) != [*(current or []), item]:
        raise ConfigError(f"{source}: cannot add {item!r} to {key!r} automatically; add it by hand")
    return result


def _insert(lines: list[str], key: str, item: str) -> list[str] | None:
    for index, line in enumerate(lines):
        flow = _EMPTY_FLOW.match(line.rstrip("\n"))
        if flow and flow.group("key") == key:
            return [*lines[:index], f"{key}:\n", f"  - {item}\n", *lines[index + 1 :]]
        if line.rstrip() == f"{key}:":
            return _insert_after_items(lines, index, item)
    return None


def _insert_after_items(lines: list[str], start: int, item: str) -> list[str]:
    last, indent = start, "  "
    for index in range(start + 1, len(lines)):
        stripped = lines[index].strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("- ") or stripped == "-":
            last = index
            indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
            continue
        if lines[index][:1] in (" ", "\t"):
            last = index  # a continuation of the previous item
            continue
        break
    if last < len(lines) and not lines[last].endswith("\n"):
        lines = [*lines[:last], lines[last] + "\n", *lines[last + 1 :]]
    return [*lines[: last + 1], f"{indent}- {item}\n", *lines[last + 1 :]]
