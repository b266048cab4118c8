"""The zygote: a warm process that forks one `ansible-playbook` per run.

Started by the fast backend (`fast.py`) as `python -m runner.ansible.zygote --fd N --store
DIR` (DIR: its private directory, for the payload store; the backend removes it), one
per operator (per distinct run environment, see `fastwire.zygote_key`). It imports and
warms up what every run needs once — ansible-core's CLI, executor and plugin loaders with
their documentation-derived configuration, the collection finder, `kubernetes` and the
module_utils of the allow-listed collections — then waits on the control socket `N`:

    operator -> zygote   {"op": "run", "id", "spec"}  + the run's terminal (SCM_RIGHTS)
                         {"op": "cancel", "id"}
    zygote -> operator   {"op": "ready", "pid", "seconds", "errors", "left_out"}
                         {"op": "started", "id", "pid"} | {"op": "failed", "id", "error"}
                         {"op": "exited", "id", "status"}   (a waitpid status)

`spec` is the run's `command` artifact, written by the backend as ansible-runner writes
it: `{"command", "cwd", "env"}`. The child of a run does what ansible-runner's pexpect
spawn and the `ansible-playbook` script would: a new session with the terminal as its
controlling tty and stdio, SIGHUP ignored, the run's exact environment and working
directory, then `PlaybookCLI.cli_executor(argv)` — so `awx_display` writes the job events
and the backend reads them from the terminal exactly as ansible-runner does.

Between the warm-up and a run, state that depends on the environment or on the output
being a terminal is brought up to date in the child: the ansible constants whose
variables differ from the zygote's (the roles path, the fact cache), a fresh local temp
directory, the colour decision, the display's width and dedup sets, and the job-event
context of `awx_display`. Nothing of one run reaches another: each is a fresh fork.

The zygote itself stays single-threaded (it forks), reaps its children, kills a run's
process group on cancel, and exits — killing every run — when the operator closes the
socket or dies (it asks the kernel for SIGTERM on its parent's death).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import errno
import fcntl
import gc
import importlib
import io
import json
import os
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import termios
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

from runner.ansible import fastwire, hooks
from runner.ansible.hooks import direct, inline, kubemodules, modexec, payloads

__all__ = ["main", "warm_up"]

PROFILE_ENV = "ANSIBLE_OPERATOR_ZYGOTE_PROFILE"
"""A directory: each run writes a cProfile of its ansible-playbook there (diagnostics;
its tasks and in-process modules are in it)."""
_PR_SET_PDEATHSIG = 1
_KILL_TIMEOUT = 5.0

WARM_ACTIONS = (
    "ansible.builtin.normal",
    "ansible.builtin.debug",
    "ansible.builtin.set_fact",
    "ansible.builtin.set_stats",
    "ansible.builtin.assert",
    "ansible.builtin.fail",
    "ansible.builtin.command",
    "ansible.builtin.shell",
    "ansible.builtin.copy",
    "ansible.builtin.template",
    "ansible.builtin.include_vars",
    "ansible.builtin.gather_facts",
    "kubernetes.core.k8s",
    "kubernetes.core.k8s_info",
)
"""Action plugins resolved (imported, their configuration loaded) before any run."""

WARM_MODULES = (
    "ansible.builtin.command",
    "ansible.builtin.copy",
    "ansible.builtin.file",
    "ansible.builtin.stat",
    "ansible.builtin.setup",
    "kubernetes.core.k8s",
    "kubernetes.core.k8s_info",
    "operator_sdk.util.k8s_status",
    "operator_sdk.util.requeue_after",
)
"""Modules whose names are resolved before any run."""

WARM_IMPORTS = (
    "ansible.cli.playbook",
    "ansible.executor.playbook_executor",
    "ansible.executor.task_queue_manager",
    "ansible.executor.task_executor",
    "ansible.executor.process.worker",
    "ansible.executor.module_common",
    "ansible.plugins.strategy.linear",
    "ansible.module_utils.basic",
    "ansible.module_utils._internal._ansiballz._loader",
    "ansible.module_utils._internal._json._profiles._module_legacy_c2m",
    "ansible.module_utils._internal._json._profiles._module_legacy_m2c",
    "ansible.module_utils._internal._json._profiles._module_modern_c2m",
    "ansible.module_utils._internal._json._profiles._module_modern_m2c",
    "encodings.cp437",
    "kubernetes",
    "kubernetes.client",
    "kubernetes.config",
    "kubernetes.dynamic",
    "urllib3",
    "yaml",
)
"""Python modules imported before any run (the ones behind the common tasks)."""

WARM_COLLECTIONS = ("kubernetes.core", "operator_sdk.util")
"""Collections whose `module_utils` are imported before any run."""

_settings_by_variable: dict[str, list[str]] = {}
"""Environment variable -> the ansible settings it feeds (see `_remember_settings`)."""
_local_tmp_base: str | None = None
"""Where each run's `DEFAULT_LOCAL_TMP` is made, when no per-run variable decides it."""
_event_modules: list[Any] = []
"""The loaded `awx_display` callback modules, whose event context each run renews."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.ansible.zygote")
    parser.add_argument("--fd", type=int, required=True, help="the control socket")
    parser.add_argument("--store", required=True, help="a private directory, removed at the end")
    parser.add_argument("--discover-url", help="the API to discover while warming up")
    parser.add_argument(
        "--discover-kind", action="append", default=[], help="<apiVersion>:<kind> to look up"
    )
    args = parser.parse_args(argv)
    # The proxy's credential: runs forked from here must not inherit it.
    authorization = os.environ.pop(fastwire.DISCOVER_AUTHORIZATION_ENV, "")
    discovery = fastwire.Discovery.from_argv(
        args.discover_url, args.discover_kind, authorization=authorization
    )
    # The store goes with the zygote however it ends (the operator killed with -9 sends it
    # SIGTERM through the parent-death signal); forked runs leave through os._exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # until serve() takes over
    try:
        return _warm_and_serve(socket.socket(fileno=args.fd), args.store, discovery)
    finally:
        shutil.rmtree(args.store, ignore_errors=True)


def _warm_and_serve(
    control: socket.socket, store: str, discovery: fastwire.Discovery | None
) -> int:
    _die_with_parent(signal.SIGTERM)
    # `-m` put the start directory first; a new interpreter has only the rest.
    base_path = list(sys.path[1:])
    scratch = tempfile.mkdtemp(prefix="warm-up-", dir=store)
    os.chdir(scratch)  # no ansible.cfg here, as in a run's empty project directory
    started = time.monotonic()
    # awx_display makes its event context when loaded: give it somewhere to write.
    os.environ["AWX_ISOLATED_DATA_DIR"] = scratch
    with _quiet():  # warnings of plugins that do not load are in `errors`
        errors = warm_up()
    _remember_settings()
    del os.environ["AWX_ISOLATED_DATA_DIR"]
    warm_modules = _module_paths(WARM_MODULES)
    warm_paths, warm_fqns = [path for path, _ in warm_modules], [fqn for _, fqn in warm_modules]
    left_out = []
    for name, install in (
        ("modexec", lambda: modexec.install(sys_path=base_path)),
        ("payloads", lambda: payloads.install(os.path.join(store, "payloads"))),
        ("direct", lambda: _both(direct.install, lambda: direct.warm(warm_paths))),
        ("inline", inline.install),
        ("kubemodules", lambda: _both(kubemodules.install, lambda: kubemodules.warm(warm_fqns))),
    ):
        reason = _install_hook(name, install)
        if reason is not None:
            left_out.append(reason)
    if discovery is not None and hooks.enabled("kubemodules"):
        errors += kubemodules.discover(
            discovery.url, discovery.kinds, authorization=discovery.authorization
        )
    os.chdir("/")
    shutil.rmtree(scratch, ignore_errors=True)
    gc.collect()
    gc.freeze()  # the warm heap stays shared with the children (copy-on-write)
    zygote = _Zygote(control, base_path=base_path)
    zygote.send(
        {
            "op": "ready",
            "pid": os.getpid(),
            "seconds": round(time.monotonic() - started, 3),
            "errors": errors,
            "left_out": left_out,
        }
    )
    return zygote.serve()


def _both(first: Callable[[], None], then: Callable[[], None]) -> None:
    first()
    then()


def _install_hook(name: str, install: Callable[[], object]) -> str | None:
    """Install hook `name` if it was tested with this ansible-core (`hooks`); why not, if
    it is not installed. Each hook looks up everything it patches before it patches
    anything, so one that fails leaves ansible-core as it was."""
    if not hooks.enabled(name):
        return f"{name}: not tested with ansible-core {hooks.running_core_version()}"
    try:
        install()
    except Exception as exc:
        return f"{name}: {type(exc).__name__}: {exc}"
    return None


def warm_up() -> list[str]:
    """Import and resolve what runs need; returns what failed (warm-up is best effort)."""
    errors: list[str] = []

    def attempt(label: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:
            errors.append(f"{label}: {type(exc).__name__}: {exc}")

    for name in WARM_IMPORTS:
        attempt(name, lambda name=name: importlib.import_module(name))  # type: ignore[misc]
    from ansible.plugins import loader

    loader.init_plugin_loader([])
    for plugins in (
        loader.connection_loader,
        loader.shell_loader,
        loader.become_loader,
        loader.callback_loader,
        loader.inventory_loader,
        loader.cache_loader,
        loader.lookup_loader,
        loader.filter_loader,
        loader.test_loader,
    ):
        attempt(plugins.package, lambda plugins=plugins: list(plugins.all(class_only=True)))  # type: ignore[misc]
    # Vars plugins as a run finds them (ansible-core's own priming: the legacy ones, then
    # the enabled ones such as `host_group_vars`); each run primes again (`_enter`).
    attempt("vars plugins", _prime_vars_plugins)
    attempt("strategy linear", lambda: loader.strategy_loader.get("linear", class_only=True))
    for name in WARM_ACTIONS:
        attempt(name, lambda name=name: loader.action_loader.get(name, class_only=True))  # type: ignore[misc]
    for name in WARM_MODULES:
        attempt(name, lambda name=name: loader.module_loader.find_plugin_with_context(name))  # type: ignore[misc]
    for collection in WARM_COLLECTIONS:
        errors += _import_module_utils(collection)
    return errors


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """stdout and stderr to /dev/null (the fds: Ansible's display writes to them)."""
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def _module_paths(names: Iterable[str]) -> list[tuple[str, str]]:
    """(file, Python name) of these modules, as the module loader resolves them (those it
    finds)."""
    from ansible.executor import module_common
    from ansible.plugins import loader

    found_modules = []
    for name in names:
        try:
            found = loader.module_loader.find_plugin_with_context(name)
            if not found.resolved or not found.plugin_resolved_path:
                continue
            path = str(found.plugin_resolved_path)
            found_modules.append((path, module_common._get_ansible_module_fqn(path)))
        except Exception:  # warm-up is best effort
            continue
    return found_modules


def _import_module_utils(collection: str) -> list[str]:
    package = f"ansible_collections.{collection}.plugins.module_utils"
    try:
        spec = importlib.util.find_spec(package)
    except ImportError as exc:
        return [f"{package}: {exc}"]
    if spec is None or not spec.submodule_search_locations:
        return []
    errors = []
    for root in spec.submodule_search_locations:
        for path in sorted(Path(root).rglob("*.py")):
            relative = path.relative_to(root).with_suffix("")
            parts = [part for part in relative.parts if part != "__init__"]
            name = ".".join([package, *parts])
            try:
                importlib.import_module(name)
            except Exception as exc:
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
    return errors


class _Zygote:
    """The serving loop: fork runs, forward cancels, report exits."""

    def __init__(self, control: socket.socket, *, base_path: list[str]) -> None:
        self._control = control
        self._base_path = base_path
        self._children: dict[int, str] = {}  # pid -> run id
        self._wakeup_read, self._wakeup_write = os.pipe()
        self._stopping = False

    def send(self, message: Mapping[str, Any]) -> None:
        try:
            self._control.send(fastwire.encode(message))
        except OSError:
            self._stopping = True  # the operator is gone

    def serve(self) -> int:
        for fd in (self._wakeup_read, self._wakeup_write):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(self._wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the operator's Ctrl-C is the operator's
        with selectors.DefaultSelector() as selector:
            selector.register(self._control, selectors.EVENT_READ)
            selector.register(self._wakeup_read, selectors.EVENT_READ)
            while not self._stopping:
                for key, _ in selector.select(timeout=1.0):
                    if key.fd == self._wakeup_read:
                        self._drain_wakeups()
                    else:
                        self._receive()
                self._reap()
        self._kill_all()
        return 0

    def _on_term(self, *_: object) -> None:
        self._stopping = True

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wakeup_read, 512):
                pass
        except BlockingIOError:
            pass

    def _receive(self) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(self._control, fastwire.MAX_MESSAGE, 4)
        except InterruptedError:
            return
        except OSError:
            data, fds = b"", []
        if not data:
            for fd in fds:
                os.close(fd)
            self._stopping = True
            return
        try:
            message = fastwire.decode(data)
        except ValueError as exc:
            for fd in fds:
                os.close(fd)
            print(f"zygote: bad control message: {exc}", file=sys.stderr)
            return
        if message.get("op") == "run":
            self._start(message, fds)
        elif message.get("op") == "cancel":
            for fd in fds:
                os.close(fd)
            self._cancel(str(message.get("id")))

    def _start(self, message: Mapping[str, Any], fds: list[int]) -> None:
        run_id = str(message.get("id"))
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            self.send({"op": "failed", "id": run_id, "error": "a run needs one terminal"})
            return
        (tty,) = fds
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(tty)
            self.send({"op": "failed", "id": run_id, "error": f"cannot fork: {exc}"})
            return
        if pid == 0:  # pragma: no cover - the child ends in os._exit
            try:
                signal.set_wakeup_fd(-1)
                _run_child(str(message.get("spec")), tty, base_path=self._base_path)
            finally:
                os._exit(1)
        os.close(tty)
        self._children[pid] = run_id
        self.send({"op": "started", "id": run_id, "pid": pid})

    def _cancel(self, run_id: str) -> None:
        for pid, child_id in self._children.items():
            if child_id == run_id:
                _kill_group(pid)

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            run_id = self._children.pop(pid, None)
            if run_id is not None:
                self.send({"op": "exited", "id": run_id, "status": status})

    def _kill_all(self) -> None:
        for pid in list(self._children):
            _kill_group(pid)
        deadline = time.monotonic() + _KILL_TIMEOUT
        while self._children and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.01)


