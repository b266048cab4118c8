"""The one YAML writer: every YAML file the project generates is dumped here.

Renderers build plain data and hand it to `dump` / `dump_all` with one of two styles,
because the files have two kinds of reader:

* `EDITABLE`, for scaffolded files a person goes on to edit: keys stay in the order the
  renderer gave, block lists are indented under their key (`key:\\n  - item`), and a
  string that would read back as something else (`"3"`, `"true"`, `""`) is double-quoted;
* `CANONICAL`, for bundles and catalogs that must regenerate byte for byte: keys sorted
  (as operator-sdk's output is, since it goes through Go maps) and lists at their key's
  indentation, the way Go's YAML encoder writes them.

Both write multi-line strings as literal blocks (`|`), never fold long lines (the width
is only a bound) and never write anchors: a shared sub-object is written out in full
wherever it appears, so a reader never meets `&id001` / `*id001`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar

import yaml

__all__ = ["CANONICAL", "EDITABLE", "YamlStyle", "dump", "dump_all"]


@dataclass(frozen=True)
class YamlStyle:
    """How a document is laid out; see the module docstring for the two in use."""

    sort_keys: bool
    indent_sequences: bool
    quote_ambiguous: bool
    width: int


EDITABLE = YamlStyle(sort_keys=False, indent_sequences=True, quote_ambiguous=True, width=4096)
CANONICAL = YamlStyle(sort_keys=True, indent_sequences=False, quote_ambiguous=False, width=1 << 16)

_STR_TAG = "tag:yaml.org,2002:str"


class _Dumper(yaml.SafeDumper):
    # Not `style`: PyYAML's emitter keeps its own attribute of that name.
    layout: ClassVar[YamlStyle]

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, indentless and not self.layout.indent_sequences)

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: _Dumper, value: str) -> yaml.ScalarNode:
    style: str | None = None
    if "\n" in value:
        style = "|"
    elif dumper.layout.quote_ambiguous and (not value or _resolve(dumper, value) != _STR_TAG):
        style = '"'
    return dumper.represent_scalar(_STR_TAG, value, style=style)


def _resolve(dumper: yaml.SafeDumper, value: str) -> Any:
    """The tag a plain scalar `value` would be read back with."""
    return dumper.resolve(yaml.ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]


_Dumper.add_representer(str, _str)


@cache
def _dumper(style: YamlStyle) -> type[_Dumper]:
    return type(f"_Dumper_{id(style)}", (_Dumper,), {"layout": style})


def dump(data: Any, *, style: YamlStyle, header: str = "", start: bool = False) -> str:
    """One YAML document: optional `# header` lines, `---` when `start`, then the data."""
    body: str = yaml.dump(
        data,
        Dumper=_dumper(style),
        sort_keys=style.sort_keys,
        default_flow_style=False,
        allow_unicode=True,
        width=style.width,
    )
    return _comment(header) + ("---\n" if start else "") + body


def dump_all(documents: Iterable[Any], *, style: YamlStyle, header: str = "") -> str:
    """Several documents, each opened by `---` (the way opm writes catalogs)."""
    return _comment(header) + "".join(dump(doc, style=style, start=True) for doc in documents)


def _comment(header: str) -> str:
    return "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
