"""watches.yaml: which custom resources the operator reconciles, and with what.

Every project written for the Go ansible-operator ships a watches.yaml; it must load here
unchanged, with the same keys, defaults, role look-up and environment overrides (see
shared/SPEC.md). The rule for mistakes: what the original refused (or failed on later: a
bad selector) is refused at load, with one message naming the file, the entry (counted
from 1), its GVK, the key, the bad value and the line:

    watches.yaml: entry 2 (cache.example.com/v1alpha1, Kind=Memcached): reconcilePeriod:
    invalid duration "5 minutes": unknown unit " minutes" in duration "5 minutes" (line 9)

What the original accepted loads here too, but when it probably is not what the author
meant (role and playbook both set, an unknown or ignored key, a group no CRD can have, a
negative period, a `${VAR}` that is unset or empty) the watch carries a warning in the
same format in `Watch.warnings`, which `run` logs once.

Compatibility details kept on purpose:
* `$VAR` / `${VAR}` are expanded before parsing (runner.watches.envexpand); like the original, an
  unset variable stays in the text as `${VAR}`.
* YAML 1.1 scalars (`yes`, `True`), but dates stay strings, as they did in Go.
* Field names match case-insensitively (the original decoded through encoding/json), and
  unknown ones are ignored (with a warning, and a "did you mean").
* `maxWorkers`, `ansibleVerbosity` and `maxConcurrentReconciles` were accepted and ignored
  by the original; they still are (flags and environment variables set them).
* `reconcilePeriod` 0 and `maxRunnerArtifacts` 0 mean the default; a negative period is
  kept (the original then never requeued periodically); an unquoted number is refused,
  as the original refused it (it has no unit).

`parse()` is pure apart from checking that roles and playbooks exist; `load()` reads the
file and calls it. This module holds the Watch model and assembles each entry; the parser
of each field, the role look-up and the per-watch environment overrides are
`runner.watches.watchfields`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from runner.errors import ConfigError
from runner.structs import GVK
from runner.util.fields import FieldError, FieldPath, describe, normalize_keys
from runner.util.labelselector import LabelSelector, parse_label_selector
from runner.util.yamlnodes import line_of, load_document, path_at
from runner.watches import watchfields
from runner.watches.envexpand import expand_env, expand_traced

__all__ = [
    "DEFAULT_ANSIBLE_VERBOSITY",
    "DEFAULT_COLLECTIONS_PATH",
    "DEFAULT_MAX_CONCURRENT_RECONCILES",
    "DEFAULT_MAX_RUNNER_ARTIFACTS",
    "DEFAULT_RECONCILE_PERIOD",
    "DEFAULT_RECONCILE_TIMEOUT",
    "KNOWN_KEYS",
    "Finalizer",
    "Watch",
    "expand_env",
    "load",
    "parse",
    "spec_template_warning",
]

DEFAULT_RECONCILE_PERIOD: Final = 10 * 3600.0
DEFAULT_MAX_RUNNER_ARTIFACTS: Final = 20
DEFAULT_MAX_CONCURRENT_RECONCILES: Final = 1
DEFAULT_ANSIBLE_VERBOSITY: Final = 2
DEFAULT_RECONCILE_TIMEOUT: Final = 0.0  # no limit, as in the Go operator
DEFAULT_COLLECTIONS_PATH: Final = ("/usr/share/ansible/collections", "~/.ansible/collections")

_BOOLS: Final = {  # key -> default
    "manageStatus": True,
    "watchDependentResources": True,
    "watchClusterScopedResources": False,
    "snakeCaseParameters": True,
    "watchAnnotationsChanges": False,
    "markUnsafe": False,
}
KNOWN_KEYS: Final = (
    "group",
    "version",
    "kind",
    "playbook",
    "role",
    "vars",
    "reconcilePeriod",
    *_BOOLS,
    "maxRunnerArtifacts",
    "blacklist",
    "selector",
    "finalizer",
)
_IGNORED_KEYS: Final = ("maxWorkers", "ansibleVerbosity", "maxConcurrentReconciles")
_IGNORED_FOLDED: Final = frozenset(key.casefold() for key in _IGNORED_KEYS)
_FINALIZER_KEYS: Final = ("name", "playbook", "role", "vars")


@dataclass(frozen=True)
class Finalizer:
    """What runs when a CR carrying `name` is deleted; no role or playbook = the watch's."""

    name: str
    playbook: Path | None = None
    role: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Watch:
    """One watches.yaml entry, resolved: absolute paths, durations in seconds."""

    gvk: GVK
    playbook: Path | None = None
    role: Path | None = None  # None whenever playbook is set: the playbook wins
    vars: dict[str, Any] = field(default_factory=dict, hash=False)
    reconcile_period: float = DEFAULT_RECONCILE_PERIOD
    manage_status: bool = True
    watch_dependent_resources: bool = True
    watch_cluster_scoped_resources: bool = False
    snake_case_parameters: bool = True
    watch_annotations_changes: bool = False
    mark_unsafe: bool = False
    max_runner_artifacts: int = DEFAULT_MAX_RUNNER_ARTIFACTS
    blacklist: tuple[GVK, ...] = ()
    selector: LabelSelector | None = None
    finalizer: Finalizer | None = None
    max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES
    ansible_verbosity: int = DEFAULT_ANSIBLE_VERBOSITY
    reconcile_timeout: float = DEFAULT_RECONCILE_TIMEOUT
    """Seconds one Ansible run may take before it is stopped (0: no limit)."""
    ignored_keys: tuple[str, ...] = ()
    """Keys read and ignored (as the Go operator ignored them): unknown ones, and the
    three it never read from the file (maxConcurrentReconciles, ...)."""
    warnings: tuple[str, ...] = field(default=(), compare=False)
    """What the entry accepts, as the Go operator did, but probably did not mean: one
    message each, naming file, entry, key and line (`run` logs them once)."""