def _kill_group(pid: int) -> None:
    """SIGKILL the run's process group, as ansible-runner's `handle_termination` does."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    except OSError:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _die_with_parent(signum: int) -> None:
    """Ask Linux to send `signum` when the parent process exits (best effort)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):
        pass


# -- the child of one run ---------------------------------------------------------------


def _run_child(spec_path: str, tty: int, *, base_path: list[str]) -> NoReturn:  # pragma: no cover
    _terminal(tty)
    if not modexec.sources_unchanged():
        os._exit(fastwire.STALE_EXIT)  # a collection was edited: the warm imports are old
    code = 1
    try:
        with open(spec_path, encoding="utf-8") as handle:
            spec = json.load(handle)
        program = str(Path(sys.executable).parent / "ansible-playbook")
        argv = fastwire.playbook_argv(spec["command"], program=program)
        # The zygote's exit handlers are the zygote's; the run's own (its local temp
        # directory's removal, registered as `_enter` makes it) run at its end.
        atexit._clear()
        _enter(spec["env"], spec["cwd"])
        sys.argv = argv
        sys.path[:] = [os.path.dirname(program), *base_path]
        code = _playbook(argv)
    except BaseException:
        traceback.print_exc()
    try:
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    os._exit(code & 0xFF)


def _terminal(tty: int) -> None:
    """What `pty.fork()` and pexpect's `ignore_sighup` give ansible-playbook."""
    os.setsid()
    with contextlib.suppress(OSError):
        fcntl.ioctl(tty, termios.TIOCSCTTY, 0)
    for target in (0, 1, 2):
        os.dup2(tty, target)
    os.closerange(3, min(os.sysconf("SC_OPEN_MAX"), 65536))
    for name in ("SIGTERM", "SIGCHLD", "SIGINT", "SIGQUIT", "SIGALRM", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _die_with_parent(signal.SIGKILL)


def _enter(env: Mapping[str, str], cwd: str) -> None:
    """The run's environment, directory, and the warm state that depends on them."""
    from ansible import constants
    from ansible.utils.display import Display, _synchronize_textiowrapper

    # Python's start-up adds LC_CTYPE=C.UTF-8 to its environment under the C locale (PEP
    # 538): the zygote's start-up did what ansible-playbook's would have done.
    coerced = os.environ.get("LC_CTYPE") if "LC_CTYPE" not in env else None
    changed = {key for key in set(env) | set(os.environ) if env.get(key) != os.environ.get(key)}
    os.environ.clear()
    os.environ.update(env)
    if coerced is not None:
        os.environ["LC_CTYPE"] = coerced
        changed.discard("LC_CTYPE")
    os.chdir(cwd)
    _refresh_constants(constants, changed)
    display = Display()
    sys.stdin, sys.stdout, sys.stderr = _tty_stdio()
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]
    for stream in (sys.stdout, sys.stderr):
        _synchronize_textiowrapper(stream, display._lock)
    display._set_column_width()
    for seen in (display._deprecations, display._warns, display._errors):
        seen.clear()
    importlib.reload(importlib.import_module("ansible.utils.color"))  # stdout is a tty now
    _fresh_event_context()
    _fresh_vars_plugins()
    # CLI.run installs the collection finder again; the zygote's is the same one.
    warnings.filterwarnings("ignore", message="AnsibleCollectionFinder has already been configured")


