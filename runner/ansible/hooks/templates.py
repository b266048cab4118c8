"""The `templates` hook: a Jinja template is compiled once, not on every use in every run.

ansible-core compiles a template each time it renders one: every `when`, every templated
task argument, every `lookup('template', ...)` file, on every task, in every run — Jinja
lexes and parses the source, generates Python source from it and Python compiles that
(ansible-core 2.19 keeps no compiled templates at all; 2.18 neither). On the installer
role of bench/realroles that is about 640 compilations a run and 10-15 % of its time,
the same sources every time.

`install()` puts a cache in front of Jinja's `Environment.compile` (a template's source)
and `Environment.compile_expression` (a conditional's): the code object Jinja produced is
kept, keyed by everything the compilation reads —

- the source, the template's name and file name, and for an expression whether it maps
  undefined to None;
- the environment's type and every setting the lexer, parser and code generator read:
  the delimiters, `trim_blocks`, `lstrip_blocks`, newline handling, line statement and
  comment prefixes, `optimized`, `is_async`, `autoescape`, `finalize`, the code generator
  class, the extensions, the sandbox's intercepted operators; on ansible-core 2.19 also
  its compile-time switches (`escape_backslashes` of the ambient compile context,
  `allow_embedded_templates`);
- the filters and tests the template names, as the compiler saw them: the generated code
  looks each one up by name when it runs, but whether it exists and what it is passed
  (context, environment, eval context, nothing) are fixed at compile time, so an entry
  records them and is used only when the environment's lookups give the same answers
  (a role's own `filter_plugins` can make them differ).

A template whose compilation evaluated a filter or test (Jinja folds `{{ '%Y' | strftime }}`
or `{{ 10 | random }}` on constants at compile time when it can: always on 2.18, whose
environments optimize) is not kept: its code holds a value of that one compilation.
Compilation errors are not kept either (the next use fails the same way). With Ansible's
template debugging switched on nothing is kept. The rendering is untouched: a cached
code object gives a new `Template` per use, exactly as a fresh compilation would.

Runs are forks of the zygote, which never renders anything itself: each run hands the
templates it compiled to the zygote when it ends (`export`: marshalled code objects, in a
file of the zygote's private directory), the zygote adds them to its cache (`absorb`,
after the run has exited), and the next runs are forked with them. Bounded: at most
`MAX_ENTRIES` entries and `MAX_SOURCE` characters of sources.
"""

from __future__ import annotations

import contextlib
import contextvars
import marshal
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

__all__ = [
    "MAX_ENTRIES",
    "MAX_SOURCE",
    "absorb",
    "cached",
    "clear",
    "export",
    "install",
    "stats",
    "uninstall",
]

MAX_ENTRIES = 20000
MAX_SOURCE = 32 * 1024 * 1024
"""Characters of template source the cache holds at most (the code objects are of the
same order of size)."""

_FILE_SUFFIX = ".templates"


@dataclass(frozen=True)
class _Entry:
    code: CodeType
    lookups: tuple[tuple[bool, str, str], ...]
    """(is a filter, name, what the compiler saw: `missing` or the pass-argument kind)."""
    size: int


@dataclass
class _Recording:
    """What one compilation touched (the tree it parsed, the filters it folded)."""

    tree: Any = None
    code: CodeType | None = None
    folded: bool = False
    expression: bool = False


@dataclass
class _State:
    entries: dict[tuple[Any, ...], _Entry] = field(default_factory=dict)
    new: dict[tuple[Any, ...], _Entry] = field(default_factory=dict)
    size: int = 0
    hits: int = 0
    misses: int = 0
    directory: str | None = None


_state = _State()
_recording: contextvars.ContextVar[_Recording | None] = contextvars.ContextVar(
    "ansible_operator_template_recording", default=None
)
_use: contextvars.ContextVar[CodeType | None] = contextvars.ContextVar(
    "ansible_operator_template_code", default=None
)
_originals: list[Any] = []
"""Jinja's own methods, while `install` has replaced them."""
_ambient: list[Any] = []
"""ansible-core 2.19's compile-time switches: `_TemplateCompileContext`, `_TemplateConfig`."""


class _Uncacheable(Exception):
    """A setting of the environment that cannot be part of a key."""


