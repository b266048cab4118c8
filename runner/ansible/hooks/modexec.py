"""Python modules as forks of the warm Ansible worker instead of new interpreters.

ansible-core runs every Python module task by starting a new interpreter on the target
(`/bin/sh -c '<python> && sleep 0'` with the AnsiballZ wrapper on stdin when pipelining).
For the `local` connection that interpreter is the controller's own, and most of its time
goes to starting up and importing `ansible.module_utils` and `kubernetes` — a `k8s_info`
task costs about 0.7 s before it sends its one request. The worker process that runs the
task already has all of that imported (the zygote warmed it, `zygote.py`), so here the
`local` connection forks the worker and runs the same wrapper in the child, with the same
stdin-less stdio, environment, exit code and output the interpreter would have produced.

Only what is known to behave the same takes this path (`modcommand.in_process_allowed`):
a pipelined Python module for this very interpreter (same virtualenv), no become, no
locale or `PYTHON*` variables in the task's environment, a module of an allow-listed
collection whose source is the one this process would import (the wrapper's copy is
compared with the file on disk), while no collection file the zygote imported has changed
on disk since (a `--reload` session editing a collection gets new interpreters for its
modules until the operator restarts). Everything else goes to the real `local` connection.

What the child resets so the module sees a target, not a controller:
`ansible.module_utils._internal.is_controller` (warnings and deprecations are then
returned in the result, as from a real target, instead of printed by the controller),
signal dispositions, `sys.argv`, `sys.path` (as a new interpreter has it), stdio, the
`__main__` module, `PWD` (the shell that would have started the interpreter exports
it), and `atexit` (the controller's handlers must not run in the child; the module's
own do, like its temporary directory cleanup).

Pipelining: `install()` also turns pipelining on for the local connection when become,
async and `ANSIBLE_KEEP_REMOTE_FILES` do not forbid it; on the controller's own host it
changes nothing but where the wrapper comes from (stdin instead of a temporary file).
"""

from __future__ import annotations

import atexit
import base64
import binascii
import builtins
import dataclasses
import importlib.util
import io
import os
import selectors
import signal
import sys
import time
import traceback
import types
import zipfile
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from runner.ansible.hooks import direct, inline, inprocess, localshell
from runner.ansible.hooks.modcommand import (
    ModuleCommand,
    in_process_allowed,
    parse_module_command,
    parse_wrapper,
)

__all__ = [
    "FORK_NOTE",
    "IN_PROCESS_NOTE",
    "install",
    "module_sys_path",
    "run_module",
    "sources_unchanged",
]

IN_PROCESS_NOTE = "module run in process"
"""Shown at -vvvv for each direct module run in the run's process (`inprocess`)."""
FORK_NOTE = "module run in a fork"
"""Shown at -vvvv for each module run in a fork instead of a new interpreter."""
_FALLBACK_EXIT = 70
"""Exit code of a child that failed before the module ran (EX_SOFTWARE)."""
_READ_SIZE = 65536
_RESET_SIGNALS = ("SIGTERM", "SIGHUP", "SIGCHLD", "SIGALRM", "SIGUSR1", "SIGUSR2", "SIGQUIT")

_module_path: list[str] = []
"""`sys.path` of a new interpreter, as the zygote found it (set by `install`)."""
_SOURCES_CHECK_SECONDS = 1.0
_sources_checked = [float("-inf")]
"""When `sources_unchanged` last found them unchanged (a run's process checks once at its
start, then at most once a second: each check stats every file)."""
_warm_sources: list[tuple[str, int, int]] = []
"""(path, mtime_ns, size) of each collection module the zygote imported (set by `install`):
a module run in a fork uses those imports, so they must still be what is on disk."""


