"""The zygote seen from the operator: its process, its control socket, one run through it.

`Zygote` starts `python -m runner.ansible.fastbackend.zygoteprocess` with one end of a
`SOCK_SEQPACKET` socket pair, reads its messages on a thread of its own (ready, started,
failed, exited: `wire.py`), hands it runs and cancels. `run_in` runs one prepared run in
it the way ansible-runner runs one under pexpect: the `command` artifact written first
(the zygote reads the run from it), a pseudo-terminal as pexpect sets one up (24x80, no
echo) whose output goes through ansible-runner's own `OutputEventFilter` and
`Runner.event_callback` (which write `stdout` and `job_events/`), then `status` and `rc`
with ansible-runner's values (`canceled` and 254 on cancel).
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import json
import logging
import os
import select
import shutil
import socket
import stat
import struct
import subprocess
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.ansible.fastbackend import wire
from runner.ansible.fastbackend.eventdata import with_partials
from runner.errors import AnsibleRunError

if TYPE_CHECKING:
    from ansible_runner import RunnerConfig
    from ansible_runner.utils import OutputEventFilter

__all__ = ["READY_TIMEOUT", "Stopped", "Zygote", "run_in"]

_log = logging.getLogger("runner.ansible")

READY_TIMEOUT = 300.0
"""How long a run waits for a zygote's warm-up (it takes seconds; more on a busy node)."""

_DRAIN_SECONDS = 5.0
"""After ansible-playbook exited, how long output is still read (pexpect's last expect)."""

_START_TIMEOUT = 60.0
"""How long the zygote may take to fork a run."""

_POLL_SECONDS = 0.5
"""How often a quiet run checks whether it was cancelled."""

_IDLE_TIMEOUT = 3600.0
"""How long a replaced zygote may keep serving the runs it started."""

_REAP_SECONDS = 10.0
"""How long a zygote whose socket closed may take to exit before it is left to `close()`."""

_CANCELED_RC = 254

_MISSING_PROCESS_RC = 127

_TERMINAL_SIZE = (24, 80)
"""pexpect's default window size."""


def run_in(
    zygote: Zygote,
    config: RunnerConfig,
    *,
    handle: Callable[[dict[str, Any]], bool],
    cancel: threading.Event,
) -> tuple[str, int | None] | None:
    """Run the prepared `config` in `zygote`, as ansible-runner would run it (a
    `PlaybookStep` but for the None: run it again elsewhere, because the zygote's imports
    are out of date or it had died before it could start the run)."""
    from ansible_runner import Runner
    from ansible_runner.utils import OutputEventFilter

    runner = Runner(config, event_handler=handle, cancel_callback=cancel.is_set)
    artifact_dir = Path(config.artifact_dir)
    spec = _write_command(config, artifact_dir)
    stdout = _open_output(artifact_dir / "stdout")
    _open_output(artifact_dir / "stderr").close()  # the terminal merges both, as pexpect
    output = OutputEventFilter(
        stdout, with_partials(runner), suppress_ansible_output=True, output_json=False
    )
    master, slave = _terminal()
    try:
        try:
            run = zygote.start(config.ident, spec=spec, tty=slave)
        finally:
            os.close(slave)
        _log.debug("run %s: started in the zygote (pid %s)", config.ident, run.pid)
        pumped = _pump(master, output, run=run, zygote=zygote, cancel=cancel)
    except _NotStarted as exc:
        if not zygote.alive:
            stdout.close()
            return None
        output.write(f"{exc}\n")
        output.close()
        return _finish(artifact_dir, status="failed", rc=_MISSING_PROCESS_RC)
    finally:
        os.close(master)
    _log.debug("run %s: exited", config.ident)
    canceled = pumped.canceled
    rc = wire.exit_code(run.status) if run.status is not None else None
    if rc == wire.STALE_EXIT and not canceled and not pumped.output:
        stdout.close()
        return None
    output.close()
    if canceled:
        return _finish(artifact_dir, status="canceled", rc=_CANCELED_RC)
    return _finish(artifact_dir, status="successful" if rc == 0 else "failed", rc=rc)


class Stopped(Exception):
    """The run was cancelled while its zygote was warming up."""


