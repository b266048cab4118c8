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

A run's child writes its exit code to a pipe of its own and closes its terminal before
it exits: the zygote sends `exited` with the status its waitpid will give at once, not
after the kernel has freed the child's memory (milliseconds for a forked 100 MB
process); a child that ends without writing (killed) is reported when it is reaped.

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
from runner.ansible.hooks import kubemodules, modexec, templates
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
    warm.hold_events_until_callbacks()
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
        self._reported: set[int] = set()  # children whose exit code came before their end
        self._wakeup_read, self._wakeup_write = os.pipe()
        self._stopping = False
        self._selector: selectors.BaseSelector | None = None

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
            self._selector = selector
            selector.register(self._control, selectors.EVENT_READ)
            selector.register(self._wakeup_read, selectors.EVENT_READ)
            while not self._stopping:
                for key, _ in selector.select(timeout=1.0):
                    if key.fd == self._wakeup_read:
                        self._drain_wakeups()
                    elif key.data is not None:
                        self._exit_reported(key.fd, key.data)
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
        report_read, report_write = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in (tty, report_read, report_write):
                os.close(fd)
            self.send({"op": "failed", "id": run_id, "error": f"cannot fork: {exc}"})
            return
        if pid == 0:  # pragma: no cover - the child ends in os._exit
            try:
                signal.set_wakeup_fd(-1)
                os.close(report_read)
                _run_child(
                    str(message.get("spec")), tty, base_path=self._base_path, report=report_write
                )
            finally:
                os._exit(1)
        os.close(tty)
        os.close(report_write)
        self._children[pid] = run_id
        if self._selector is not None:
            self._selector.register(report_read, selectors.EVENT_READ, data=pid)
        else:
            os.close(report_read)
        self.send({"op": "started", "id": run_id, "pid": pid})

    def _exit_reported(self, fd: int, pid: int) -> None:
        """A run's child wrote its exit code, or closed its end without one (killed, or
        ended another way: its end is reported when it is reaped)."""
        try:
            data = os.read(fd, 1)
        except OSError:
            data = b""
        if self._selector is not None:
            self._selector.unregister(fd)
        os.close(fd)
        run_id = self._children.get(pid)
        if data and run_id is not None:
            self._reported.add(pid)
            # The status its waitpid will give: os._exit(code) follows the write.
            self.send({"op": "exited", "id": run_id, "status": data[0] << 8})
            # The run exported what it compiled before writing its exit code: the runs
            # forked from now on get it (`templates` hook), not only those after its reap.
            with contextlib.suppress(Exception):
                templates.absorb()

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
            if pid in self._reported:
                self._reported.discard(pid)
            elif run_id is not None:
                self.send({"op": "exited", "id": run_id, "status": status})
            # What the run compiled, for the runs forked from now on (`templates` hook).
            with contextlib.suppress(Exception):
                templates.absorb()

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


def _run_child(  # pragma: no cover
    spec_path: str, tty: int, *, base_path: list[str], report: int
) -> NoReturn:
    _terminal(tty, keep=report)
    if not modexec.sources_unchanged():
        os._exit(wire.STALE_EXIT)  # a collection was edited: the warm imports are old
    code = 1
    try:
        with open(spec_path, encoding="utf-8") as handle:
            spec = json.load(handle)
        program = str(Path(sys.executable).parent / "ansible-playbook")
        sys.executable = _script_interpreter(program) or sys.executable
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
    with contextlib.suppress(Exception):
        templates.export()  # for the zygote, which absorbs it once this run has exited
    try:
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    _report_exit(report, code & 0xFF)
    os._exit(code & 0xFF)


def _script_interpreter(program: str) -> str | None:
    """The interpreter `program`'s `#!` line names, when it is this one under another
    name (`bin/python3.11` for this `bin/python`): what `sys.executable` is in the
    ansible-playbook it starts (its version banner, `ansible_playbook_python`)."""
    try:
        with open(program, "rb") as handle:
            first = handle.readline(4096)
        if not first.startswith(b"#!"):
            return None
        named = first[2:].strip().split()[0].decode()
        return named if os.path.isabs(named) and os.path.samefile(named, sys.executable) else None
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _report_exit(report: int, code: int) -> None:  # pragma: no cover
    """Tell the zygote the exit code, then let go of the terminal, before the process
    ends: the kernel's freeing of a forked 100 MB address space takes milliseconds,
    during which the run's end would otherwise be waited for (its output is complete:
    everything was flushed)."""
    with contextlib.suppress(OSError):
        os.write(report, bytes([code]))
    for fd in (0, 1, 2, report):
        with contextlib.suppress(OSError):
            os.close(fd)


def _terminal(tty: int, *, keep: int) -> None:
    """What `pty.fork()` and pexpect's `ignore_sighup` give ansible-playbook (the fd
    `keep`, where the exit code goes, stays open)."""
    os.setsid()
    with contextlib.suppress(OSError):
        fcntl.ioctl(tty, termios.TIOCSCTTY, 0)
    for target in (0, 1, 2):
        os.dup2(tty, target)
    os.closerange(3, keep)
    os.closerange(keep + 1, min(os.sysconf("SC_OPEN_MAX"), 65536))
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
