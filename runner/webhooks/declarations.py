"""webhooks.yaml: which admission and conversion webhooks a project has, and their roles.

The declarations live in a file of their own next to watches.yaml rather than as keys of
a watches.yaml entry. The Go ansible-operator decodes watches.yaml leniently (unknown
keys are dropped without a word), so either place would still load there; a file of its
own keeps watches.yaml exactly the Go operator's format (our loader warns about keys it
does not know), lets a kind have webhooks without being reconciled, and matches how
conversion works: it belongs to a kind across all its versions, not to one watched
version. The Go operator never reads the file; the project keeps working there, without
webhooks.

    - group: cache.example.com
      version: v1alpha1
      kind: Memcached
      validating:   {role: memcached_validation, operations: [CREATE, UPDATE]}
      mutating:     {role: memcached_defaults}
      conversion:   {role: memcached_conversion}

Mistakes are refused with one message naming the file, the entry, its GVK, the key, the
value and the line, in the form watches.yaml errors take. `parse()` is pure apart from
checking that roles and playbooks exist.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from runner.errors import ConfigError
from runner.structs import GVK
from runner.util.durations import format_duration, parse_duration
from runner.util.fields import FieldError, FieldPath, describe, normalize_keys
from runner.util.yamlerror import describe_yaml_error
from runner.watches.envexpand import expand_env
from runner.watches.model import DEFAULT_COLLECTIONS_PATH
from runner.watches.watchfields import role_candidates, search_path

__all__ = [
    "DEFAULT_FILE",
    "WEBHOOK_TYPES",
    "Webhook",
    "WebhookType",
    "conversion_path",
    "load",
    "parse",
]

DEFAULT_FILE: Final = "webhooks.yaml"
WebhookType = Literal["validating", "mutating", "conversion"]
WEBHOOK_TYPES: Final[tuple[WebhookType, ...]] = ("validating", "mutating", "conversion")
OPERATIONS: Final = ("CREATE", "UPDATE", "DELETE", "CONNECT")
_DEFAULT_OPERATIONS: Final = ("CREATE", "UPDATE")
FAILURE_POLICIES: Final = ("Fail", "Ignore")
SIDE_EFFECTS: Final = ("None", "NoneOnDryRun")
DEFAULT_TIMEOUT: Final = 10.0
_MAX_TIMEOUT: Final = 30.0  # the API server's limit for admission webhooks

_ENTRY_KEYS: Final = (
    "group",
    "version",
    "kind",
    "snakeCaseParameters",
    "markUnsafe",
    *WEBHOOK_TYPES,
)
_ADMISSION_KEYS: Final = (
    "role",
    "playbook",
    "vars",
    "operations",
    "failurePolicy",
    "timeout",
    "sideEffects",
)
_CONVERSION_KEYS: Final = ("role", "playbook", "vars", "timeout")
_GROUP: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+\Z")
_VERSION: Final = re.compile(r"v[0-9]+((alpha|beta)[0-9]+)?\Z")
_KIND: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")


@dataclass(frozen=True, kw_only=True)
class Webhook:
    """One webhook: its type, the kind it serves and the role or playbook behind it.

    For admission webhooks `gvk.version` is the version requests are sent in (the API
    server converts others to it); a conversion webhook serves every version of the kind.
    `timeout` bounds the role's run; an admission webhook is registered with that many
    seconds plus one as `timeoutSeconds`, so the operator answers (by `failure_policy`)
    before the API server gives up.
    """

    type: WebhookType
    gvk: GVK
    role: Path | None = None
    playbook: Path | None = None
    vars: Mapping[str, Any] = field(default_factory=dict)
    operations: tuple[str, ...] = _DEFAULT_OPERATIONS
    failure_policy: str = "Fail"
    side_effects: str = "None"
    timeout: float = DEFAULT_TIMEOUT
    snake_case_parameters: bool = True
    mark_unsafe: bool = False

    @property
    def path(self) -> str:
        """The URL path served: controller-runtime's names (`/validate-<group>-<version>-
        <kind>`, `/mutate-...`), one `/convert` for every conversion webhook."""
        if self.type == "conversion":
            return conversion_path()
        prefix = "validate" if self.type == "validating" else "mutate"
        group = self.gvk.group.replace(".", "-")
        return f"/{prefix}-{group}-{self.gvk.version}-{self.gvk.kind.lower()}"

    @property
    def name(self) -> str:
        """The webhook's name in its configuration (three or more dot-separated parts)."""
        letter = "v" if self.type == "validating" else "m"
        return f"{letter}{self.gvk.kind.lower()}.{self.gvk.group}"

    @property
    def target(self) -> Path:
        target = self.playbook or self.role
        assert target is not None  # guaranteed by parse()
        return target

    @property
    def timeout_seconds(self) -> int:
        """The configuration's `timeoutSeconds`: the role's limit plus a second to answer."""
        return min(int(_MAX_TIMEOUT), int(self.timeout) + 1)

    def describe(self) -> str:
        return f"{self.type} webhook for {self.gvk.kind}.{self.gvk.group}"


def conversion_path() -> str:
    return "/convert"


@dataclass(frozen=True)
class _Context:
    base_dir: Path
    roles_path: tuple[Path, ...]
    collections_path: tuple[Path, ...]
    check_paths: bool = True


def _string(value: object, path: FieldPath) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError(path, f"expected a string, got {describe(value)}")
    return value


def _bool(fields: Mapping[str, Any], key: str, default: bool) -> bool:
    value = fields.get(key, default)
    if not isinstance(value, bool):
        raise FieldError((key,), f"expected true or false, got {describe(value)}")
    return value


def _target(
    fields: Mapping[str, Any], path: FieldPath, ctx: _Context
) -> tuple[Path | None, Path | None]:
    playbook = _string(fields.get("playbook"), (*path, "playbook"))
    role = _string(fields.get("role"), (*path, "role"))
    if playbook and role:
        raise FieldError(path, "set one of role or playbook, not both")
    if playbook:
        found = Path(os.path.normpath(ctx.base_dir / playbook))
        if ctx.check_paths and not found.is_file():
            raise FieldError((*path, "playbook"), f"{playbook} was not found (looked for {found})")
        return None, found
    if role and not ctx.check_paths:
        return Path(os.path.normpath(ctx.base_dir / "roles" / role)), None
    if role:
        candidates = role_candidates(
            role,
            base_dir=ctx.base_dir,
            roles_path=ctx.roles_path,
            collections_path=ctx.collections_path,
        )
        for candidate in candidates:
            if candidate.is_dir():
                return candidate, None
        looked = ", ".join(str(c) for c in candidates)
        raise FieldError((*path, "role"), f"{role} was not found (looked in {looked})")
    raise FieldError(path, "must specify role or playbook")


def _timeout(value: object, path: FieldPath) -> float:
    if value is None:
        return DEFAULT_TIMEOUT
    if not isinstance(value, str):
        raise FieldError(path, f'expected a duration string such as "5s", got {describe(value)}')
    try:
        seconds = parse_duration(value)
    except ValueError as err:
        raise FieldError(path, str(err)) from None
    if not 1 <= seconds <= _MAX_TIMEOUT - 1:
        limit = format_duration(_MAX_TIMEOUT - 1)
        raise FieldError(path, f"must be between 1s and {limit}, got {value!r}")
    return seconds


def _choice(value: object, path: FieldPath, choices: Sequence[str], default: str) -> str:
    if value is None:
        return default
    if value not in choices:
        raise FieldError(path, f"expected one of {', '.join(choices)}, got {describe(value)}")
    return str(value)


def _operations(value: object, path: FieldPath) -> tuple[str, ...]:
    if value is None:
        return _DEFAULT_OPERATIONS
    if value == "*":
        return ("*",)
    if not isinstance(value, list) or not value:
        raise FieldError(path, f"expected a non-empty list of operations, got {describe(value)}")
    for index, item in enumerate(value):
        if item not in (*OPERATIONS, "*"):
            raise FieldError(
                (*path, index), f"expected one of {', '.join(OPERATIONS)}, got {describe(item)}"
            )
    return tuple(str(item) for item in value)


def _vars(value: object, path: FieldPath) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(path, f"expected a mapping, got {describe(value)}")
    return {str(k): v for k, v in value.items()}


def _webhook(
    kind: WebhookType, raw: object, gvk: GVK, top: Mapping[str, Any], ctx: _Context
) -> Webhook:
    path: FieldPath = (kind,)
    if not isinstance(raw, Mapping):
        raise FieldError(path, f"expected a mapping, got {describe(raw)}")
    known = _CONVERSION_KEYS if kind == "conversion" else _ADMISSION_KEYS
    fields = normalize_keys(raw, known, path=path)
    role, playbook = _target(fields, path, ctx)
    common: dict[str, Any] = {
        "type": kind,
        "gvk": gvk,
        "role": role,
        "playbook": playbook,
        "vars": _vars(fields.get("vars"), (*path, "vars")),
        "timeout": _timeout(fields.get("timeout"), (*path, "timeout")),
        "snake_case_parameters": _bool(top, "snakeCaseParameters", True),
        "mark_unsafe": _bool(top, "markUnsafe", False),
    }
    if kind == "conversion":
        return Webhook(**common)
    return Webhook(
        **common,
        operations=_operations(fields.get("operations"), (*path, "operations")),
        failure_policy=_choice(
            fields.get("failurePolicy"), (*path, "failurePolicy"), FAILURE_POLICIES, "Fail"
        ),
        side_effects=_choice(
            fields.get("sideEffects"), (*path, "sideEffects"), SIDE_EFFECTS, "None"
        ),
    )


def _gvk(fields: Mapping[str, Any]) -> GVK:
    gvk = GVK(
        _string(fields.get("group"), ("group",)),
        _string(fields.get("version"), ("version",)),
        _string(fields.get("kind"), ("kind",)),
    )
    checks = (
        ("group", gvk.group, _GROUP, "a DNS subdomain with a dot (a CRD's group)"),
        ("version", gvk.version, _VERSION, "a Kubernetes version such as v1 or v1alpha1"),
        ("kind", gvk.kind, _KIND, "a CamelCase kind such as Memcached"),
    )
    for key, value, pattern, meaning in checks:
        if not value:
            raise FieldError((key,), "must not be empty")
        if not pattern.match(value):
            raise FieldError((key,), f"expected {meaning}, got {value!r}")
    return gvk


def _entry(raw: object, ctx: _Context) -> list[Webhook]:
    if not isinstance(raw, Mapping):
        raise FieldError((), f"expected a mapping, got {describe(raw)}")
    fields = normalize_keys(raw, _ENTRY_KEYS, path=())
    gvk = _gvk(fields)
    found = [
        _webhook(kind, fields[kind], gvk, fields, ctx) for kind in WEBHOOK_TYPES if kind in fields
    ]
    if not found:
        raise FieldError((), f"declares no webhook: set one of {', '.join(WEBHOOK_TYPES)}")
    return found


def _line(node: yaml.Node, path: FieldPath) -> int:
    line = node.start_mark.line + 1
    for part in path:
        if isinstance(part, int) and isinstance(node, yaml.SequenceNode):
            if not 0 <= part < len(node.value):
                break
            node = node.value[part]
        elif isinstance(part, str) and isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if str(k.value).casefold() == part.casefold()]
            if not match:
                break
            key_node, node = match[0]
            line = key_node.start_mark.line + 1
            continue
        else:
            break
        line = node.start_mark.line + 1
    return line


def _header(source: str, index: int, raw: object) -> str:
    if isinstance(raw, Mapping):
        values = {str(k).casefold(): v for k, v in raw.items()}
        parts = [values.get(k) for k in ("group", "version", "kind")]
        if all(isinstance(p, str) for p in parts):
            return f"{source}: entry {index} ({GVK(*parts)})"  # type: ignore[arg-type]
    return f"{source}: entry {index}"


def parse(
    text: str,
    *,
    source: str,
    environ: Mapping[str, str],
    base_dir: Path,
    check_paths: bool = True,
) -> tuple[Webhook, ...]:
    """Parse and validate webhooks.yaml text; raise ConfigError with one precise message.

    Roles are looked up as watches.yaml's are (`ANSIBLE_ROLES_PATH`, collections, then
    `<base_dir>/roles`); `${VAR}` is expanded from `environ` first, as there. Without
    `check_paths` (scaffolding, where the roles may not be written yet) a role is taken
    to be `<base_dir>/roles/<name>` and nothing is looked up.
    """
    ctx = _Context(
        check_paths=check_paths,
        base_dir=base_dir,
        roles_path=search_path(None, "ANSIBLE_ROLES_PATH", (), environ=environ, base_dir=base_dir),
        collections_path=search_path(
            None,
            "ANSIBLE_COLLECTIONS_PATH",
            DEFAULT_COLLECTIONS_PATH,
            environ=environ,
            base_dir=base_dir,
        ),
    )
    expanded = expand_env(text, environ)
    try:
        root = yaml.compose(expanded, Loader=yaml.SafeLoader)
        data = yaml.safe_load(expanded)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML {describe_yaml_error(exc)}") from None
    if root is None or data is None:
        return ()
    if not isinstance(data, list) or not isinstance(root, yaml.SequenceNode):
        raise ConfigError(
            f"{source}: expected a list of webhook declarations, got {describe(data)}"
        )
    webhooks: list[Webhook] = []
    seen: dict[tuple[str, GVK], int] = {}
    for index, (raw, node) in enumerate(zip(data, root.value, strict=True), start=1):
        header = _header(source, index, raw)
        try:
            found = _entry(raw, ctx)
            for webhook in found:
                identity = (
                    webhook.gvk
                    if webhook.type != "conversion"
                    else GVK(webhook.gvk.group, "", webhook.gvk.kind)
                )
                first = seen.get((webhook.type, identity))
                if first is not None:
                    what = "kind" if webhook.type == "conversion" else "GVK"
                    raise FieldError(
                        (webhook.type,),
                        f"a second {webhook.type} webhook for the same {what} "
                        f"(first declared by entry {first})",
                    )
                seen[(webhook.type, identity)] = index
        except FieldError as err:
            key = f"{err.key}: " if err.path else ""
            raise ConfigError(
                f"{header}: {key}{err.problem} (line {_line(node, err.path)})"
            ) from None
        webhooks += found
    return tuple(webhooks)


def load(path: Path, *, environ: Mapping[str, str], cwd: Path) -> tuple[Webhook, ...]:
    """Read and parse the file at `path` (relative to `cwd`); no file means no webhooks."""
    full = cwd / path
    try:
        text = full.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the webhooks file: {exc}") from None
    return parse(text, source=str(path), environ=environ, base_dir=cwd)
