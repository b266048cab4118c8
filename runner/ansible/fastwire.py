"""The pure parts of the fast backend: what crosses between its processes, and why.

The fast backend (`fast.py`) runs each Ansible run as a fork of a warm zygote process
(`zygote.py`), and inside that run executes allow-listed Python modules as forks of the
warm worker instead of new interpreters (`modexec.py`). Everything those three need to
agree on, and can decide without IO, lives here so it is tested by tables:

- the control messages between the operator and the zygote (one JSON object per
  `SOCK_SEQPACKET` datagram; a run request carries the run's terminal as an fd);
- which environment variables differ from run to run (`PER_RUN_ENV`) and therefore which
  zygote a run belongs to: a zygote is warmed up with everything else, so two runs whose
  other variables differ need different zygotes (`zygote_env`, `zygote_key`);
- the command line of the in-process `ansible-playbook` (`playbook_argv`);
- whether a command the `local` connection is asked to run is a pipelined Python module
  for this very interpreter (`parse_module_command`), which module the AnsiballZ wrapper
  carries (`parse_wrapper`) and whether it may run in-process (`in_process_allowed`);
- a child's exit status as ansible-runner reports it (`exit_code`).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DISCOVER_AUTHORIZATION_ENV",
    "IN_PROCESS_PREFIXES",
    "MAX_MESSAGE",
    "PER_RUN_ENV",
    "STALE_EXIT",
    "Discovery",
    "ModuleCommand",
    "WrapperArgs",
    "decode",
    "encode",
    "exit_code",
    "in_process_allowed",
    "parse_module_command",
    "parse_wrapper",
    "playbook_argv",
    "zygote_env",
    "zygote_key",
]

DISCOVER_AUTHORIZATION_ENV = "ANSIBLE_OPERATOR_DISCOVER_AUTHORIZATION"
"""Carries `Discovery.authorization` to the zygote."""

STALE_EXIT = 75
"""Exit code of a run's child that found a collection file changed since the zygote
imported it: it ran nothing; the backend starts a new zygote and runs it again."""

MAX_MESSAGE = 4 * 1024 * 1024
"""Largest control message; a run request holds the run's whole environment."""

PER_RUN_ENV = frozenset(
    {
        # ansible-runner's artifact directory of this run, and its fact cache inside it.
        "AWX_ISOLATED_DATA_DIR",
        "ANSIBLE_CACHE_PLUGIN_CONNECTION",
        # A role run puts the role's parent first (inputs.roles_path).
        "ANSIBLE_ROLES_PATH",
        # The run's own kubeconfig (the API proxy, naming this CR as the owner).
        "K8S_AUTH_KUBECONFIG",
        "KUBECONFIG",
    }
)
"""Variables that differ between runs of one operator. Ansible reads the roles path and
the fact cache location when a run uses them, so a child just sets them; every other
variable is fixed when the zygote warms up (plugin paths, collections, callbacks)."""

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


def encode(message: Mapping[str, Any]) -> bytes:
    """One control message as bytes (compact JSON)."""
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"control message of {len(data)} bytes is larger than {MAX_MESSAGE}")
    return data


def decode(data: bytes) -> dict[str, Any]:
    """One control message from bytes; `ValueError` unless it is a JSON object."""
    message = json.loads(data.decode("utf-8"))
    if not isinstance(message, dict):
        raise ValueError(f"control message is not an object: {message!r}")
    return message


@dataclass(frozen=True)
class Discovery:
    """What a zygote discovers of the API while it warms up, so that the first run after
    the operator starts finds the Kubernetes modules' discovery caches filled (later
    runs would otherwise share the one the first run makes)."""

    url: str
    """The API proxy as runs reach it, without an owner."""
    kinds: tuple[tuple[str, str], ...]
    """(apiVersion, kind) to look up, as a module would."""
    authorization: str = field(default="", repr=False)
    """The Authorization header the proxy requires. The zygote gets it in its environment
    (`env()`) and removes it from there at once; never on its command line, which any
    local user can read."""

    def env(self) -> dict[str, str]:
        """The zygote's environment variables for it."""
        return {DISCOVER_AUTHORIZATION_ENV: self.authorization} if self.authorization else {}

    def argv(self) -> list[str]:
        """The zygote's command-line options for it."""
        options = ["--discover-url", self.url]
        for api_version, kind in self.kinds:
            options += ["--discover-kind", f"{api_version}:{kind}"]
        return options

    @classmethod
    def from_argv(
        cls, url: str | None, kinds: Sequence[str], *, authorization: str = ""
    ) -> Discovery | None:
        """The inverse of `argv` and `env` (None without a URL); `ValueError` for a bad
        kind."""
        if not url:
            return None
        parsed = []
        for entry in kinds:
            api_version, _, kind = entry.rpartition(":")
            if not api_version or not kind:
                raise ValueError(f"--discover-kind {entry!r} is not <apiVersion>:<kind>")
            parsed.append((api_version, kind))
        return cls(url=url, kinds=tuple(parsed), authorization=authorization)


def zygote_env(run_env: Mapping[str, str]) -> dict[str, str]:
    """The environment a zygote for `run_env` is started with: all but `PER_RUN_ENV`."""
    return {key: value for key, value in run_env.items() if key not in PER_RUN_ENV}


def zygote_key(run_env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Runs with equal keys can share a zygote."""
    return tuple(sorted(zygote_env(run_env).items()))


def playbook_argv(command: Sequence[str], *, program: str) -> list[str]:
    """`sys.argv` of the in-process ansible-playbook for ansible-runner's `command`.

    ansible-runner starts `ansible-playbook ...` found on `PATH`; the in-process run is
    this interpreter's own ansible-playbook, `program`. `ValueError` for anything else.
    """
    if not command or os.path.basename(command[0]) != "ansible-playbook":
        raise ValueError(f"not an ansible-playbook command: {list(command)!r}")
    return [program, *command[1:]]


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


def exit_code(status: int) -> int | None:
    """The exit code in a `waitpid` status, or None when a signal ended the process.

    ansible-runner takes pexpect's `exitstatus`, which is None for a killed process; its
    `rc` artifact then reads `None` and the run's status is `failed`.
    """
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return None
