"""The ansible-runner input directory of one run, described as data.

Roles written for the Go operator see the same private data directory it wrote
(`/tmp/ansible-operator/runner/<group>/<version>/<kind>/<namespace>/<name>/`, ours under
a configurable base): `env/extravars`, `env/envvars`, `env/cmdline`, `inventory/hosts`,
`project/`. Keeping that layout keeps `artifacts/` where users and tools look for it.

Everything here is pure: a `RunRequest` describes a run, and functions of it and of the
operator's environment (passed in, never read from `os.environ`) say which files to write,
what to copy, and what to hand to ansible-runner. The IO happens in `runs.py`.

Deliberate differences from the original, invisible to roles:
- a role run keeps the operator's `ANSIBLE_ROLES_PATH` after the role's parent directory
  (the original replaced it, so roles depending on other roles from that path failed);
- the wrapper play of a role run is written by us as `project/main.json` (the file name
  ansible-runner itself uses), so the backend needs no ansible-runner side effects.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.structs.gvk import GVK

__all__ = [
    "DEFAULT_MAX_ARTIFACTS",
    "DEFAULT_RUNNER_DIR",
    "DEFAULT_VERBOSITY",
    "HOSTS_FILE",
    "KUBECONFIG_FILE",
    "ROLE_PLAYBOOK",
    "RUNNER_DIR_ENV",
    "RunRequest",
    "hosts_line",
    "input_copies",
    "inventory_source",
    "new_ident",
    "private_data_dir",
    "render_inputs",
    "role_playbook",
    "roles_path",
    "runner_args",
    "runner_config",
    "runner_dir",
    "strip_quotes",
]

DEFAULT_VERBOSITY = 2
DEFAULT_MAX_ARTIFACTS = 20
DEFAULT_RUNNER_DIR = "/tmp/ansible-operator/runner"
"""The Go operator's base of the data directories; a writable volume there keeps a
read-only root file system working."""
RUNNER_DIR_ENV = "ANSIBLE_OPERATOR_RUNNER_DIR"

EXTRAVARS_FILE = "env/extravars"
ENVVARS_FILE = "env/envvars"
CMDLINE_FILE = "env/cmdline"
HOSTS_FILE = "inventory/hosts"
KUBECONFIG_FILE = "kubeconfig"
"""The run's own kubeconfig (the API proxy, as this CR's owner); removed after the run."""
INVENTORY_DIR = "inventory"
PLAYBOOK_COPY = "project/playbook.yaml"
ROLE_PLAYBOOK = "project/main.json"
"""The play wrapping a role, where ansible-runner's own `--role` writes it."""

MANAGED_FILES = (CMDLINE_FILE, PLAYBOOK_COPY, ROLE_PLAYBOOK, KUBECONFIG_FILE)
"""Files some runs write and others do not: a writer removes those a run does not render."""

_MAX_IDENT = 2**63
_ROLES_DIR = "roles"


def new_ident() -> str:
    """A random non-negative integer as a string, like the Go operator's job idents."""
    return str(secrets.randbelow(_MAX_IDENT))


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """Everything one Ansible run of one CR depends on.

    Exactly one of `role` (a role directory) or `playbook` (a playbook file) is given, as
    an absolute path already resolved by the watch (`runner/watches/model.py`): ansible-playbook
    runs in `project/`, where a relative path would mean something else. `cmdline` is the raw
    `--ansible-args` value; `envvars` are the per-run variables for `env/envvars`.
    `kubeconfig` is the content of the run's own kubeconfig (the API proxy's, naming this
    CR as the owner): it is written into the data directory and `K8S_AUTH_KUBECONFIG` and
    `KUBECONFIG` point at it.
    `max_artifacts` <= 0 keeps every artifact directory.
    """

    gvk: GVK
    namespace: str
    name: str
    extravars: Mapping[str, Any] = field(default_factory=dict)
    role: Path | None = None
    playbook: Path | None = None
    verbosity: int = DEFAULT_VERBOSITY
    cmdline: str = ""
    envvars: Mapping[str, str] = field(default_factory=dict)
    kubeconfig: Mapping[str, Any] | None = None
    max_artifacts: int = DEFAULT_MAX_ARTIFACTS
    ident: str = field(default_factory=new_ident)

    def __post_init__(self) -> None:
        if (self.role is None) == (self.playbook is None):
            raise ValueError(
                f"{self.gvk.kind} {self.namespace}/{self.name}: "
                "a run needs exactly one of role or playbook"
            )
        target = self.role if self.role is not None else self.playbook
        if target is not None and not target.is_absolute():
            raise ValueError(f"role or playbook path must be absolute, got {str(target)!r}")
        if not self.name:
            raise ValueError(f"{self.gvk.kind}: a run needs the object's name")
        if not self.ident or "/" in self.ident or self.ident in (".", "..", "latest"):
            raise ValueError(f"invalid run ident {self.ident!r}")