def spec_template_warning(watch: Watch) -> str | None:
    """Why a watch that renders its CRs' spec values as templates is a risk, or None.

    With `markUnsafe: false` (the default, as in the Go operator) a string in a spec is a
    Jinja template to Ansible: `{{ lookup('pipe', 'any command') }}` in a spec field runs
    that command as the operator when the role uses the field."""
    if watch.mark_unsafe:
        return None
    return (
        f"watch {watch.gvk} renders the spec values of its CRs as Jinja templates "
        f"(markUnsafe is false): anyone who can create or edit a {watch.gvk.kind} can run "
        f"commands as the operator, e.g. with {{{{ lookup('pipe', ...) }}}} in a spec "
        f"field; add `markUnsafe: true` to its watches.yaml entry to pass spec values as "
        f"plain strings"
    )


def _bool(fields: Mapping[str, Any], key: str) -> bool:
    value = fields.get(key)
    if value is None:
        return _BOOLS[key]
    if not isinstance(value, bool):
        raise FieldError((key,), f"expected true or false, got {describe(value)}")
    return value


def _max_runner_artifacts(value: object) -> int:
    if value is None or value == 0:
        return DEFAULT_MAX_RUNNER_ARTIFACTS  # 0 meant the default in the original too
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FieldError(
            ("maxRunnerArtifacts",), f"expected a non-negative integer, got {describe(value)}"
        )
    return value


def _finalizer(
    value: object, ctx: watchfields.Context, warns: list[FieldError]
) -> Finalizer | None:
    if value is None:
        return None
    path: FieldPath = ("finalizer",)
    if not isinstance(value, Mapping):
        raise FieldError(
            path, f"expected a mapping with name, role|playbook, vars, got {describe(value)}"
        )
    fields = normalize_keys(value, _FINALIZER_KEYS, path=path, unknown=warns)
    name = watchfields.string(fields, "name", path)
    if not name:
        raise FieldError((*path, "name"), f"finalizer must have name, got {describe(dict(value))}")
    playbook_value = watchfields.string(fields, "playbook", path)
    role_value = watchfields.string(fields, "role", path)
    finalizer_vars = watchfields.vars_mapping(fields.get("vars"), (*path, "vars"))
    if playbook_value:
        if role_value:
            warns.append(watchfields.playbook_wins((*path, "role"), role_value))
        return Finalizer(
            name=name,
            playbook=watchfields.find_playbook(playbook_value, (*path, "playbook"), ctx),
            vars=finalizer_vars,
        )
    if role_value:
        return Finalizer(
            name=name,
            role=watchfields.find_role(role_value, (*path, "role"), ctx),
            vars=finalizer_vars,
        )
    if not finalizer_vars:
        raise FieldError(
            path,
            f"must specify Role or Playbook (or vars to run the watch's own with) for {name!r}",
        )
    return Finalizer(name=name, vars=finalizer_vars)


