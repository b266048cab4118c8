"""Direct Kubernetes modules run inside the run's own process.

With tasks executed in the run's process (`inline`), a module forked from it still pays
for the fork, for faulting its pages back in, and for setting up its API client from
scratch: about half of a Kubernetes task. The direct modules (`direct.py`: the
`kubernetes.core` and `operator_sdk.util` modules, run from the controller's own
installation) are run here instead, in the process, and a module's API client stays
for the next task of the run (`kubernetes.core` keeps its clients by configuration) —
the "one API client per run" of the fast backend.

A module must not be able to tell, nor leave anything behind for the run. For the
module's duration this process looks like the new interpreter the `local` connection
would have started: the task's environment (and `PWD`) and working directory, stdin
empty, stdout and stderr captured, `sys.argv` and `sys.path` of a new interpreter, the
`module_utils` in target mode (warnings and deprecations come back in the result), no
recorded warnings. Afterwards all of it is put back as it was — environment, directory,
`sys` attributes, signal handlers, umask, the open-files limit, target-mode switches —
and `SystemExit` becomes the exit code. Any other `BaseException` (the task's timeout,
an interrupt) is the controller's and propagates after the restore. Callbacks of the
strategy's results thread are held off meanwhile (`inline.callback_lock`), as they run
controller code.

`atexit` handlers a module registers run when the run's process ends, the interpreter
they were registered in: module state that outlives the module stays valid for the run
(the client `kubernetes.core` keeps refers to the certificate files `kubernetes`
writes, and removes at exit), and a handler's outcome never changed a module's result.
"""

from __future__ import annotations

import builtins
import contextlib
import copy
import io
import os
import resource
import signal
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from runner.ansible.hooks import inline

__all__ = [
    "restore_mode",
    "run_direct",
    "set_shell_pwd",
    "system_exit_code",
    "target_mode",
]


def run_direct(
    source: bytes,
    *,
    environment: Mapping[str, str],
    cwd: str | None,
    sys_path: Sequence[str],
) -> tuple[int, bytes, bytes]:
    """Run a direct program (`direct.program`) here: `(rc, stdout, stderr)`, as a new
    interpreter started by `/bin/sh -c` would give them."""
    code = compile(source, "<stdin>", "exec")
    stdout, stderr = io.BytesIO(), io.BytesIO()
    with inline.callback_lock(), _as_new_interpreter(environment, cwd, sys_path, stdout, stderr):
        rc = 0
        try:
            exec(code, {"__name__": "__main__", "__builtins__": builtins})
        except SystemExit as exc:
            rc = system_exit_code(exc)
        except Exception:
            traceback.print_exc()
            rc = 1
        rc = _flush(rc)
    return rc, stdout.getvalue(), stderr.getvalue()


@contextlib.contextmanager
def _as_new_interpreter(
    environment: Mapping[str, str],
    cwd: str | None,
    sys_path: Sequence[str],
    stdout: io.BytesIO,
    stderr: io.BytesIO,
) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        stack.enter_context(_environment(environment))
        stack.enter_context(_directory(cwd))
        stack.enter_context(_interpreter_state(sys_path, stdout, stderr))
        stack.enter_context(_process_settings())
        stack.enter_context(_target_mode())
        yield