def runner_dir(environ: Mapping[str, str]) -> Path:
    """The base of the data directories: `$ANSIBLE_OPERATOR_RUNNER_DIR` or the default."""
    return Path(environ.get(RUNNER_DIR_ENV) or DEFAULT_RUNNER_DIR)


def private_data_dir(base: Path, gvk: GVK, namespace: str, name: str) -> Path:
    """`<base>/<group>/<version>/<kind>/<namespace>/<name>`; empty segments are dropped."""
    parts = [part for part in (gvk.group, gvk.version, gvk.kind, namespace, name) if part]
    return base.joinpath(*parts)


def strip_quotes(cmdline: str) -> str:
    """`--ansible-args` without one pair of surrounding single quotes, as the original."""
    if len(cmdline) >= 2 and cmdline[0] == "'" and cmdline[-1] == "'":
        return cmdline[1:-1]
    if cmdline == "'":
        return ""
    return cmdline


def hosts_line(environ: Mapping[str, str]) -> str:
    """The generated inventory: localhost, with the operator's venv Python if there is one."""
    venv = environ.get("VIRTUAL_ENV", "")
    interpreter = str(Path(venv, "bin", "python3")) if venv else "{{ansible_playbook_python}}"
    return f"localhost ansible_connection=local ansible_python_interpreter={interpreter}"


def inventory_source(environ: Mapping[str, str]) -> Path | None:
    """`ANSIBLE_INVENTORY`, copied into `inventory/` instead of the generated hosts file."""
    source = environ.get("ANSIBLE_INVENTORY", "")
    return Path(source) if source else None


