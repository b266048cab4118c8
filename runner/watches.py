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
* `$VAR` / `${VAR}` are expanded before parsing (runner.envexpand); like the original, an
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
file and calls it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from runner.durations import parse_duration
from runner.envexpand import expand_env, expand_traced
from runner.errors import ConfigError
from runner.fields import FieldError, FieldPath, describe, normalize_keys
from runner.labelselector import LabelSelector, parse_label_selector
from runner.structs import GVK
from runner.yamlnodes import line_of, load_document, path_at

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
    "env_suffix",
    "expand_env",
    "load",
    "parse",
    "role_candidates",
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
_GVK_KEYS: Final = ("group", "version", "kind")
_FINALIZER_KEYS: Final = ("name", "playbook", "role", "vars")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+\Z")
_DNS_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
)
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_KIND: Final = re.compile(r"[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?\Z")


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


@dataclass(frozen=True)
class _Context:
    """Everything an entry is resolved against."""

    environ: Mapping[str, str]
    base_dir: Path
    roles_path: tuple[Path, ...]
    collections_path: tuple[Path, ...]
    default_reconcile_period: float
    default_max_concurrent_reconciles: int
    default_ansible_verbosity: int
    default_reconcile_timeout: float


def env_suffix(gvk: GVK) -> str:
    """`<KIND>_<GROUP>` of the per-watch variables: upper case, dots to `_` (dashes kept)."""
    return f"{gvk.kind}_{gvk.group}".replace(".", "_").upper()


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


def _search_path(
    given: Sequence[str | os.PathLike[str]] | None,
    variable: str,
    default: Sequence[str],
    *,
    environ: Mapping[str, str],
    base_dir: Path,
) -> tuple[Path, ...]:
    if given is None:
        given = [entry for entry in environ.get(variable, "").split(":") if entry] or default
    paths: list[Path] = []
    home = environ.get("HOME", "")
    for entry in (os.fspath(item) for item in given):
        if entry == "~" or entry.startswith("~/"):
            if not home:
                continue  # like the original: no home directory, no home entry
            entry = home + entry[1:]
        paths.append(Path(os.path.normpath(base_dir / entry)))
    return tuple(paths)


def role_candidates(
    name: str,
    *,
    base_dir: Path,
    roles_path: Sequence[Path],
    collections_path: Sequence[Path],
) -> tuple[Path, ...]:
    """Where a `role:` value is looked for, in order (the first existing one is used).

    Absolute path; FQCN `ns.coll.role` in each collections path entry; each roles path
    entry E as E/<role> then E/roles/<role>; `<base_dir>/roles/<role>`; and, as the
    original's last resort, `<base_dir>/<role>`.
    """
    if os.path.isabs(name):
        return (Path(os.path.normpath(name)),)
    candidates: list[Path] = []
    parts = name.split(".")
    if len(parts) == 3 and all(parts):
        namespace, collection, role = parts
        candidates += [
            entry / "ansible_collections" / namespace / collection / "roles" / role
            for entry in collections_path
        ]
    for entry in roles_path:
        candidates += [entry / name, entry / "roles" / name]
    candidates += [base_dir / "roles" / name, base_dir / name]
    return tuple(Path(os.path.normpath(candidate)) for candidate in candidates)


def _string(fields: Mapping[str, Any], key: str, path: FieldPath) -> str:
    value = fields.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError((*path, key), f"expected a string, got {describe(value)}")
    return value


def _bool(fields: Mapping[str, Any], key: str) -> bool:
    value = fields.get(key)
    if value is None:
        return _BOOLS[key]
    if not isinstance(value, bool):
        raise FieldError((key,), f"expected true or false, got {describe(value)}")
    return value


