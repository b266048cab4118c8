"""The zygote process: a warm process that forks one `ansible-playbook` per run.

Started by the fast backend (`fast.py`) as `python -m runner.ansible.fastbackend.zygoteprocess
--fd N --store DIR` (DIR: its private directory, for the payload store; the backend
removes it), one per operator (per distinct run environment, see `wire.zygote_key`). It
warms up once what every run needs (the `zygote` hook, `runner.ansible.hooks.zygote`:
ansible-core's CLI, executor and plugin loaders, `kubernetes`, the allow-listed
collections' module_utils) and installs the other hooks, then waits on the control
socket `N`:

    operator -> zygote   {"op": "run", "id", "spec"}  + the run's terminal (SCM_RIGHTS)
                         {"op": "cancel", "id"}
    zygote -> operator   {"op": "ready", "pid", "seconds", "errors", "left_out"}
                         {"op": "started", "id", "pid"} | {"op": "failed", "id", "error"}
                         {"op": "exited", "id", "status"}   (a waitpid status)

`spec` is the run's `command` artifact, written by the backend as ansible-runner writes
it: `{"command", "cwd", "env"}`. The child of a run does what ansible-runner's pexpect
spawn and the `ansible-playbook` script would: a new session with the terminal as its
controlling tty and stdio, SIGHUP ignored, the run's exact environment and working
directory (`warm.enter_run` brings ansible-core's warm state up to date), then
`PlaybookCLI.cli_executor(argv)` — so `awx_display` writes the job events and the backend
reads them from the terminal exactly as ansible-runner does. Nothing of one run reaches
another: each is a fresh fork.

This module is the process plumbing: the serving loop, forks, signals, the terminal.
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
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from runner.ansible import hooks, proctree
from runner.ansible.fastbackend import wire
from runner.ansible.hooks import kubemodules, modexec
from runner.ansible.hooks import zygote as warm

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1
_KILL_TIMEOUT = 5.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner.ansible.fastbackend.zygoteprocess")
    parser.add_argument("--fd", type=int, required=True, help="the control socket")
    parser.add_argument("--store", required=True, help="a private directory, removed at the end")
    parser.add_argument("--discover-url", help="the API to discover while warming up")
    parser.add_argument(
        "--discover-kind", action="append", default=[], help="<apiVersion>:<kind> to look up"
    )
    args = parser.parse_args(argv)
    # The proxy's credential: runs forked from here must not inherit it.
    authorization = os.environ.pop(wire.DISCOVER_AUTHORIZATION_ENV, "")
    discovery = wire.Discovery.from_argv(
        args.discover_url, args.discover_kind, authorization=authorization
    )
    # The store goes with the zygote however it ends (the operator killed with -9 sends it
    # SIGTERM through the parent-death signal); forked runs leave through os._exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # until serve() takes over
    try:
        return _warm_and_serve(socket.socket(fileno=args.fd), args.store, discovery)
    finally:
        shutil.rmtree(args.store, ignore_errors=True)


def _warm_and_serve(control: socket.socket, store: str, discovery: wire.Discovery | None) -> int:
    _die_with_parent(signal.SIGTERM)
    # `-m` put the start directory first; a new interpreter has only the rest.
    base_path = list(sys.path[1:])
    scratch = tempfile.mkdtemp(prefix="warm-up-", dir=store)
    os.chdir(scratch)  # no ansible.cfg here, as in a run's empty project directory
    started = time.monotonic()
    # awx_display makes its event context when loaded: give it somewhere to write.
    os.environ["AWX_ISOLATED_DATA_DIR"] = scratch
    with warm.quiet():  # warnings of plugins that do not load are in `errors`
        errors = warm.warm_up()
    warm.remember_settings(wire.PER_RUN_ENV)
    del os.environ["AWX_ISOLATED_DATA_DIR"]
    left_out = warm.install_hooks(store=store, base_path=base_path)
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
            self._control.send(wire.encode(message))
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
            data, fds, _, _ = socket.recv_fds(self._control, wire.MAX_MESSAGE, 4)
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
            message = wire.decode(data)
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
                proctree.kill_tree(pid)

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
            proctree.kill_tree(pid)
        deadline = time.monotonic() + _KILL_TIMEOUT
        while self._children and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.01)


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
        os._exit(wire.STALE_EXIT)  # a collection was edited: the warm imports are old
    code = 1
    try:
        with open(spec_path, encoding="utf-8") as handle:
            spec = json.load(handle)
        program = str(Path(sys.executable).parent / "ansible-playbook")
        argv = wire.playbook_argv(spec["command"], program=program)
        # The zygote's exit handlers are the zygote's; the run's own (its local temp
        # directory's removal, registered as `enter_run` makes it) run at its end.
        atexit._clear()
        warm.enter_run(spec["env"], spec["cwd"])
        sys.argv = argv
        sys.path[:] = [os.path.dirname(program), *base_path]
        code = warm.playbook(argv)
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


if __name__ == "__main__":  # pragma: no cover
    try:
        sys.exit(main())
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.exit(0)