def install(*, sys_path: Sequence[str]) -> None:
    """Route pipelined modules of the `local` connection through `run_module`.

    `sys_path` is what `sys.path` holds in a new interpreter of this virtualenv.
    """
    from ansible.plugins.connection import local

    connection: Any = local.Connection
    if getattr(connection, "_runner_in_process", False):
        return
    real_exec = connection.exec_command
    turn_on_pipelining = _pipelining_switch(connection)
    _module_path[:] = list(sys_path)
    _warm_sources[:] = _collection_sources()

    def exec_command(
        self: Any, cmd: str, in_data: bytes | None = None, sudoable: bool = True
    ) -> tuple[int, bytes, bytes]:
        if in_data is not None and not (sudoable and self.become):
            found = _module_command(self, cmd, in_data)
            if found is not None:
                command, fqn, is_direct = found
                _note(self, cmd, in_data=in_data, sudoable=sudoable)
                host = self._play_context.remote_addr
                if is_direct and inline.in_task():
                    _display().vvvv(f"{IN_PROCESS_NOTE}: {fqn}", host=host)
                    return inprocess.run_direct(
                        in_data,
                        environment=command.environment,
                        cwd=command.cwd,
                        sys_path=module_sys_path(),
                    )
                _display().vvvv(f"{FORK_NOTE}: {fqn}", host=host)
                return run_module(in_data, command)
        elif in_data is None and not self.become:
            done = _shell_command(self, cmd)
            if done is not None:
                _note(self, cmd, in_data=in_data, sudoable=sudoable)
                return done
        return real_exec(self, cmd, in_data=in_data, sudoable=sudoable)  # type: ignore[no-any-return]

    connection.exec_command = exec_command
    turn_on_pipelining()
    connection._runner_in_process = True


def _pipelining_switch(connection: Any) -> Callable[[], None]:
    """What turns pipelining on for the `local` connection (see the docstring), found
    before anything is patched: ansible-core 2.19 asks the connection
    (`Connection.is_pipelining_enabled`), 2.18 the action (`ActionBase._is_pipelining_enabled`,
    which also requires a new-style module)."""
    from ansible import constants

    def allowed(become: Any, wrap_async: bool) -> bool:
        return not become and not wrap_async and not constants.DEFAULT_KEEP_REMOTE_FILES

    real_connection = getattr(connection, "is_pipelining_enabled", None)
    if real_connection is not None:

        def is_pipelining_enabled(self: Any, wrap_async: bool = False) -> bool:
            return bool(real_connection(self, wrap_async)) or allowed(self.become, wrap_async)

        return lambda: setattr(connection, "is_pipelining_enabled", is_pipelining_enabled)

    from ansible.plugins.action import ActionBase

    real_action = ActionBase._is_pipelining_enabled

    def action_pipelining(self: Any, module_style: str, wrap_async: bool = False) -> bool:
        if real_action(self, module_style, wrap_async):
            return True
        local = self._connection
        return (
            isinstance(local, connection)
            and module_style == "new"
            and allowed(local.become, wrap_async)
        )

    return lambda: setattr(ActionBase, "_is_pipelining_enabled", action_pipelining)


def module_sys_path() -> list[str]:
    """`sys.path` for a module: a new interpreter's (see `install`)."""
    return list(_module_path)


def run_module(source: bytes, command: ModuleCommand) -> tuple[int, bytes, bytes]:
    """Run an AnsiballZ wrapper in a fork of this process: `(rc, stdout, stderr)`.

    `rc` is what `/bin/sh -c '<python> && sleep 0'` exits with: the module's exit code,
    or 128 + the signal that killed it.
    """
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child ends in os._exit
        try:
            os.close(out_read)
            os.close(err_read)
            _module_child(source, command, out_write, err_write)
        finally:
            os._exit(_FALLBACK_EXIT)
    os.close(out_write)
    os.close(err_write)
    stdout, stderr = _collect(out_read, err_read)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status), stdout, stderr
    return os.waitstatus_to_exitcode(status), stdout, stderr


def _note(connection: Any, cmd: str, *, in_data: bytes | None, sudoable: bool) -> None:
    """What the real `local` connection does before it runs a command (connects, shows it)."""
    from ansible.plugins.connection import ConnectionBase

    ConnectionBase.exec_command(connection, cmd, in_data=in_data, sudoable=sudoable)
    _display().vvv(f"EXEC {cmd}", host=connection._play_context.remote_addr)


# -- the decision -----------------------------------------------------------------------


def _module_command(
    connection: Any, cmd: str, in_data: bytes
) -> tuple[ModuleCommand, str, bool] | None:
    """(the command, the module, whether it is a direct program) to run without a new
    interpreter, or None: the real `local` connection runs it."""
    command = parse_module_command(cmd, executable=_executable(connection))
    if command is None or not direct.this_interpreter(command.interpreter):
        return None
    if connection.cwd:
        command = dataclasses.replace(command, cwd=os.fsdecode(connection.cwd))
    if any(name.startswith(direct.INTERPRETER_VARIABLES) for name in command.environment):
        return None
    fqn = direct_fqn = direct.module_of(in_data)  # imports its module: nothing to compare
    if fqn is None:
        wrapper = parse_wrapper(in_data)
        if wrapper is None or not in_process_allowed(wrapper.module_fqn):
            return None
        if not _same_source(wrapper.module_fqn, wrapper.zip_data, wrapper.module_member):
            return None
        fqn = wrapper.module_fqn
    if not sources_unchanged():
        return None  # edited since the zygote imported them: a new interpreter reads them
    return command, fqn, direct_fqn is not None


