"""The fields of a watches.yaml entry, one parser each: a raw value in, a checked value
out (a path, a duration, a list of GVKs, ...), or a FieldError naming the key.

Also where roles and playbooks are looked for (`role_candidates`, the search paths) and
the per-watch environment overrides (`MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>`, ...).
Warnings (accepted, but probably not meant) are appended to the `warns` list passed in.
`runner.watches.model` assembles an entry from these and places the messages; see its
docstring for the compatibility rules they keep.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from runner.structs import GVK
from runner.util.durations import parse_duration
from runner.util.fields import FieldError, FieldPath, describe, normalize_keys

GVK_KEYS: Final = ("group", "version", "kind")
_INTEGER: Final = re.compile(r"[+-]?[0-9]+\Z")
_DNS_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z"
)
_DNS_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_KIND: Final = re.compile(r"[A-Za-z]([-A-Za-z0-9]*[A-Za-z0-9])?\Z")


@dataclass(frozen=True)
class Context:
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


def search_path(
    given: Sequence[str | os.PathLike[str]] | None,
    variable: str,
    default: Sequence[str],
    *,
    environ: Mapping[str, str],
    base_dir: Path,
) -> tuple[Path, ...]:
    """A search path (roles, collections): `given`, else `variable` in `environ`, else
    `default`; `~` from `HOME`, relative entries against `base_dir`."""
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


def string(fields: Mapping[str, Any], key: str, path: FieldPath) -> str:
    """The string at `key`, "" when unset."""
    value = fields.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError((*path, key), f"expected a string, got {describe(value)}")
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


def vars_mapping(value: object, path: FieldPath) -> dict[str, Any]:
    """A `vars:` mapping as Ansible gets it (JSON-compatible), {} when unset."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(path, f"expected a mapping, got {describe(value)}")
    result: dict[str, Any] = _json_vars(value, path)
    return result


def gvk_of(fields: Mapping[str, Any], path: FieldPath) -> GVK:
    return GVK(
        group=string(fields, "group", path),
        version=string(fields, "version", path),
        kind=string(fields, "kind", path),
    )


def find_playbook(value: str, path: FieldPath, ctx: Context) -> Path:
    """The playbook file `value` names, resolved against the base directory."""
    playbook = Path(os.path.normpath(ctx.base_dir / value))
    if not playbook.is_file():
        problem = "is not a file" if playbook.exists() else "was not found"
        raise FieldError(path, f"{value} {problem} (looked for {playbook})")
    return playbook


def find_role(value: str, path: FieldPath, ctx: Context) -> Path:
    """The first of `role_candidates` that is a directory."""
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


def reconcile_period(value: object, default: float, warns: list[FieldError]) -> float:
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


def blacklist(value: object, warns: list[FieldError]) -> tuple[GVK, ...]:
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
        gvk = gvk_of(normalize_keys(item, GVK_KEYS, path=path, unknown=warns), path)
        for key in ("version", "kind"):
            if not getattr(gvk, key):
                raise FieldError((*path, key), f"must not be empty in {describe(dict(item))}")
        result.append(gvk)
    return tuple(result)


def _env_int(environ: Mapping[str, str], name: str) -> int | None:
    raw = environ.get(name, "").strip()
    if not raw:
        return None
    if not _INTEGER.match(raw):
        raise FieldError((f"environment variable {name}",), f"expected an integer, got {raw!r}")
    return int(raw)


def max_concurrent_reconciles(gvk: GVK, ctx: Context) -> int:
    suffix = env_suffix(gvk)
    value = _env_int(ctx.environ, f"MAX_CONCURRENT_RECONCILES_{suffix}")
    if value is None:
        value = _env_int(ctx.environ, f"WORKER_{suffix}")  # the older name
    return ctx.default_max_concurrent_reconciles if value is None or value <= 0 else value


def ansible_verbosity(gvk: GVK, ctx: Context) -> int:
    name = f"ANSIBLE_VERBOSITY_{env_suffix(gvk)}"
    value = _env_int(ctx.environ, name)
    if value is None:
        return ctx.default_ansible_verbosity
    if not 0 <= value <= 7:
        raise FieldError((f"environment variable {name}",), f"expected 0 to 7, got {value}")
    return value


def reconcile_timeout(gvk: GVK, ctx: Context) -> float:
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


def playbook_wins(path: FieldPath, role: str) -> FieldError:
    """The warning for a `role` that is ignored because a playbook is set too."""
    return FieldError(
        path,
        f"{role} is ignored: playbook is set too, and the playbook runs (as with the Go "
        "operator); remove one of the two",
    )


def ignored_key(key: str, value: object, gvk: GVK) -> FieldError:
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


def check_gvk_syntax(gvk: GVK, warns: list[FieldError]) -> None:
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