def _json_vars(value: object, path: FieldPath) -> Any:
    """Vars as the original saw them after its YAML-to-JSON step: string keys only."""
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, bool):
                key = "true" if key else "false"
            elif isinstance(key, int):
                key = str(key)
            elif not isinstance(key, str):
                raise FieldError(path, f"keys must be strings, got {describe(key)}")
            result[key] = _json_vars(item, (*path, key))
        return result
    if isinstance(value, list):
        return [_json_vars(item, (*path, i)) for i, item in enumerate(value)]
    if value is None or isinstance(value, str | int | float):
        return value
    raise FieldError(path, f"cannot be passed to Ansible as JSON: {describe(value)}")


def _vars(value: object, path: FieldPath) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(path, f"expected a mapping, got {describe(value)}")
    result: dict[str, Any] = _json_vars(value, path)
    return result


def _gvk(fields: Mapping[str, Any], path: FieldPath) -> GVK:
    return GVK(
        group=_string(fields, "group", path),
        version=_string(fields, "version", path),
        kind=_string(fields, "kind", path),
    )


def _playbook(value: str, path: FieldPath, ctx: _Context) -> Path:
    playbook = Path(os.path.normpath(ctx.base_dir / value))
    if not playbook.is_file():
        problem = "is not a file" if playbook.exists() else "was not found"
        raise FieldError(path, f"{value} {problem} (looked for {playbook})")
    return playbook


def _role(value: str, path: FieldPath, ctx: _Context) -> Path:
    candidates = role_candidates(
        value,
        base_dir=ctx.base_dir,
        roles_path=ctx.roles_path,
        collections_path=ctx.collections_path,
    )
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    looked = ", ".join(map(str, candidates))
    raise FieldError(path, f"{value} was not found (looked in {looked})")


def _reconcile_period(value: object, default: float, warns: list[FieldError]) -> float:
    path: FieldPath = ("reconcilePeriod",)
    if value is None:
        return default
    if isinstance(value, str):
        quoted = json.dumps(value, ensure_ascii=False)
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise FieldError(path, f"invalid duration {quoted}: {exc}") from None
        if seconds < 0:
            warns.append(
                FieldError(
                    path,
                    f"{quoted} is negative: resources are then never reconciled periodically "
                    '(as with the Go operator); leave it out or write "0" for the '
                    "--reconcile-period default",
                )
            )
    elif isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        # The Go operator refuses an unquoted number too: it has no unit.
        raise FieldError(
            path,
            f'expected a duration string such as "{value}s", got the number {value} '
            "(a bare number has no unit)",
        )
    else:
        raise FieldError(path, f'expected a duration such as "30s", got {describe(value)}')
    return default if seconds == 0 else seconds


def _max_runner_artifacts(value: object) -> int:
    if value is None or value == 0:
        return DEFAULT_MAX_RUNNER_ARTIFACTS  # 0 meant the default in the original too
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FieldError(
            ("maxRunnerArtifacts",), f"expected a non-negative integer, got {describe(value)}"
        )
    return value


