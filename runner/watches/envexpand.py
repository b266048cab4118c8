"""`$NAME` / `${NAME}` in watches.yaml, expanded as the Go operator expands them.

The original ran Go's os.Expand over the whole file with a look-up that keeps unknown
names: an unset variable stays in the text as `${NAME}`, a set but empty one leaves
nothing. Either is a likely mistake (a deployment that forgot the variable), so
`expand_traced` also reports, per reference, where it was and which of the two it was:
watches.py names the variable in its warnings and in the error it leads to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["Expansion", "expand_env", "expand_traced"]

_SPECIAL_VARS: Final = frozenset("*#$@!?-0123456789")


@dataclass(frozen=True)
class Expansion:
    """A reference that expanded to nothing, or was left as text because it is unset."""

    name: str
    line: int  # 1-based, in the expanded text
    state: Literal["empty", "unset"]

    def describe(self) -> str:
        if self.state == "empty":
            return f"${{{self.name}}} expanded to nothing (the variable is set but empty)"
        return (
            f"${{{self.name}}} is not set, so the text ${{{self.name}}} was kept "
            "(as the Go operator keeps it)"
        )


def _shell_name(text: str, start: int) -> tuple[str, int]:
    """The variable name after a `$` at `start - 1`, and how many characters it spans."""
    if text[start] == "{":
        if len(text) - start > 2 and text[start + 1] in _SPECIAL_VARS and text[start + 2] == "}":
            return text[start + 1], 3
        end = text.find("}", start + 1)
        if end == -1:
            return "", 1  # bad syntax: "${" is dropped
        return text[start + 1 : end], end - start + 1  # "${}" gives "" and is dropped
    if text[start] in _SPECIAL_VARS:
        return text[start], 1
    end = start
    while end < len(text) and (text[end] == "_" or (text[end].isascii() and text[end].isalnum())):
        end += 1
    return text[start:end], end - start


def expand_traced(text: str, environ: Mapping[str, str]) -> tuple[str, tuple[Expansion, ...]]:
    """Expand with Go's os.Expand rules (unset names become `${NAME}`); also return the
    references that were empty or unset, with their line in the result."""
    out: list[str] = []
    traced: list[Expansion] = []
    line = 1
    copied = 0
    index = 0
    while index < len(text):
        if text[index] == "$" and index + 1 < len(text):
            chunk = text[copied:index]
            out.append(chunk)
            line += chunk.count("\n")
            name, width = _shell_name(text, index + 1)
            if name:
                value = environ.get(name)
                if value is None:
                    traced.append(Expansion(name, line, "unset"))
                    value = "${" + name + "}"
                elif not value:
                    traced.append(Expansion(name, line, "empty"))
                out.append(value)
                line += value.count("\n")
            elif width == 0:
                out.append("$")  # a lone "$" stays
            index += width
            copied = index + 1
        index += 1
    out.append(text[copied:])
    return "".join(out), tuple(traced)


def expand_env(text: str, environ: Mapping[str, str]) -> str:
    """Expand `$NAME` / `${NAME}` with Go's os.Expand rules; unset names become `${NAME}`."""
    return expand_traced(text, environ)[0]
