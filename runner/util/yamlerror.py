"""One line for a YAML syntax error: where it is and what is wrong.

PyYAML's own text spans several lines (the context, the problem, a snippet with a caret,
and `<unicode string>` for the file name); a message for a person names the file itself
and needs only the position and the problem.
"""

from __future__ import annotations

import yaml

__all__ = ["describe_yaml_error"]


def describe_yaml_error(err: yaml.YAMLError) -> str:
    """`at line L, column C: <context>; <problem>` (1-based), or the error's first line."""
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        where = f"at line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = "; ".join(part for part in (err.context, err.problem) if part)
        return f"{where}{problem}"
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
