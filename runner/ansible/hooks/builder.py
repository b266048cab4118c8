"""ansible-core's module builder (`module_common._find_module_utils`) on each line.

Two hooks wrap the function that turns a module's source into what the target runs
(`direct`, `payloads`). Its shape differs between the lines they support:

- 2.19 takes keyword-only arguments (`become_plugin`, ...) and returns a `_BuiltModule`;
  AnsiballZ extensions (debugger, coverage) come from `_builder.ExtensionManager`, and the
  payload cache file is `<fqn>-<compression>-<extensions>`;
- 2.18 is called with seven positional arguments and keywords (`become`, ...), returns
  `(module data, style, shebang)`; coverage, its only extension, is switched on by
  `_ANSIBLE_COVERAGE_CONFIG`, and the cache file is `<fqn>-<compression>`.

Everything here reads ansible-core lazily: the module imports nothing of it.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Extensions", "arguments", "becomes", "cache_file", "extensions", "modern"]

_COVERAGE_ENV = "_ANSIBLE_COVERAGE_CONFIG"
_signatures: dict[Callable[..., Any], inspect.Signature] = {}


def modern(module_common: Any) -> bool:
    """ansible-core 2.19's builder (`_BuiltModule`), else 2.18's."""
    return hasattr(module_common, "_BuiltModule")


def arguments(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The call's arguments by name, however they were passed (`TypeError` as the call
    itself would raise it)."""
    signature = _signatures.get(function)
    if signature is None:
        signature = _signatures[function] = inspect.signature(function)
    bound = signature.bind(*args, **kwargs)
    return dict(bound.arguments)


def becomes(called: Mapping[str, Any]) -> bool:
    """The task uses become (2.19: a become plugin; 2.18: the `become` flag)."""
    return called.get("become_plugin") is not None or bool(called.get("become"))


@dataclass(frozen=True)
class Extensions:
    """The AnsiballZ extensions a payload is built with."""

    names: tuple[str, ...]
    debugger: bool

    @property
    def key(self) -> str:
        return "~".join(self.names) if self.names else "none"


def extensions(module_common: Any, task_vars: Mapping[str, Any]) -> Extensions:
    """The extensions this task's payload gets."""
    if modern(module_common):
        from ansible._internal._ansiballz import _builder

        found = _builder.ExtensionManager.create(task_vars=dict(task_vars))
        return Extensions(
            names=tuple(found.extension_names or ()), debugger=bool(found.debugger_enabled)
        )
    return Extensions(names=("coverage",) if os.environ.get(_COVERAGE_ENV) else (), debugger=False)


def cache_file(module_common: Any, *, fqn: str, compression: str, found: Extensions) -> str:
    """Where ansible-core caches the payload zip of `fqn` for one ansible-playbook run."""
    from ansible import constants

    parts = [fqn, compression]
    if modern(module_common):
        parts.append(found.key)
    return os.path.join(constants.DEFAULT_LOCAL_TMP, "ansiballz_cache", "-".join(parts))