def _shell_command(connection: Any, cmd: str) -> tuple[int, bytes, bytes] | None:
    """A temporary-directory command done without a shell (`localshell`), or None."""
    command = localshell.parse(cmd, executable=_executable(connection))
    return localshell.run(command, os.environ) if command is not None else None


def _executable(connection: Any) -> str:
    return str(connection._play_context.executable or "/bin/sh")


def _same_source(fqn: str, zip_data: str, member: str) -> bool:
    """The wrapper carries the module this process imports under `fqn`, byte for byte."""
    try:
        payload = zipfile.ZipFile(io.BytesIO(base64.b64decode(zip_data)))
        packaged = payload.read(member)
        spec = importlib.util.find_spec(fqn)
    except (binascii.Error, zipfile.BadZipFile, KeyError, ImportError, ValueError):
        return False
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return False
    try:
        with open(spec.origin, "rb") as handle:
            return handle.read() == packaged
    except OSError:
        return False


def _collection_sources() -> list[tuple[str, int, int]]:
    sources = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not name.startswith("ansible_collections.") or not isinstance(path, str):
            continue
        try:
            info = os.stat(path)
        except OSError:
            continue
        sources.append((path, info.st_mtime_ns, info.st_size))
    return sources


def sources_unchanged() -> bool:
    """No collection file the zygote imported changed on disk (checked at most every
    `_SOURCES_CHECK_SECONDS`: a run checks at its start, then its modules)."""
    now = time.monotonic()
    if now < _sources_checked[0] + _SOURCES_CHECK_SECONDS:
        return True
    for path, mtime_ns, size in _warm_sources:
        try:
            info = os.stat(path)
        except OSError:
            return False
        if (info.st_mtime_ns, info.st_size) != (mtime_ns, size):
            return False
    _sources_checked[0] = now
    return True


def _display() -> Any:
    from ansible.utils.display import Display

    return Display()


# -- the parent -------------------------------------------------------------------------


def _collect(out_fd: int, err_fd: int) -> tuple[bytes, bytes]:
    chunks: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
    with selectors.DefaultSelector() as selector:
        selector.register(out_fd, selectors.EVENT_READ)
        selector.register(err_fd, selectors.EVENT_READ)
        while selector.get_map():
            for key, _ in selector.select():
                fd = int(key.fd)
                try:
                    chunk = os.read(fd, _READ_SIZE)
                except InterruptedError:
                    continue
                if chunk:
                    chunks[fd].append(chunk)
                else:
                    selector.unregister(fd)
                    os.close(fd)
    return b"".join(chunks[out_fd]), b"".join(chunks[err_fd])


# -- the child --------------------------------------------------------------------------


def _module_child(
    source: bytes, command: ModuleCommand, out_fd: int, err_fd: int
) -> NoReturn:  # pragma: no cover - runs in a forked child
    _stdio(out_fd, err_fd)
    _reset_signals()
    os.environ.update(command.environment)
    if command.cwd:
        os.chdir(command.cwd)
    inprocess.set_shell_pwd()
    inprocess.target_mode()  # for good: this process is the module's
    atexit._clear()
    sys.argv = [""]
    sys.path[:] = module_sys_path()
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    code = 0
    try:
        exec(compile(source, "<stdin>", "exec"), main.__dict__)
    except SystemExit as exc:
        code = inprocess.system_exit_code(exc)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 120  # what Python exits with when flushing stdout fails
    os._exit(code & 0xFF)


def _stdio(out_fd: int, err_fd: int) -> None:
    """fds 0-2 and `sys.std*` as a new interpreter with piped stdio has them."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    limit = min(os.sysconf("SC_OPEN_MAX"), 65536)
    os.closerange(3, limit)
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8", errors="strict"
    )
    stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors="backslashreplace",
        line_buffering=True,
    )
    sys.stdin = sys.__stdin__ = stdin  # type: ignore[misc]
    sys.stdout = sys.__stdout__ = stdout  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = stderr  # type: ignore[misc]


def _reset_signals() -> None:
    for name in _RESET_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