def _blacklist(value: object, warns: list[FieldError]) -> tuple[GVK, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise FieldError(
            ("blacklist",), f"expected a list of {{group, version, kind}}, got {describe(value)}"
        )
    result: list[GVK] = []
    for index, item in enumerate(value):
        path: FieldPath = ("blacklist", index)
        if not isinstance(item, Mapping):
            raise FieldError(
                path, f"expected a mapping with group, version, kind, got {describe(item)}"
            )
        gvk = _gvk(normalize_keys(item, _GVK_KEYS, path=path, unknown=warns), path)
        for key in ("version", "kind"):
            if not getattr(gvk, key):
                raise FieldError((*path, key), f"must not be empty in {describe(dict(item))}")
        result.append(gvk)
    return tuple(result)


def _finalizer(value: object, ctx: _Context, warns: list[FieldError]) -> Finalizer | None:
    if value is None:
        return None
    path: FieldPath = ("finalizer",)
    if not isinstance(value, Mapping):
        raise FieldError(
            path, f"expected a mapping with name, role|playbook, vars, got {describe(value)}"
        )
    fields = normalize_keys(value, _FINALIZER_KEYS, path=path, unknown=warns)
    name = _string(fields, "name", path)
    if not name:
        raise FieldError((*path, "name"), f"finalizer must have name, got {describe(dict(value))}")
    playbook_value = _string(fields, "playbook", path)
    role_value = _string(fields, "role", path)
    finalizer_vars = _vars(fields.get("vars"), (*path, "vars"))
    if playbook_value:
        if role_value:
            warns.append(_both((*path, "role"), role_value))
        return Finalizer(
            name=name,
            playbook=_playbook(playbook_value, (*path, "playbook"), ctx),
            vars=finalizer_vars,
        )
    if role_value:
        return Finalizer(
            name=name, role=_role(role_value, (*path, "role"), ctx), vars=finalizer_vars
        )
    if not finalizer_vars:
        raise FieldError(
            path,
            f"must specify Role or Playbook (or vars to run the watch's own with) for {name!r}",
        )
    return Finalizer(name=name, vars=finalizer_vars)


def _env_int(environ: Mapping[str, str], name: str) -> int | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    if not _INTEGER.match(raw):
        raise FieldError((f"environment variable {name}",), f"expected an integer, got {raw!r}")
    return int(raw)


def _max_concurrent_reconciles(gvk: GVK, ctx: _Context) -> int:
    suffix = env_suffix(gvk)
    value = _env_int(ctx.environ, f"MAX_CONCURRENT_RECONCILES_{suffix}")
    if value is None:
        value = _env_int(ctx.environ, f"WORKER_{suffix}")  # the older name
    return ctx.default_max_concurrent_reconciles if value is None or value <= 0 else value


def _ansible_verbosity(gvk: GVK, ctx: _Context) -> int:
    name = f"ANSIBLE_VERBOSITY_{env_suffix(gvk)}"
    value = _env_int(ctx.environ, name)
    if value is None:
        return ctx.default_ansible_verbosity
    if not 0 <= value <= 7:
        raise FieldError((f"environment variable {name}",), f"expected 0 to 7, got {value}")
    return value


def _reconcile_timeout(gvk: GVK, ctx: _Context) -> float:
    """`RECONCILE_TIMEOUT_<KIND>_<GROUP>`: a Go duration; `0` turns the limit off for
    this watch even when `--reconcile-timeout` sets one."""
    name = f"RECONCILE_TIMEOUT_{env_suffix(gvk)}"
    raw = ctx.environ.get(name, "").strip()
    if not raw:
        return ctx.default_reconcile_timeout
    try:
        seconds = parse_duration(raw)
    except ValueError as exc:
        raise FieldError((f"environment variable {name}",), str(exc)) from None
    if seconds < 0:
        raise FieldError(
            (f"environment variable {name}",), f"expected a duration of 0 or more, got {raw!r}"
        )
    return seconds


def _both(role_path: FieldPath, role: str) -> FieldError:
    return FieldError(
        role_path,
        f"{role} is ignored: playbook is set too, and the playbook runs (as with the Go "
        "operator); remove one of the two",
    )


def _ignored(key: str, value: object, gvk: GVK) -> FieldError:
    """The Go operator never read these from the file; say where the setting lives."""
    if key.casefold() == "ansibleverbosity":
        where = f"--ansible-verbosity or ANSIBLE_VERBOSITY_{env_suffix(gvk)}"
    else:
        where = f"--max-concurrent-reconciles or MAX_CONCURRENT_RECONCILES_{env_suffix(gvk)}"
    return FieldError(
        (key,),
        f"{describe(value)} is ignored: watches.yaml cannot set it (the Go operator ignores "
        f"it too); use {where}",
    )


def _check_gvk_syntax(gvk: GVK, warns: list[FieldError]) -> None:
    """Names no CustomResourceDefinition can have: accepted (the Go operator accepted
    them), but such a watch never finds anything to reconcile."""
    checks = (
        (
            "group",
            gvk.group,
            _DNS_SUBDOMAIN,
            "a DNS subdomain: lower-case letters, digits, '-' and '.'",
        ),
        ("version", gvk.version, _DNS_LABEL, "lower-case letters, digits and '-'"),
        ("kind", gvk.kind, _KIND, "a letter, then letters, digits and '-'"),
    )
    for key, value, pattern, rule in checks:
        if value and not pattern.match(value):
            warns.append(
                FieldError(
                    (key,),
                    f"{json.dumps(value, ensure_ascii=False)} is not a valid API {key} "
                    f"({rule}): no CustomResourceDefinition can serve it, so this watch "
                    "will find nothing to reconcile",
                )
            )


def _entry(raw: object, ctx: _Context, seen: Mapping[GVK, int], warns: list[FieldError]) -> Watch:
    if not isinstance(raw, Mapping):
        raise FieldError((), f"expected a mapping, got {describe(raw)}")
    ignored = {key for key in raw if isinstance(key, str) and key.casefold() in _IGNORED_FOLDED}
    unknown: list[FieldError] = []
    fields = normalize_keys(
        {k: v for k, v in raw.items() if k not in ignored}, KNOWN_KEYS, path=(), unknown=unknown
    )
    gvk = _gvk(fields, ())
    for key in ("version", "kind"):
        if not getattr(gvk, key):
            raise FieldError((key,), f"invalid GVK: {gvk}: {key} must not be empty")
    if gvk in seen:
        raise FieldError((), f"duplicate GVK: {gvk} (first defined by entry {seen[gvk]})")
    _check_gvk_syntax(gvk, warns)
    warns += unknown
    warns += [_ignored(key, raw[key], gvk) for key in sorted(ignored)]

    playbook_value = _string(fields, "playbook", ())
    role_value = _string(fields, "role", ())
    playbook = role = None
    if playbook_value:
        playbook = _playbook(playbook_value, ("playbook",), ctx)
        if role_value:
            warns.append(_both(("role",), role_value))
    elif role_value:
        role = _role(role_value, ("role",), ctx)
    else:
        raise FieldError((), "must specify Role or Playbook (neither role nor playbook is set)")

    selector = fields.get("selector")
    return Watch(
        gvk=gvk,
        playbook=playbook,
        role=role,
        vars=_vars(fields.get("vars"), ("vars",)),
        reconcile_period=_reconcile_period(
            fields.get("reconcilePeriod"), ctx.default_reconcile_period, warns
        ),
        manage_status=_bool(fields, "manageStatus"),
        watch_dependent_resources=_bool(fields, "watchDependentResources"),
        watch_cluster_scoped_resources=_bool(fields, "watchClusterScopedResources"),
        snake_case_parameters=_bool(fields, "snakeCaseParameters"),
        watch_annotations_changes=_bool(fields, "watchAnnotationsChanges"),
        mark_unsafe=_bool(fields, "markUnsafe"),
        max_runner_artifacts=_max_runner_artifacts(fields.get("maxRunnerArtifacts")),
        blacklist=_blacklist(fields.get("blacklist"), warns),
        selector=None if selector is None else parse_label_selector(selector, path=("selector",)),
        finalizer=_finalizer(fields.get("finalizer"), ctx, warns),
        max_concurrent_reconciles=_max_concurrent_reconciles(gvk, ctx),
        ansible_verbosity=_ansible_verbosity(gvk, ctx),
        reconcile_timeout=_reconcile_timeout(gvk, ctx),
        ignored_keys=tuple(sorted(ignored | {str(w.path[0]) for w in unknown})),
    )


def _header(source: str, index: int, raw: object) -> str:
    """`<source>: entry <n> (<gvk>)`, the GVK read leniently so that every error shows it."""
    if not isinstance(raw, Mapping):
        return f"{source}: entry {index}"
    found = {
        str(key).casefold(): value
        for key, value in raw.items()
        if str(key).casefold() in _GVK_KEYS and isinstance(value, str)
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
    ctx = _Context(
        environ=environ,
        base_dir=base_dir,
        roles_path=_search_path(
            roles_path, "ANSIBLE_ROLES_PATH", (), environ=environ, base_dir=base_dir
        ),
        collections_path=_search_path(
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