class _NotStarted(Exception):
    """The zygote could not start the run (no ansible-playbook process ever existed)."""


@dataclass(eq=False)
class _Run:
    ident: str
    started: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    pid: int | None = None
    status: int | None = None
    """The waitpid status; None while running or when the zygote died."""
    error: str | None = None


class Zygote:
    """One `python -m runner.ansible.fastbackend.zygoteprocess` process and its control socket."""

    def __init__(
        self,
        python: str,
        env: Mapping[str, str],
        *,
        logger: logging.Logger,
        discovery: wire.Discovery | None = None,
    ) -> None:
        self._logger = logger
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The zygote asks for SIGTERM when the thread starting it ends (PR_SET_PDEATHSIG
        # follows the thread): the event loop's, one of its executor's (the operator
        # starts it from there once ready), or a backend worker thread, all of which live
        # until the backend is closed.
        self._store = tempfile.mkdtemp(prefix="ansible-operator-zygote-")
        try:
            self._process = subprocess.Popen(
                [
                    *(python, "-m", "runner.ansible.fastbackend.zygoteprocess"),
                    *("--fd", str(theirs.fileno()), "--store", self._store),
                    *(discovery.argv() if discovery is not None else ()),
                ],
                env={**env, **(discovery.env() if discovery is not None else {})},
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        except OSError:
            ours.close()
            shutil.rmtree(self._store, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self._socket = ours
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._ready = threading.Event()
        self._errors: list[str] = []
        self.dead = False
        self.started = self.last_used = time.monotonic()
        self._reader = threading.Thread(target=self._read, name="zygote-reader", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        """Not known to have exited (its reader may not have seen the end yet)."""
        return not self.dead and self._process.poll() is None

    @property
    def warming(self) -> bool:
        """Still warming up (alive, not ready, within the time a run would wait)."""
        return (
            not self._ready.is_set()
            and self.alive
            and time.monotonic() - self.started < READY_TIMEOUT
        )

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._runs)

    def wait_ready(self, *, timeout: float, cancel: threading.Event) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready.wait(_POLL_SECONDS):
            if cancel.is_set():
                raise Stopped
            if time.monotonic() >= deadline:
                break
        if not self._ready.is_set() or self.dead:
            code = self._process.poll()
            reason = f"exited with code {code}" if code is not None else "is not ready"
            raise AnsibleRunError(f"the Ansible zygote (pid {self._process.pid}) {reason}")

    def start(self, ident: str, *, spec: Path, tty: int) -> _Run:
        run = _Run(ident)
        with self._lock:
            if self.dead:
                raise _NotStarted("the Ansible zygote exited")
            self._runs[ident] = run
        try:
            message = wire.encode({"op": "run", "id": ident, "spec": str(spec)})
            with self._send_lock:
                socket.send_fds(self._socket, [message], [tty])
        except OSError as exc:
            with self._lock:
                self._runs.pop(ident, None)
                # Its end of the socket is closed: it is exiting, even while `poll()`
                # cannot tell yet (a killed process closes its files before it is a
                # zombie), so the run goes to a new zygote instead of failing.
                self.dead = True
            raise _NotStarted(f"cannot reach the Ansible zygote: {exc}") from exc
        if not run.started.wait(_START_TIMEOUT):
            self.cancel(ident)
            raise _NotStarted("the Ansible zygote did not start the run")
        if run.error is not None:
            raise _NotStarted(run.error)
        return run

    def cancel(self, ident: str) -> None:
        with contextlib.suppress(OSError), self._send_lock:
            self._socket.send(wire.encode({"op": "cancel", "id": ident}))

    def close_when_idle(self) -> None:
        """`close()` once the runs in progress have ended."""
        deadline = time.monotonic() + _IDLE_TIMEOUT
        while self.busy and not self.dead and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
        self.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=10)
        self._socket.close()
        shutil.rmtree(self._store, ignore_errors=True)

    def _read(self) -> None:
        while True:
            try:
                data = self._socket.recv(wire.MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            try:
                self._dispatch(wire.decode(data))
            except (ValueError, KeyError, TypeError):
                self._logger.exception("bad message from the Ansible zygote")
        with self._lock:
            self.dead = True
            runs = list(self._runs.values())
            self._runs.clear()
        for run in runs:
            if run.error is None and run.status is None:
                run.error = "the Ansible zygote exited"
            run.started.set()
            run.done.set()
        self._ready.set()
        # Reap it now: an idle operator (a standby replica) may start no run that would
        # replace it, and until then it would stay among the operator's children as a
        # zombie. A process that closed its socket and lives on is left to `close()`.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=_REAP_SECONDS)

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "ready":
            self._errors = [str(error) for error in message.get("errors") or []]
            for error in self._errors:
                self._logger.debug("zygote warm-up: %s", error)
            for reason in message.get("left_out") or []:
                # Untested lines are reported once at start-up; this is a hook that
                # should have worked and did not.
                if "not tested with" not in str(reason):
                    self._logger.warning("the Ansible zygote runs without hook %s", reason)
            self._logger.debug(
                "Ansible zygote %s ready in %.2f s", message.get("pid"), message.get("seconds")
            )
            self._ready.set()
            return
        with self._lock:
            run = self._runs.get(str(message.get("id")))
            if run is not None and op in ("failed", "exited"):
                del self._runs[run.ident]
        if run is None:
            return
        if op == "started":
            run.pid = int(message["pid"])
            run.started.set()
        elif op == "failed":
            run.error = str(message.get("error"))
            run.started.set()
            run.done.set()
        elif op == "exited":
            run.status = int(message["status"])
            run.started.set()
            run.done.set()


@dataclass(frozen=True)
class _Pumped:
    canceled: bool
    output: bool
    """Whether the run wrote anything at all."""


def _pump(
    master: int,
    output: OutputEventFilter,
    *,
    run: _Run,
    zygote: Zygote,
    cancel: threading.Event,
) -> _Pumped:
    """Feed the terminal's output to `output` until the run ends."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    canceled = False
    wrote = False
    drain_until: float | None = None
    while True:
        if cancel.is_set() and not canceled:
            canceled = True
            zygote.cancel(run.ident)
        if run.done.is_set() and drain_until is None:
            drain_until = time.monotonic() + _DRAIN_SECONDS
        timeout = _POLL_SECONDS
        if drain_until is not None:
            timeout = max(0.0, min(timeout, drain_until - time.monotonic()))
        readable, _, _ = select.select([master], [], [], timeout)
        if readable:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every process holding the terminal closed it
                data = b""
            if not data:
                break
            wrote = True
            output.write(decoder.decode(data))
        elif drain_until is not None and time.monotonic() >= drain_until:
            break
    tail = decoder.decode(b"", final=True)
    if tail:
        output.write(tail)
    run.done.wait()
    return _Pumped(canceled=canceled, output=wrote)


def _terminal() -> tuple[int, int]:
    """A pseudo-terminal as pexpect sets one up: 24x80, no echo."""
    master, slave = os.openpty()
    rows, cols = _TERMINAL_SIZE
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    attributes = termios.tcgetattr(slave)
    attributes[3] &= ~termios.ECHO
    termios.tcsetattr(slave, termios.TCSANOW, attributes)
    return master, slave


def _write_command(config: RunnerConfig, artifact_dir: Path) -> Path:
    """The `command` artifact ansible-runner writes first; the zygote reads the run from it."""
    artifact_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    (artifact_dir / "job_events").mkdir(mode=0o700, exist_ok=True)
    path = artifact_dir / "command"
    content = {"command": config.command, "cwd": config.cwd, "env": config.env}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(content, handle, ensure_ascii=False)
    return path


def _open_output(path: Path) -> Any:
    os.close(os.open(path, os.O_CREAT, stat.S_IRUSR | stat.S_IWUSR))
    return codecs.open(str(path), "w", encoding="utf-8")


def _finish(artifact_dir: Path, *, status: str, rc: int | None) -> tuple[str, int | None]:
    """Write `status` and `rc` as ansible-runner does; return them."""
    for name, value in (("status", status), ("rc", rc)):
        path = artifact_dir / name
        if not path.exists():
            os.close(os.open(path, os.O_CREAT, stat.S_IRUSR | stat.S_IWUSR))
        path.write_text(str(value))
    return status, rc