@contextlib.contextmanager
def _environment(environment: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(environment)
    try:
        yield
    finally:
        for name in [name for name in os.environ if name not in saved]:
            del os.environ[name]
        for name, value in saved.items():
            if os.environ.get(name) != value:
                os.environ[name] = value


@contextlib.contextmanager
def _directory(cwd: str | None) -> Iterator[None]:
    """The connection's directory, and `PWD` as the shell that starts the module sets it."""
    saved = os.getcwd()
    if cwd:
        os.chdir(cwd)
    set_shell_pwd()  # put back by `_environment`
    try:
        yield
    finally:
        os.chdir(saved)


def set_shell_pwd() -> None:
    """`PWD` as `/bin/sh` exports it to the interpreter it starts: the working directory,
    unless `PWD` already names that same directory."""
    here = os.getcwd()
    current = os.environ.get("PWD", "")
    try:
        same = bool(current) and os.path.isabs(current) and os.path.samefile(current, here)
    except OSError:
        same = False
    if not same:
        os.environ["PWD"] = here


@contextlib.contextmanager
def _interpreter_state(
    sys_path: Sequence[str], stdout: io.BytesIO, stderr: io.BytesIO
) -> Iterator[None]:
    saved = (sys.argv, list(sys.path), sys.stdin, sys.stdout, sys.stderr)
    streams = (
        io.TextIOWrapper(io.BytesIO(), encoding="utf-8"),
        io.TextIOWrapper(stdout, encoding="utf-8", errors="strict", write_through=True),
        io.TextIOWrapper(stderr, encoding="utf-8", errors="backslashreplace", write_through=True),
    )
    sys.argv = [""]
    sys.path[:] = list(sys_path)
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        yield
    finally:
        for stream in streams:
            with contextlib.suppress(ValueError):
                stream.detach()  # the buffers stay readable
        sys.argv, path, sys.stdin, sys.stdout, sys.stderr = saved
        sys.path[:] = path


@contextlib.contextmanager
def _process_settings() -> Iterator[None]:
    """Signal handlers, umask and the open-files limit: whatever the module changes."""
    handlers = {number: signal.getsignal(number) for number in _CATCHABLE_SIGNALS}
    umask = os.umask(0o022)
    os.umask(umask)
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        yield
    finally:
        for number, handler in handlers.items():
            if handler is not None and signal.getsignal(number) is not handler:
                with contextlib.suppress(OSError, ValueError):
                    signal.signal(number, handler)
        os.umask(umask)
        if resource.getrlimit(resource.RLIMIT_NOFILE) != limit:
            with contextlib.suppress(OSError, ValueError):
                resource.setrlimit(resource.RLIMIT_NOFILE, limit)


_CATCHABLE_SIGNALS = [
    number
    for number in signal.valid_signals()
    if number not in (signal.SIGKILL, signal.SIGSTOP) and number < signal.SIGRTMIN
]


@contextlib.contextmanager
def _target_mode() -> Iterator[None]:
    saved = target_mode()
    try:
        yield
    finally:
        restore_mode(saved)


_SWITCHES = ("is_controller", "get_controller_serialize_map", "import_controller_module")
"""What importing the controller switches in `ansible.module_utils._internal` (2.19; 2.18
has no such switches: its module_utils behave the same on both sides)."""
_TARGET_VALUES: dict[str, Any] = {
    "is_controller": False,
    "get_controller_serialize_map": dict,
    "import_controller_module": lambda _name: None,
}


def target_mode() -> tuple[Any, ...]:
    """Switch `module_utils` to how a target has it: what importing the controller
    switched, undone, and no recorded warnings. Returns what `restore_mode` puts back."""
    from ansible.module_utils import _internal, basic
    from ansible.module_utils.common import warnings

    switches = {name: getattr(_internal, name) for name in _SWITCHES if hasattr(_internal, name)}
    arguments = {
        name: getattr(basic, name)
        for name in ("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE")
        if hasattr(basic, name)
    }
    registries = {
        name: copy.copy(getattr(warnings, name))
        for name in ("_global_warnings", "_global_deprecations")
        if isinstance(getattr(warnings, name, None), dict | list)
    }
    for name in switches:
        setattr(_internal, name, _TARGET_VALUES[name])
    for name in registries:
        getattr(warnings, name).clear()
    return switches, arguments, registries


def restore_mode(saved: tuple[Any, ...]) -> None:
    """Undo `target_mode`."""
    from ansible.module_utils import _internal, basic
    from ansible.module_utils.common import warnings

    switches, arguments, registries = saved
    for name, value in switches.items():
        setattr(_internal, name, value)
    for name, value in arguments.items():
        setattr(basic, name, value)
    for name, entries in registries.items():
        registry = getattr(warnings, name)
        registry.clear()
        if isinstance(registry, dict):
            registry.update(entries)
        else:
            registry.extend(entries)


def _flush(rc: int) -> int:
    try:
        sys.stdout.flush()
    except Exception:
        return rc or 120  # what Python exits with when flushing stdout fails
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    return rc


def system_exit_code(exc: SystemExit) -> int:
    """The exit code Python gives `sys.exit(exc.code)` (a message goes to stderr)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1
