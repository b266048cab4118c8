"""YAML read with its node tree, to say on which line a field is (and which field a line is).

A message about a hand-written YAML file (watches.yaml) names the line of the bad
field. PyYAML's plain load forgets positions, so the document is composed into nodes
first and constructed from them; `line_of` then finds a field path's line, and
`path_at` the field a line belongs to (to tie an environment variable expanded on
that line to the field it ended up in).

Field paths are `runner.util.fields.FieldPath`s, tuples of mapping keys and sequence indexes:
`("selector", "matchExpressions", 0, "key")`.
"""

from __future__ import annotations

from typing import Any

import yaml

from runner.errors import ConfigError
from runner.util.fields import FieldPath
from runner.util.yamlerror import describe_yaml_error

__all__ = ["line_of", "load_document", "path_at"]


class _Loader(yaml.SafeLoader):
    """YAML 1.1 like Go's parser, except that dates stay strings as in Go."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_document(text: str, *, source: str) -> tuple[yaml.Node | None, Any]:
    """The single document of `text` as its root node and as data (both None when empty);
    ConfigError naming `source` and the position when it is not valid YAML."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        return node, (None if node is None else loader.construct_document(node))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML {describe_yaml_error(exc)}") from None
    finally:
        loader.dispose()


def line_of(node: yaml.Node, path: FieldPath) -> int:
    """1-based line of the deepest node of `path` found below `node` (keys: their line).

    Keys match exactly first, then case-insensitively (as the fields themselves are read).
    """
    line = node.start_mark.line + 1
    for part in path:
        if isinstance(part, int) and isinstance(node, yaml.SequenceNode):
            if not 0 <= part < len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        elif isinstance(part, str) and isinstance(node, yaml.MappingNode):
            pairs = [(str(key.value), key, value) for key, value in node.value]
            found = [pair for pair in pairs if pair[0] == part] or [
                pair for pair in pairs if pair[0].casefold() == part.casefold()
            ]
            if not found:
                break
            _, key_node, node = found[0]
            line = key_node.start_mark.line + 1
        else:
            break
    return line


def _last_line(node: yaml.Node) -> int:
    """1-based last line of `node` (its end mark is just past it)."""
    end = node.end_mark
    return end.line + 1 if end.column > 0 else max(end.line, node.start_mark.line + 1)


def path_at(node: yaml.Node, line: int) -> FieldPath | None:
    """The path of the deepest key under `node` whose key or value spans `line`; None
    when the line is not inside any key of the node (a comment between entries)."""
    if not node.start_mark.line + 1 <= line <= _last_line(node):
        return None
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.start_mark.line + 1 <= line <= _last_line(value):
                below = path_at(value, line)
                return (str(key.value), *(below or ()))
        return None
    if isinstance(node, yaml.SequenceNode):
        for position, item in enumerate(node.value):
            below = path_at(item, line)
            if below is not None or item.start_mark.line + 1 == line:
                return (position, *(below or ()))
        return None
    return ()