def _refresh_constants(constants: Any, changed: Iterable[str]) -> None:
    """Recompute the constants read from `changed` variables, and the local temp dir.

    `DEFAULT_LOCAL_TMP` is created when it is computed: each run gets its own, removed at
    its exit, as each ansible-playbook process does. (Which settings each variable feeds,
    and the directory the temp dir goes in, were worked out once by `_remember_settings`.)
    """
    from ansible.config.manager import ensure_type

    config = constants.config
    settings = {setting for name in changed for setting in _settings_by_variable.get(name, ())}
    if _local_tmp_base is None:
        settings.add("DEFAULT_LOCAL_TMP")
    for setting in sorted(settings):
        value = config.get_config_value(setting, variables=vars(constants))
        constants.set_constant(setting, value)
    if "DEFAULT_LOCAL_TMP" not in settings:
        constants.set_constant("DEFAULT_LOCAL_TMP", ensure_type(_local_tmp_base, "tmppath"))


def _remember_settings() -> None:
    """What `_refresh_constants` and `_fresh_event_context` need, computed in the zygote."""
    from ansible import constants

    config = constants.config
    _settings_by_variable.clear()
    for setting, definition in config.get_configuration_definitions().items():
        for entry in definition.get("env") or ():
            name = entry.get("name")
            if name:
                _settings_by_variable.setdefault(str(name), []).append(setting)
    global _local_tmp_base
    # The temp dir's parent: fixed by variables that are the same for all of a zygote's
    # runs (those that are not go through `config` again).
    feeding = {
        name for name, settings in _settings_by_variable.items() if "DEFAULT_LOCAL_TMP" in settings
    }
    if not feeding & fastwire.PER_RUN_ENV and isinstance(constants.DEFAULT_LOCAL_TMP, str):
        _local_tmp_base = os.path.dirname(constants.DEFAULT_LOCAL_TMP)
    _event_modules[:] = [
        module
        for module in list(sys.modules.values())
        if str(getattr(module, "__file__", "") or "").endswith("awx_display.py")
        and getattr(module, "EventContext", None) is not None
    ]