def _entry(
    raw: object, ctx: watchfields.Context, seen: Mapping[GVK, int], warns: list[FieldError]
) -> Watch:
    if not isinstance(raw, Mapping):
        raise FieldError((), f"expected a mapping, got {describe(raw)}")
    ignored = {key for key in raw if isinstance(key, str) and key.casefold() in _IGNORED_FOLDED}
    unknown: list[FieldError] = []
    fields = normalize_keys(
        {k: v for k, v in raw.items() if k not in ignored}, KNOWN_KEYS, path=(), unknown=unknown
    )
    gvk = watchfields.gvk_of(fields, ())
    for key in ("version", "kind"):
        if not getattr(gvk, key):
            raise FieldError((key,), f"invalid GVK: {gvk}: {key} must not be empty")
    if gvk in seen:
        raise FieldError((), f"duplicate GVK: {gvk} (first defined by entry {seen[gvk]})")
    watchfields.check_gvk_syntax(gvk, warns)
    warns += unknown
    warns += [watchfields.ignored_key(key, raw[key], gvk) for key in sorted(ignored)]

    playbook_value = watchfields.string(fields, "playbook", ())
    role_value = watchfields.string(fields, "role", ())
    playbook = role = None
    if playbook_value:
        playbook = watchfields.find_playbook(playbook_value, ("playbook",), ctx)
        if role_value:
            warns.append(watchfields.playbook_wins(("role",), role_value))
    elif role_value:
        role = watchfields.find_role(role_value, ("role",), ctx)
    else:
        raise FieldError((), "must specify Role or Playbook (neither role nor playbook is set)")

    selector = fields.get("selector")
    return Watch(
        gvk=gvk,
        playbook=playbook,
        role=role,
        vars=watchfields.vars_mapping(fields.get("vars"), ("vars",)),
        reconcile_period=watchfields.reconcile_period(
            fields.get("reconcilePeriod"), ctx.default_reconcile_period, warns
        ),
        manage_status=_bool(fields, "manageStatus"),
        watch_dependent_resources=_bool(fields, "watchDependentResources"),
        watch_cluster_scoped_resources=_bool(fields, "watchClusterScopedResources"),
        snake_case_parameters=_bool(fields, "snakeCaseParameters"),
        watch_annotations_changes=_bool(fields, "watchAnnotationsChanges"),
        mark_unsafe=_bool(fields, "markUnsafe"),
        max_runner_artifacts=_max_runner_artifacts(fields.get("maxRunnerArtifacts")),
        blacklist=watchfields.blacklist(fields.get("blacklist"), warns),
        selector=None if selector is None else parse_label_selector(selector, path=("selector",)),
        finalizer=_finalizer(fields.get("finalizer"), ctx, warns),
        max_concurrent_reconciles=watchfields.max_concurrent_reconciles(gvk, ctx),
        ansible_verbosity=watchfields.ansible_verbosity(gvk, ctx),
        reconcile_timeout=watchfields.reconcile_timeout(gvk, ctx),
        ignored_keys=tuple(sorted(ignored | {str(w.path[0]) for w in unknown})),
    )


def _header(source: str, index: int, raw: object) -> str:
    """`<source>: entry <n> (<gvk>)`, the GVK read leniently so that every error shows it."""
    if not isinstance(raw, Mapping):
        return f"{source}: entry {index}"
    found = {
        str(key).casefold(): value
        for key, value in raw.items()
        if str(key).casefold() in watchfields.GVK_KEYS and isinstance(value, str)
    }
    gvk = GVK(found.get("group", ""), found.get("version", ""), found.get("kind", ""))
    return (
        f"{source}: entry {index} ({gvk})"
        if gvk.version or gvk.kind
        else f"{source}: entry {index}"
    )