def install(directory: str | None = None) -> None:
    """Cache compiled templates in this process (and its forks); `directory`: where runs
    leave what they compiled for the zygote (`export`, `absorb`)."""
    from jinja2 import environment, nodes
    from jinja2.utils import _PassArg

    base = environment.Environment
    if getattr(base, "_runner_templates", False):
        return
    real_compile: Any = base.compile
    real_compile_expression = base.compile_expression
    real_parse = base._parse
    real_as_const = nodes._FilterTestCommon.as_const
    template_expression = environment.TemplateExpression
    _PassArg.from_obj  # noqa: B018 - fail here, not in a run, if it is gone
    _ambient[:] = _ansible_switches()

    def compile(
        self: Any,
        source: Any,
        name: str | None = None,
        filename: str | None = None,
        raw: bool = False,
        defer_init: bool = False,
    ) -> Any:
        code = _use.get()
        if code is not None:  # compile_expression's cached code, through from_string
            _use.set(None)
            return code
        recording = _recording.get()
        if not isinstance(source, str):
            if recording is not None and recording.expression and recording.code is None:
                recording.tree = source
                recording.code = real_compile(self, source, name, filename, raw, defer_init)
                return recording.code
            return real_compile(self, source, name, filename, raw, defer_init)
        key = None if raw else _key(self, ("template", source, name, filename, defer_init))
        if key is None:
            return real_compile(self, source, name, filename, raw, defer_init)
        entry = _valid(self, key, _PassArg)
        if entry is not None:
            return entry.code
        recording = _Recording()
        token = _recording.set(recording)
        try:
            code = real_compile(self, source, name, filename, raw, defer_init)
        finally:
            _recording.reset(token)
        _keep(self, key, recording, code, len(source), _PassArg)
        return code

    def compile_expression(self: Any, source: str, undefined_to_none: bool = True) -> Any:
        key = _key(self, ("expression", source, bool(undefined_to_none)))
        if key is None:
            return real_compile_expression(self, source, undefined_to_none)
        entry = _valid(self, key, _PassArg)
        if entry is not None:
            using = _use.set(entry.code)
            try:
                template = self.from_string(source)
            finally:
                _use.reset(using)
            return template_expression(template, undefined_to_none)
        recording = _Recording(expression=True)
        token = _recording.set(recording)
        try:
            result = real_compile_expression(self, source, undefined_to_none)
        finally:
            _recording.reset(token)
        if recording.code is not None:
            _keep(self, key, recording, recording.code, len(source), _PassArg)
        return result

    def parse(self: Any, source: str, name: str | None, filename: str | None) -> Any:
        tree = real_parse(self, source, name, filename)
        recording = _recording.get()
        if recording is not None and recording.tree is None:
            recording.tree = tree
        return tree

    def as_const(self: Any, eval_ctx: Any = None) -> Any:
        value = real_as_const(self, eval_ctx)  # Impossible when it cannot be folded
        recording = _recording.get()
        if recording is not None:
            recording.folded = True
        return value

    _originals[:] = [real_compile, real_compile_expression, real_parse, real_as_const]
    base.compile = compile  # type: ignore[method-assign]
    base.compile_expression = compile_expression  # type: ignore[method-assign]
    base._parse = parse  # type: ignore[method-assign]
    nodes._FilterTestCommon.as_const = as_const  # type: ignore[method-assign]
    base._runner_templates = True  # type: ignore[attr-defined]
    _state.directory = directory


def uninstall() -> None:
    """Jinja as it was before `install` (tests; the zygote never uninstalls)."""
    from jinja2 import environment, nodes

    if not _originals:
        return
    base = environment.Environment
    base.compile, base.compile_expression, base._parse, nodes._FilterTestCommon.as_const = (  # type: ignore[method-assign]
        _originals
    )
    del base._runner_templates  # type: ignore[attr-defined]
    _originals.clear()
    _state.directory = None
    clear()


def _ansible_switches() -> list[Any]:
    try:
        from ansible._internal._templating import _jinja_bits
    except ImportError:  # ansible-core 2.18: no compile-time switches of its own
        return []
    return [_jinja_bits._TemplateCompileContext, _jinja_bits._TemplateConfig]


def _plain(value: Any) -> Any:
    """A string of a key as a `str` (2.18's `AnsibleUnsafeText` and `AnsibleUnicode` are
    subclasses, which `str()` returns as they are and marshal refuses)."""
    return str.__str__(value) if isinstance(value, str) else value