def _tty_stdio() -> tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper]:
    """`sys.std*` as Python makes them for a terminal, with the display's error handler."""
    errors = "_replacing_warning_handler"
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
        encoding="utf-8",
        errors=errors,
        line_buffering=True,
    )
    stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors=errors,
        line_buffering=True,
    )
    return stdin, stdout, stderr


def _fresh_event_context() -> None:
    """`awx_display` reads the run's artifact directory when its event context is made."""
    for module in _event_modules:
        vars(module)["event_context"] = module.EventContext()


def _prime_vars_plugins() -> None:
    from ansible.vars import plugins

    plugins._prime_vars_loader()


def _fresh_vars_plugins() -> None:
    """The vars plugin loader as a new process has it: with no plugin instances and no
    search paths yet, so that the run's first lookup of vars primes it with the run's own
    settings (`VARIABLE_PLUGINS_ENABLED`, the plugin paths). Left warm, its instance cache
    would be the zygote's: a loader whose paths are known is never primed again, and one
    primed by anything but ansible-core's `_prime_vars_loader` lacks the enabled plugins
    (`host_group_vars`, without which no `group_vars`/`host_vars` are read). The plugins'
    modules stay imported; priming again costs well under a millisecond."""
    from ansible.plugins.loader import vars_loader

    vars_loader._plugin_instance_cache = {}
    vars_loader._paths = None


def _playbook(argv: list[str]) -> int:
    from ansible.cli.playbook import PlaybookCLI

    profile_dir = os.environ.get(PROFILE_ENV)
    profiler = None
    if profile_dir:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        PlaybookCLI.cli_executor(argv)
    except SystemExit as exc:
        if profiler is not None and profile_dir:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"run-{os.getpid()}.prof"))
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    try:
        sys.exit(main())
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.exit(0)