def parse(
    text: str,
    *,
    source: str,
    environ: Mapping[str, str],
    base_dir: Path,
    roles_path: Sequence[str | os.PathLike[str]] | None = None,
    collections_path: Sequence[str | os.PathLike[str]] | None = None,
    default_reconcile_period: float = DEFAULT_RECONCILE_PERIOD,
    default_max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES,
    default_ansible_verbosity: int = DEFAULT_ANSIBLE_VERBOSITY,
    default_reconcile_timeout: float = DEFAULT_RECONCILE_TIMEOUT,
) -> tuple[Watch, ...]:
    """Parse and validate watches.yaml text; raise ConfigError with one precise message.

    `source` names the file in messages. Relative playbooks, roles and search-path entries
    are resolved against `base_dir` (the original used its working directory). A search
    path left as None is read from `environ` like the original: `ANSIBLE_ROLES_PATH`, and
    `ANSIBLE_COLLECTIONS_PATH` (default `DEFAULT_COLLECTIONS_PATH`, `~` from `HOME`).
    """
    if not base_dir.is_absolute():
        raise ValueError(f"base_dir must be absolute, got {base_dir}")
    ctx = watchfields.Context(
        environ=environ,
        base_dir=base_dir,
        roles_path=watchfields.search_path(
            roles_path, "ANSIBLE_ROLES_PATH", (), environ=environ, base_dir=base_dir
        ),
        collections_path=watchfields.search_path(
            collections_path,
            "ANSIBLE_COLLECTIONS_PATH",
            DEFAULT_COLLECTIONS_PATH,
            environ=environ,
            base_dir=base_dir,
        ),
        default_reconcile_period=default_reconcile_period,
        default_max_concurrent_reconciles=default_max_concurrent_reconciles,
        default_ansible_verbosity=default_ansible_verbosity,
        default_reconcile_timeout=default_reconcile_timeout,
    )
    expanded, expansions = expand_traced(text, environ)
    root, data = load_document(expanded, source=source)
    if root is None:
        raise ConfigError(f"{source}: is empty; expected a list of watches")
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        raise ConfigError(
            f"{source}: expected a list of watches, got {describe(data)} (line {line_of(root, ())})"
        )
    seen: dict[GVK, int] = {}
    watches: list[Watch] = []
    for index, (raw, node) in enumerate(zip(data, root.value, strict=True), start=1):
        header = _header(source, index, raw)
        warns: list[FieldError] = []
        inside = [(e, path) for e in expansions if (path := path_at(node, e.line)) is not None]
        try:
            watch = _entry(raw, ctx, seen, warns)
        except FieldError as exc:
            # An error an empty or unset variable led to names the variable.
            # So does one a misspelt key led to (`roles:` for `role:`).
            hints = "".join(f"; {e.describe()} on line {e.line}" for e, _ in inside)
            hints += "".join(f"; {w.key}: {w.problem}" for w in warns if "unknown key" in w.problem)
            raise ConfigError(f"{header}: {_located(exc, node, hints)}") from None
        warns += [FieldError(path, e.describe()) for e, path in inside]
        messages = tuple(f"{header}: {_located(w, node)}" for w in warns)
        seen[watch.gvk] = index
        watches.append(dataclasses.replace(watch, warnings=messages) if messages else watch)
    return tuple(watches)


def _located(problem: FieldError, node: yaml.Node, hints: str = "") -> str:
    key = f"{problem.key}: " if problem.path else ""
    return f"{key}{problem.problem}{hints} (line {line_of(node, problem.path)})"


def load(
    path: str | os.PathLike[str],
    *,
    environ: Mapping[str, str],
    cwd: Path,
    roles_path: Sequence[str | os.PathLike[str]] | None = None,
    collections_path: Sequence[str | os.PathLike[str]] | None = None,
    default_reconcile_period: float = DEFAULT_RECONCILE_PERIOD,
    default_max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES,
    default_ansible_verbosity: int = DEFAULT_ANSIBLE_VERBOSITY,
    default_reconcile_timeout: float = DEFAULT_RECONCILE_TIMEOUT,
) -> tuple[Watch, ...]:
    """Read watches.yaml (relative to `cwd`) and `parse()` it, resolving against `cwd`."""
    source = os.fspath(path)
    try:
        text = (cwd / source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: watches file not found (in {cwd})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read the watches file: {exc}") from None
    return parse(
        text,
        source=source,
        environ=environ,
        base_dir=cwd,
        roles_path=roles_path,
        collections_path=collections_path,
        default_reconcile_period=default_reconcile_period,
        default_max_concurrent_reconciles=default_max_concurrent_reconciles,
        default_ansible_verbosity=default_ansible_verbosity,
        default_reconcile_timeout=default_reconcile_timeout,
    )
