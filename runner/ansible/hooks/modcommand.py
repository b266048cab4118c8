"""What the `local` connection is asked to run, read without running it (pure).

The `modexec` hook (`modexec.py`) runs allow-listed Python modules as forks of the warm
worker, or in process, instead of new interpreters. Whether a command is one of those is
decided here, by tables of cases: whether a command the connection is given is a
pipelined Python module for this very interpreter (`parse_module_command`), which module
the AnsiballZ wrapper on its stdin carries, on ansible-core 2.18 or 2.19
(`parse_wrapper`), and whether that module may run that way (`in_process_allowed`).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "IN_PROCESS_PREFIXES",
    "ModuleCommand",
    "WrapperArgs",
    "in_process_allowed",
    "parse_module_command",
    "parse_wrapper",
]

IN_PROCESS_PREFIXES = (
    "ansible_collections.kubernetes.core.plugins.modules.",
    "ansible_collections.operator_sdk.util.plugins.modules.",
    "ansible.modules.",
)
"""Python modules run as a fork of the worker instead of a new interpreter: the ones
operator roles run on every reconcile, checked to give the same results either way.
Anything else (other collections, `library/` modules, async, become) runs as usual."""

_MAIN_MARKER = 'if __name__ == "__main__":\n    _ansiballz_main('
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_MAIN_CALL_2_18 = "if __name__ == '__main__':\n    _ansiballz_main()"
_ZIPDATA_2_18 = re.compile(r"^    ZIPDATA = ('[A-Za-z0-9+/=]*')$", re.MULTILINE)
_RUN_MODULE_2_18 = re.compile(
    r"^        runpy\.run_module\(mod_name=('[A-Za-z0-9_.]+'), init_globals=dict\(", re.MULTILINE
)


@dataclass(frozen=True)
class ModuleCommand:
    """A pipelined module command: `/bin/sh -c '[VAR=value ...] <python> && sleep 0'`."""

    interpreter: str
    environment: dict[str, str]
    cwd: str | None = None
    """Where the connection runs it (the task's directory), when it says."""


def parse_module_command(cmd: object, *, executable: str) -> ModuleCommand | None:
    """The interpreter and environment prefix of a pipelined Python module, else None.

    With pipelining, Ansible runs a module as `<executable> -c '<env> <python> && sleep 0'`
    with the AnsiballZ wrapper on stdin (`ActionBase._low_level_execute_command`). Any
    other shape (a `cd`, a redirection, become, a script path) is not ours to run.
    """
    if not isinstance(cmd, str):
        return None
    try:
        outer = shlex.split(cmd)
    except ValueError:
        return None
    if len(outer) != 3 or outer[0] != executable or outer[1] != "-c":
        return None
    try:
        inner = shlex.split(outer[2])
    except ValueError:
        return None
    if inner[-3:] != ["&&", "sleep", "0"]:
        return None
    words = inner[:-3]
    environment: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        environment[name] = value
    if len(words) != 1 or not os.path.isabs(words[0]):
        return None
    # Only what Ansible itself writes (every value quoted): nothing the shell would expand.
    assignments = [f"{name}={shlex.quote(value)}" for name, value in environment.items()]
    canonical = " ".join([*assignments, shlex.quote(words[0])]) + " && sleep 0"
    if outer[2] != canonical or cmd != f"{executable} -c {shlex.quote(canonical)}":
        return None
    return ModuleCommand(interpreter=words[0], environment=environment)


@dataclass(frozen=True)
class WrapperArgs:
    """What an AnsiballZ wrapper will run."""

    module_fqn: str
    zip_data: str
    """The base64 payload: the module and the module_utils it imports."""

    @property
    def module_member(self) -> str:
        """The module's own source inside the payload."""
        return self.module_fqn.replace(".", "/") + ".py"


def parse_wrapper(source: bytes) -> WrapperArgs | None:
    """What an AnsiballZ wrapper runs: the arguments of the `_ansiballz_main(...)` call
    ending it (ansible-core 2.19), or its `ZIPDATA` and `runpy.run_module(mod_name=...)`
    (2.18's wrapper, which ends in `_ansiballz_main()`)."""
    text = source.decode("utf-8", errors="replace")
    start = text.rfind(_MAIN_MARKER)
    if start < 0:
        return _parse_wrapper_2_18(text)
    try:
        tree = ast.parse(text[start:])
    except SyntaxError:
        return None
    statement = tree.body[0] if tree.body else None
    if not isinstance(statement, ast.If) or len(statement.body) != 1:
        return None
    call = statement.body[0]
    if not isinstance(call, ast.Expr) or not isinstance(call.value, ast.Call):
        return None
    values: dict[str, Any] = {}
    for keyword in call.value.keywords:
        if keyword.arg in ("module_fqn", "zip_data"):
            try:
                values[keyword.arg] = ast.literal_eval(keyword.value)
            except ValueError:
                return None
    fqn, data = values.get("module_fqn"), values.get("zip_data")
    if not isinstance(fqn, str) or not isinstance(data, str):
        return None
    return WrapperArgs(module_fqn=fqn, zip_data=data)


def _parse_wrapper_2_18(text: str) -> WrapperArgs | None:
    if not text.rstrip().endswith(_MAIN_CALL_2_18):
        return None
    zip_found = _ZIPDATA_2_18.findall(text)
    fqn_found = _RUN_MODULE_2_18.findall(text)
    if len(zip_found) != 1 or len(fqn_found) != 1:
        return None
    try:
        data, fqn = ast.literal_eval(zip_found[0]), ast.literal_eval(fqn_found[0])
    except (ValueError, SyntaxError):
        return None
    if not isinstance(fqn, str) or not isinstance(data, str):
        return None
    return WrapperArgs(module_fqn=fqn, zip_data=data)


def in_process_allowed(module_fqn: str, prefixes: Sequence[str] = IN_PROCESS_PREFIXES) -> bool:
    """Whether the module may run as a fork of the worker (see `IN_PROCESS_PREFIXES`)."""
    if not all(part.isidentifier() for part in module_fqn.split(".")):
        return False
    return any(module_fqn.startswith(prefix) for prefix in prefixes)