def role_playbook(role: Path, *, environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """The play ansible-runner's `--role <name> --hosts localhost` would write."""
    play: dict[str, Any] = {"hosts": "localhost", "roles": [{"name": role.name}]}
    if _skip_facts(environ):
        play["gather_facts"] = False
    return [play]


def render_inputs(
    request: RunRequest, *, environ: Mapping[str, str], data_dir: Path
) -> dict[str, str]:
    """The files to write into `data_dir`: `{relative path: content}`.

    `inventory/hosts` is absent when `ANSIBLE_INVENTORY` is set (see `inventory_source`),
    `env/cmdline` when `--ansible-args` is empty, `project/main.json` for playbook runs,
    `kubeconfig` when the request has none. The playbook copy is in `input_copies`.
    """
    envvars = dict(request.envvars)
    files: dict[str, str] = {}
    if request.kubeconfig is not None:
        files[KUBECONFIG_FILE] = json.dumps(dict(request.kubeconfig), sort_keys=True)
        path = str(data_dir / KUBECONFIG_FILE)
        envvars.update(K8S_AUTH_KUBECONFIG=path, KUBECONFIG=path)
    files[EXTRAVARS_FILE] = json.dumps(dict(request.extravars), sort_keys=True)
    files[ENVVARS_FILE] = json.dumps(envvars, sort_keys=True)
    cmdline = strip_quotes(request.cmdline)
    if cmdline:
        files[CMDLINE_FILE] = cmdline
    if inventory_source(environ) is None:
        files[HOSTS_FILE] = hosts_line(environ)
    if request.role is not None:
        files[ROLE_PLAYBOOK] = json.dumps(role_playbook(request.role, environ=environ))
    return files


def input_copies(request: RunRequest) -> dict[str, Path]:
    """Files copied into the data directory: `{relative path: source}`.

    The playbook is copied to `project/playbook.yaml` for reference, as the original did;
    it still runs from where it is, so paths relative to it keep working.
    """
    if request.playbook is None:
        return {}
    return {PLAYBOOK_COPY: request.playbook}


def runner_args(request: RunRequest, *, data_dir: Path, environ: Mapping[str, str]) -> list[str]:
    """The Go operator's `ansible-runner` command line for this run (without the binary).

    Playbook: `run <dir> --rotate-artifacts N -p <abs playbook> -i <ident> [-v…]`;
    role: `run <dir> --rotate-artifacts N --role <name> --roles-path <parent>/
    --hosts localhost -i <ident> [-v…] [--role-skip-facts]`.
    """
    args = ["run", str(data_dir), "--rotate-artifacts", str(request.max_artifacts)]
    if request.playbook is not None:
        args += ["-p", str(request.playbook)]
        args += ["-i", request.ident]
        args += _verbosity_flags(request.verbosity)
        return args
    assert request.role is not None  # guaranteed by RunRequest
    args += ["--role", request.role.name, "--roles-path", _parent_dir(request.role)]
    args += ["--hosts", "localhost", "-i", request.ident]
    args += _verbosity_flags(request.verbosity)
    if _skip_facts(environ):
        args.append("--role-skip-facts")
    return args


def runner_config(
    request: RunRequest, *, data_dir: Path, environ: Mapping[str, str]
) -> dict[str, Any]:
    """Keyword arguments for `ansible_runner.RunnerConfig` that run what `runner_args` says.

    Artifact rotation is ours (`artifacts.py`, after the run), so ansible-runner's is off:
    it counts the `latest` link as a run and cannot remove it. `quiet` keeps Ansible's
    output off the operator's stdout; logging decides what to print.
    """
    envvars: dict[str, str] = {}
    if request.playbook is not None:
        playbook = str(request.playbook)
    else:
        assert request.role is not None  # guaranteed by RunRequest
        playbook = str(data_dir / ROLE_PLAYBOOK)
        envvars["ANSIBLE_ROLES_PATH"] = roles_path(request.role, data_dir=data_dir, environ=environ)
    return {
        "private_data_dir": str(data_dir),
        "playbook": playbook,
        "ident": request.ident,
        "verbosity": request.verbosity if request.verbosity > 0 else None,
        "rotate_artifacts": 0,
        "envvars": envvars,
        "quiet": True,
    }


def roles_path(role: Path, *, data_dir: Path, environ: Mapping[str, str]) -> str:
    """`ANSIBLE_ROLES_PATH` of a role run: the role's parent, the operator's path, `<dir>/roles`."""
    entries = [_parent_dir(role)]
    entries += [entry for entry in environ.get("ANSIBLE_ROLES_PATH", "").split(":") if entry]
    entries.append(str(data_dir / _ROLES_DIR))
    return ":".join(entries)


# -- internals ------------------------------------------------------------------------


def _skip_facts(environ: Mapping[str, str]) -> bool:
    # ansible-runner's role play ignores ANSIBLE_GATHERING, so the original passes
    # --role-skip-facts for it.
    return environ.get("ANSIBLE_GATHERING") == "explicit"


def _parent_dir(role: Path) -> str:
    """The role's parent directory with a trailing slash, as Go's `filepath.Split`."""
    parent = str(role.parent)
    return parent if parent.endswith("/") else f"{parent}/"


def _verbosity_flags(verbosity: int) -> list[str]:
    return [f"-{'v' * verbosity}"] if verbosity > 0 else []