def _ident(value: Any) -> Any:
    """A setting as part of a key: plain values as they are, functions and classes by
    where they are defined."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, str):
        return _plain(value)
    while hasattr(value, "__wrapped__"):
        value = value.__wrapped__
    if isinstance(value, type):
        return ("class", value.__module__, value.__qualname__)
    code = getattr(value, "__code__", None)
    if isinstance(code, CodeType):
        return (
            "function",
            getattr(value, "__module__", None),
            getattr(value, "__qualname__", None),
            code.co_filename,
            code.co_firstlineno,
        )
    raise _Uncacheable(repr(value))


def _settings(env: Any) -> tuple[Any, ...]:
    if getattr(env, "_debuggable_template_source", False):
        raise _Uncacheable("template debugging")
    ambient: tuple[Any, ...] = ()
    if _ambient:
        compile_context, config = _ambient
        current = compile_context.current(optional=True)
        ambient = (
            None if current is None else bool(current.escape_backslashes),
            bool(getattr(config, "allow_embedded_templates", False)),
        )
    return (
        _ident(type(env)),
        _ident(env.block_start_string),
        _ident(env.block_end_string),
        _ident(env.variable_start_string),
        _ident(env.variable_end_string),
        _ident(env.comment_start_string),
        _ident(env.comment_end_string),
        _ident(env.line_statement_prefix),
        _ident(env.line_comment_prefix),
        bool(env.trim_blocks),
        bool(env.lstrip_blocks),
        _ident(env.newline_sequence),
        bool(env.keep_trailing_newline),
        bool(env.optimized),
        bool(env.is_async),
        _ident(env.autoescape),
        _ident(env.finalize),
        _ident(env.code_generator_class),
        _ident(env.context_class),
        tuple((name, _ident(type(ext))) for name, ext in env.extensions.items()),
        bool(getattr(env, "sandboxed", False)),
        tuple(sorted(getattr(env, "intercepted_binops", ()))),
        tuple(sorted(getattr(env, "intercepted_unops", ()))),
        ambient,
    )


def _key(env: Any, what: tuple[Any, ...]) -> tuple[Any, ...] | None:
    try:
        return (*(_plain(part) for part in what), _settings(env))
    except _Uncacheable:
        return None
    except Exception:  # an environment unlike Jinja's own: compile as usual
        return None


def _seen(env: Any, is_filter: bool, name: str, pass_arg: Any) -> str:
    """What the compiler sees of a filter or test: whether it exists, how it is called."""
    mapping = env.filters if is_filter else env.tests
    func = mapping.get(name)
    if func is None:
        return "missing"
    kind = pass_arg.from_obj(func)
    return "plain" if kind is None else str(kind.name)


def _valid(env: Any, key: tuple[Any, ...], pass_arg: Any) -> _Entry | None:
    entry = _state.entries.get(key)
    if entry is None:
        _state.misses += 1
        return None
    try:
        for is_filter, name, seen in entry.lookups:
            if _seen(env, is_filter, name, pass_arg) != seen:
                _state.misses += 1
                return None
    except Exception:  # let the compilation meet it (and fail its own way)
        _state.misses += 1
        return None
    _state.hits += 1
    return entry


def _keep(
    env: Any,
    key: tuple[Any, ...],
    recording: _Recording,
    code: Any,
    size: int,
    pass_arg: Any,
) -> None:
    if recording.folded or recording.tree is None or not isinstance(code, CodeType):
        return
    from jinja2 import nodes

    try:
        names = sorted(
            {
                (isinstance(node, nodes.Filter), node.name)
                for node in recording.tree.find_all((nodes.Filter, nodes.Test))
            }
        )
        lookups = tuple(
            (is_filter, _plain(name), _seen(env, is_filter, name, pass_arg))
            for is_filter, name in names
        )
    except Exception:
        return
    entry = _Entry(code=code, lookups=lookups, size=size)
    if _add(key, entry):
        _state.new[key] = entry


def _add(key: tuple[Any, ...], entry: _Entry) -> bool:
    if key in _state.entries:
        return False
    if len(_state.entries) >= MAX_ENTRIES or _state.size + entry.size > MAX_SOURCE:
        return False
    _state.entries[key] = entry
    _state.size += entry.size
    return True


# -- between runs and the zygote ----------------------------------------------------------


def export() -> str | None:
    """Write the templates this process compiled (a run, at its end) for the zygote;
    returns the file, None when there was nothing new."""
    if not _state.new or _state.directory is None:
        return None
    kept = []
    for key, entry in _state.new.items():
        item = (key, entry.code, entry.lookups, entry.size)
        try:
            marshal.dumps(item)
        except ValueError:  # not plain data: this entry stays with this run
            continue
        kept.append(item)
    data = marshal.dumps(kept)
    path = os.path.join(_state.directory, f"{os.getpid()}{_FILE_SUFFIX}")
    temporary = f"{path}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)
    _state.new.clear()
    return path


def absorb() -> int:
    """Add what the runs exported to this process's cache (the zygote, between runs);
    returns the number of entries added."""
    directory = _state.directory
    if directory is None:
        return 0
    added = 0
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(directory):
            if not name.endswith(_FILE_SUFFIX):
                continue
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as handle:
                    loaded = marshal.loads(handle.read())
            except (OSError, ValueError, EOFError, TypeError):
                loaded = []
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            for key, code, lookups, size in _entries(loaded):
                added += _add(key, _Entry(code=code, lookups=lookups, size=size))
    return added


def _entries(loaded: Any) -> Iterator[tuple[Any, CodeType, Any, int]]:
    if not isinstance(loaded, list):
        return
    for item in loaded:
        if (
            isinstance(item, tuple)
            and len(item) == 4
            and isinstance(item[0], tuple)
            and isinstance(item[1], CodeType)
            and isinstance(item[2], tuple)
            and isinstance(item[3], int)
        ):
            yield item


def cached() -> int:
    return len(_state.entries)


def stats() -> dict[str, int]:
    return {"entries": len(_state.entries), "hits": _state.hits, "misses": _state.misses}


def clear() -> None:
    """Forget every entry (tests)."""
    _state.entries.clear()
    _state.new.clear()
    _state.size = 0
    _state.hits = _state.misses = 0
