"""Edits `create api` makes to files that already exist: watches.yaml and the manager role.

Both files are meant to be edited by hand, so the new entry is appended as text (the
user's comments and layout stay) and the result is parsed to prove the edit did what it
should; a file of an unexpected shape is an error that says what to add by hand.
"""

from __future__ import annotations

import re
from typing import Any

from runner.devtools.scaffold import yamltext
from runner.devtools.scaffold.files.api import manager_rules, manager_rules_block, watch_entry_block
from runner.devtools.scaffold.names import Resource
from runner.errors import ConfigError

__all__ = ["add_rules", "add_watch"]

_EMPTY_LIST_LINE = re.compile(r"^\[\]\s*(#.*)?$")


def _same_gvk(entry: Any, resource: Resource) -> bool:
    return isinstance(entry, dict) and (
        str(entry.get("group", "")),
        str(entry.get("version", "")),
        str(entry.get("kind", "")),
    ) == (resource.full_group, resource.version, resource.kind)


def _reparse(text: str, *, source: str) -> Any:
    """The data of an edited text, or None when the edit broke the YAML."""
    try:
        return yamltext.load(text, source=source)
    except ConfigError:
        return None


def add_watch(text: str, resource: Resource, *, playbook: bool, source: str) -> str:
    """watches.yaml with an entry for `resource` appended."""
    data = yamltext.load(text, source=source)
    block = watch_entry_block(resource, playbook=playbook)
    if data is None or data == []:
        kept = [line for line in text.splitlines(keepends=True) if not _EMPTY_LIST_LINE.match(line)]
        result = yamltext.append_block("".join(kept), block)
        before: list[Any] = []
    elif isinstance(data, list):
        if any(_same_gvk(entry, resource) for entry in data):
            raise ConfigError(f"{source}: already has an entry for {resource.gvk_text()}")
        result = yamltext.append_block(text, block)
        before = data
    else:
        raise ConfigError(f"{source}: expected a list of watches; add this entry by hand:\n{block}")
    after = _reparse(result, source=source)
    if after != [*before, *yamltext.load(block, source=source)]:
        raise ConfigError(f"{source}: cannot append the entry automatically; add by hand:\n{block}")
    return result


def add_rules(text: str, resource: Resource, *, source: str) -> str:
    """config/rbac/role.yaml with the rules for `resource` appended to `rules`."""
    data = yamltext.load(text, source=source)
    block = manager_rules_block(resource)
    rules = data.get("rules") if isinstance(data, dict) else None
    if not isinstance(rules, list):
        raise ConfigError(f"{source}: expected a ClusterRole with `rules`; add by hand:\n{block}")
    new = manager_rules(resource)
    if all(rule in rules for rule in new):
        return text
    result = yamltext.append_block(text, block)
    after = _reparse(result, source=source)
    if not isinstance(after, dict) or after.get("rules") != [*rules, *new]:
        raise ConfigError(
            f"{source}: `rules` is not the last key, so the rules cannot be appended "
            f"automatically; add them to `rules` by hand:\n{block}"
        )
    return result
