"""The pure parts of the fast backend: what crosses between its processes, and why.

The fast backend (`fast.py`) runs each Ansible run as a fork of a warm zygote process
(`zygoteprocess.py`). Everything the two need to agree on, and can decide without IO, lives here
so it is tested by tables:

- the control messages between the operator and the zygote (one JSON object per
  `SOCK_SEQPACKET` datagram; a run request carries the run's terminal as an fd);
- which environment variables differ from run to run (`PER_RUN_ENV`) and therefore which
  zygote a run belongs to: a zygote is warmed up with everything else, so two runs whose
  other variables differ need different zygotes (`zygote_env`, `zygote_key`);
- the command line of the in-process `ansible-playbook` (`playbook_argv`);
- a child's exit status as ansible-runner reports it (`exit_code`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DISCOVER_AUTHORIZATION_ENV",
    "MAX_MESSAGE",
    "PER_RUN_ENV",
    "STALE_EXIT",
    "Discovery",
    "decode",
    "encode",
    "exit_code",
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


def exit_code(status: int) -> int | None:
    """The exit code in a `waitpid` status, or None when a signal ended the process.

    ansible-runner takes pexpect's `exitstatus`, which is None for a killed process; its
    `rc` artifact then reads `None` and the run's status is `failed`.
    """
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return None
