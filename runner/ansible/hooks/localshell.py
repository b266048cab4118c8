"""The temporary-directory commands of the `local` connection, done without a shell.

Around the module of every action that transfers files (`kubernetes.core.k8s`,
`k8s_info`, `copy`, `template`, ...), ansible-core asks the target's shell three things:
where the home directory is (`echo ~user`), to make a private temporary directory
(`( umask 77 && mkdir -p ... && mkdir ... && echo ... )`) and to remove it
(`rm -f -r ...`). On the `local` connection each is a `/bin/sh` started by a large
Python process, about 7 ms apiece: a fifth of a Kubernetes task's time in the fast
backend. The fast backend's `local` connection (`modexec.install`) answers them here.

Only the exact commands ansible-core's `sh` shell plugin writes are recognized
(`parse`: the command is rebuilt from what was read and must come out identical), with
paths made only of characters the shell passes through unchanged. `run` does what the
shell would have done and gives the same exit code and output; where that is not
certain — `HOME` unset or unusual, a directory that cannot be made, a file that cannot
be removed — it returns None and the real shell runs the command, with its own messages.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ExpandHome", "MakeTemp", "Remove", "parse", "run"]

_PLAIN_PATH = re.compile(r"/[A-Za-z0-9_.@%+=:,/-]*")
"""An absolute path in which `sh` expands, splits and escapes nothing (and `echo`
interprets no backslash)."""
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_USER = re.compile(r"[_.A-Za-z0-9][-_.A-Za-z0-9]*")
"""A user name ansible-core writes unquoted after `~` (its shell plugin's own rule)."""
_MKDTEMP = re.compile(
    r'\( umask 77 && mkdir -p "` echo (?P<base>\S+) `"&& mkdir "` echo (?P<path>\S+) `"'
    r' && echo (?P<name>[^=\s]+)="` echo (?P<again>\S+) `" \)'
)
_REMOVE_SUFFIX = " > /dev/null 2>&1"
_TAIL = " && sleep 0"
_PRIVATE = 0o700


@dataclass(frozen=True)
class ExpandHome:
    """`echo ~` (`$HOME`) or `echo ~user` (that user's home directory)."""

    user: str = ""


@dataclass(frozen=True)
class MakeTemp:
    """`mkdir -p base && mkdir base/name && echo name=base/name`, under umask 077."""

    base: str
    name: str

    @property
    def path(self) -> str:
        return os.path.join(self.base, self.name)


@dataclass(frozen=True)
class Remove:
    """`rm -f -r path`, output discarded."""

    path: str


Command = ExpandHome | MakeTemp | Remove


def parse(cmd: object, *, executable: str) -> Command | None:
    """The temporary-directory command `cmd` is, or None for anything else.

    `cmd` is what the connection is asked to run: `<executable> -c '<command> && sleep 0'`
    (`ActionBase._low_level_execute_command` without become).
    """
    if not isinstance(cmd, str) or not cmd.startswith(f"{executable} -c "):
        return None
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    if len(words) != 3 or words[:2] != [executable, "-c"] or not words[2].endswith(_TAIL):
        return None
    inner = words[2].removesuffix(_TAIL)
    command = _parse_inner(inner)
    if command is None or cmd != f"{executable} -c {shlex.quote(command_text(command) + _TAIL)}":
        return None
    return command


def _parse_inner(inner: str) -> Command | None:
    if inner.startswith("echo ~"):
        user = inner.removeprefix("echo ~")
        return ExpandHome(user) if not user or _USER.fullmatch(user) else None
    if inner.startswith("rm -f -r ") and inner.endswith(_REMOVE_SUFFIX):
        try:
            target = shlex.split(inner.removesuffix(_REMOVE_SUFFIX))[3:]
        except ValueError:
            return None
        return Remove(target[0]) if len(target) == 1 and _plain(target[0]) else None
    found = _MKDTEMP.fullmatch(inner)
    if found is None:
        return None
    base, name = found["base"], found["name"]
    if not (_plain(base) and _PLAIN_NAME.fullmatch(name)):
        return None
    made = MakeTemp(base=base, name=name)
    return made if found["path"] == found["again"] == made.path else None


def command_text(command: Command) -> str:
    """The command as ansible-core's `sh` shell plugin writes it (without `&& sleep 0`)."""
    if isinstance(command, ExpandHome):
        return f"echo ~{command.user}"
    if isinstance(command, Remove):
        return f"rm -f -r {shlex.quote(command.path)}{_REMOVE_SUFFIX}"
    path = command.path
    return (
        f'( umask 77 && mkdir -p "` echo {command.base} `"&& mkdir "` echo {path} `"'
        f' && echo {command.name}="` echo {path} `" )'
    )


def _plain(path: str) -> bool:
    return bool(_PLAIN_PATH.fullmatch(path)) and ".." not in path.split("/")


def run(command: Command, environ: Mapping[str, str]) -> tuple[int, bytes, bytes] | None:
    """`(rc, stdout, stderr)` as the shell gives them, or None: let the shell run it."""
    if isinstance(command, ExpandHome):
        home = _home(command.user, environ)
        return (0, f"{home}\n".encode(), b"") if home is not None and _plain(home) else None
    if isinstance(command, MakeTemp):
        return _make_temp(command)
    return _remove(command.path)


def _home(user: str, environ: Mapping[str, str]) -> str | None:
    """What the shell puts for `~user`: `$HOME` for no user, else the password entry's."""
    if not user:
        return environ.get("HOME")
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return None  # the shell leaves `~user` as it is


def _make_temp(command: MakeTemp) -> tuple[int, bytes, bytes] | None:
    try:
        _make_private_dirs(command.base)
        os.mkdir(command.path, _PRIVATE)
        _make_private(command.path)
    except OSError:
        return None
    return 0, f"{command.name}={command.path}\n".encode(), b""


def _make_private_dirs(path: str) -> None:
    """`mkdir -p` under umask 077: missing directories are made with mode 0700."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent != path:
        _make_private_dirs(parent)
    os.mkdir(path, _PRIVATE)
    _make_private(path)


def _make_private(path: str) -> None:
    """Mode 0700 whatever this process's umask is (the shell's subshell had 077)."""
    if stat.S_IMODE(os.stat(path).st_mode) != _PRIVATE:
        os.chmod(path, _PRIVATE)


def _remove(path: str) -> tuple[int, bytes, bytes] | None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0, b"", b""
    except OSError:
        return None
    try:
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        return None
    return 0, b"", b""
