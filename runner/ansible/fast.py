"""The fast backend: each run is a fork of a warm zygote instead of a new ansible-runner.

`--ansible-backend fast`. A run through ansible-runner starts `ansible-playbook` (a new
interpreter importing ansible-core, about 0.5 s of CPU) and that starts a new interpreter
for every module task (0.3 s for a no-op, 0.7 s for `kubernetes.core.k8s_info`, most of
it `import kubernetes`). Here one zygote process per operator imports and warms all of
that once (`zygote.py`); every run is a fork of it running ansible-playbook's CLI in
process, and allow-listed Python modules run as forks of the warm worker (`modexec.py`).

What stays the same, on purpose:
- the data directory, the command line, the environment, the working directory: they
  come from the same `RunnerConfig.prepare()` the runner backend uses, and the child is
  given exactly that environment (`command` artifact: `{command, cwd, env}`);
- the job events and artifacts: the child writes to a pseudo-terminal, like under
  pexpect, and its output goes through ansible-runner's own `OutputEventFilter` and
  `Runner.event_callback` here, which write `stdout` and `job_events/*.json`; `status`
  and `rc` are written with ansible-runner's values (`canceled` and 254 on cancel);
- everything around the run (inputs, logging, events to the caller, rotation, `latest`,
  the artifacts cap, `forget`, `clean_stale`): this is a `RunnerBackend` with only its
  `_execute` step replaced.

Isolation: every run is a fresh fork, so nothing of one run (memory, loaded plugin
state, leaked objects) reaches the next; the zygote never runs anything itself. A zygote
that dies is replaced at the next run; a zygote that cannot start makes runs fall back to
ansible-runner (logged) for a while. Runs are bounded by the backend's worker threads.
"""

from __future__ import annotations

import asyncio
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
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ansible_runner import Runner, RunnerConfig
from ansible_runner.utils import OutputEventFilter

from runner.ansible import fastwire
from runner.ansible.backend import LogEvents, RunnerBackend, _run_env
from runner.errors import AnsibleRunError

__all__ = ["FastBackend"]

_READY_TIMEOUT = 300.0
"""How long a run waits for a zygote's warm-up (it takes seconds; more on a busy node)."""
_DRAIN_SECONDS = 5.0
"""After ansible-playbook exited, how long output is still read (pexpect's last expect)."""
_START_TIMEOUT = 60.0
"""How long the zygote may take to fork a run."""
_POLL_SECONDS = 0.5
"""How often a quiet run checks whether it was cancelled."""
_IDLE_TIMEOUT = 3600.0
"""How long a replaced zygote may keep serving the runs it started."""
_RETRY_AFTER_FAILURE = 60.0
"""After a zygote failed to start, runs use ansible-runner for this long."""
_CANCELED_RC = 254
_MISSING_PROCESS_RC = 127
_TERMINAL_SIZE = (24, 80)
"""pexpect's default window size."""
_MAX_ZYGOTES = 2


class FastBackend(RunnerBackend):
    """`AnsibleBackend` forking each run from a warm zygote (see the module docstring).

    Takes `RunnerBackend`'s arguments; `python` is the interpreter of the zygote (this
    one by default: its ansible-core and collections are the ones that run).
    """

    def __init__(
        self,
        base_dir: Path,
        *,
        log_events: LogEvents = "tasks",
        debug_logs: bool = False,
        logger: logging.Logger | None = None,
        env: Mapping[str, str] | None = None,
        max_workers: int = 64,
        max_artifacts_bytes: int = 0,
        share_payloads: bool = True,
        python: str | None = None,
    ) -> None:
        super().__init__(
            base_dir,
            log_events=log_events,
            debug_logs=debug_logs,
            logger=logger,
            env=env,
            max_workers=max_workers,
            max_artifacts_bytes=max_artifacts_bytes,
            share_payloads=share_payloads,
        )
        self._python = python or sys.executable
        self._zygotes: dict[tuple[tuple[str, str], ...], _Zygote] = {}
        self._zygotes_lock = threading.Lock()
        self._failed_until = 0.0
        self._discovery: fastwire.Discovery | None = None

    def warming(self) -> bool:
        """A zygote is still warming up: the first runs would wait for it (for /readyz,
        so that "ready" means ready to run at full speed)."""
        with self._zygotes_lock:
            return any(zygote.warming for zygote in self._zygotes.values())

    def start(
        self,
        *,
        envvars: Mapping[str, str] | None = None,
        discovery: fastwire.Discovery | None = None,
    ) -> None:
        """Start warming up the zygote for runs whose per-run variables are `envvars`.

        Optional (the first run starts one otherwise): called when the operator starts,
        the warm-up overlaps the informers' sync and leader election. Does not wait.
        With `discovery`, this zygote and any that replaces it discover those kinds of
        the API while warming up.
        """
        self._discovery = discovery
        with tempfile.TemporaryDirectory(prefix="ansible-operator-prestart-") as scratch:
            env = self._run_variables()
            environ = {**os.environ, **env}
            config = RunnerConfig(
                private_data_dir=scratch,
                playbook="prestart.yml",
                ident="prestart",
                envvars={**_run_env(env, {}, environ), **dict(envvars or {})},
            )
            config.prepare_env()
            env = dict(config.env)
        key = fastwire.zygote_key(env)
        with self._zygotes_lock:
            if key not in self._zygotes:
                self._zygotes[key] = _Zygote(
                    self._python,
                    fastwire.zygote_env(env),
                    logger=self._logger,
                    discovery=self._discovery,
                )

    async def close(self) -> None:
        await super().close()
        with self._zygotes_lock:
            zygotes = list(self._zygotes.values())
            self._zygotes.clear()
        for zygote in zygotes:
            await _to_thread(zygote.close)

    # -- one run ------------------------------------------------------------------------

    def _execute(
        self,
        config: RunnerConfig,
        *,
        handle: Callable[[dict[str, Any]], bool],
        cancel: threading.Event,
    ) -> tuple[str, int | None]:
        for _ in range(2):
            zygote = self._zygote_for(config.env, cancel=cancel)
            if zygote is None:
                return super()._execute(config, handle=handle, cancel=cancel)
            outcome = self._execute_in(zygote, config, handle=handle, cancel=cancel)
            if outcome is not None:
                return outcome
            if zygote.alive:
                self._logger.info("a collection changed on disk: starting a new Ansible zygote")
                self._drop(zygote)
            else:
                self._logger.warning("the Ansible zygote exited: starting a new one")
        raise AnsibleRunError("the Ansible zygote could not run it twice in a row")

    def _execute_in(
        self,
        zygote: _Zygote,
        config: RunnerConfig,
        *,
        handle: Callable[[dict[str, Any]], bool],
        cancel: threading.Event,
    ) -> tuple[str, int | None] | None:
        """One run in `zygote`; None to run it again elsewhere: the zygote's imports are out
        of date, or it had died before it could start the run."""
        runner = Runner(config, event_handler=handle, cancel_callback=cancel.is_set)
        artifact_dir = Path(config.artifact_dir)
        spec = _write_command(config, artifact_dir)
        stdout = _open_output(artifact_dir / "stdout")
        _open_output(artifact_dir / "stderr").close()  # the terminal merges both, as pexpect
        output = OutputEventFilter(
            stdout, runner.event_callback, suppress_ansible_output=True, output_json=False
        )
        try:
            master, slave = _terminal()
            try:
                run = zygote.start(config.ident, spec=spec, tty=slave)
            finally:
                os.close(slave)
            try:
                pumped = _pump(master, output, run=run, zygote=zygote, cancel=cancel)
            finally:
                os.close(master)
        except _NotStarted as exc:
            if not zygote.alive:
                stdout.close()
                return None
            output.write(f"{exc}\n")
            output.close()
            return _finish(artifact_dir, status="failed", rc=_MISSING_PROCESS_RC)
        canceled = pumped.canceled
        rc = fastwire.exit_code(run.status) if run.status is not None else None
        if rc == fastwire.STALE_EXIT and not canceled and not pumped.output:
            stdout.close()
            return None
        output.close()
        if canceled:
            return _finish(artifact_dir, status="canceled", rc=_CANCELED_RC)
        return _finish(artifact_dir, status="successful" if rc == 0 else "failed", rc=rc)

    def _zygote_for(self, env: Mapping[str, str], *, cancel: threading.Event) -> _Zygote | None:
        """The ready zygote for runs with `env`, started if needed; None: use ansible-runner.

        `AnsibleRunError` when `cancel` is set while the zygote warms up.
        """
        key = fastwire.zygote_key(env)
        with self._zygotes_lock:
            if time.monotonic() < self._failed_until:
                return None
            zygote = self._zygotes.get(key)
            retired = []
            if zygote is None or not zygote.alive:
                if zygote is not None:
                    retired.append(zygote)  # dead: reap it and remove its directory
                zygote = _Zygote(
                    self._python,
                    fastwire.zygote_env(env),
                    logger=self._logger,
                    discovery=self._discovery,
                )
                self._zygotes[key] = zygote
                retired += self._retire(keep=key)
            zygote.last_used = time.monotonic()
        for old in retired:
            threading.Thread(target=old.close, name="zygote-close", daemon=True).start()
        try:
            zygote.wait_ready(timeout=_READY_TIMEOUT, cancel=cancel)
        except _Stopped:
            raise AnsibleRunError("the Ansible run was stopped") from None
        except AnsibleRunError as exc:
            with self._zygotes_lock:
                self._failed_until = time.monotonic() + _RETRY_AFTER_FAILURE
                if self._zygotes.get(key) is zygote:
                    del self._zygotes[key]
            self._logger.error(
                "the fast Ansible backend cannot start (%s); using ansible-runner for %.0f s",
                exc,
                _RETRY_AFTER_FAILURE,
            )
            zygote.close()
            return None
        return zygote

    def _drop(self, zygote: _Zygote) -> None:
        """Stop using `zygote` (its runs in progress finish) and close it in the background."""
        with self._zygotes_lock:
            for key, value in list(self._zygotes.items()):
                if value is zygote:
                    del self._zygotes[key]
        threading.Thread(target=zygote.close_when_idle, name="zygote-close", daemon=True).start()

    def _retire(self, *, keep: tuple[tuple[str, str], ...]) -> list[_Zygote]:
        """Zygotes beyond `_MAX_ZYGOTES` (idle, least recently used first) to close."""
        retired = []
        candidates = sorted(
            (z for k, z in self._zygotes.items() if k != keep), key=lambda z: z.last_used
        )
        excess = len(self._zygotes) - _MAX_ZYGOTES
        for zygote in candidates:
            if excess <= 0:
                break
            if zygote.dead or not zygote.busy:
                for key, value in list(self._zygotes.items()):
                    if value is zygote:
                        del self._zygotes[key]
                retired.append(zygote)
                excess -= 1
        return retired


# -- the zygote, seen from the operator ------------------------------------------------


class _Stopped(Exception):
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


class _Zygote:
    """One `python -m runner.ansible.zygote` process and its control socket."""

    def __init__(
        self,
        python: str,
        env: Mapping[str, str],
        *,
        logger: logging.Logger,
        discovery: fastwire.Discovery | None = None,
    ) -> None:
        self._logger = logger
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The zygote asks for SIGTERM when the thread starting it ends (PR_SET_PDEATHSIG
        # follows the thread): the event loop's, or a backend worker thread, both of which
        # live until the backend is closed.
        self._store = tempfile.mkdtemp(prefix="ansible-operator-zygote-")
        try:
            self._process = subprocess.Popen(
                [
                    *(python, "-m", "runner.ansible.zygote"),
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
            and time.monotonic() - self.started < _READY_TIMEOUT
        )

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._runs)

    def wait_ready(self, *, timeout: float, cancel: threading.Event) -> None:
        deadline = time.monotonic() + timeout
        while not self._ready.wait(_POLL_SECONDS):
            if cancel.is_set():
                raise _Stopped
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
            message = fastwire.encode({"op": "run", "id": ident, "spec": str(spec)})
            with self._send_lock:
                socket.send_fds(self._socket, [message], [tty])
        except OSError as exc:
            with self._lock:
                self._runs.pop(ident, None)
            raise _NotStarted(f"cannot reach the Ansible zygote: {exc}") from exc
        if not run.started.wait(_START_TIMEOUT):
            self.cancel(ident)
            raise _NotStarted("the Ansible zygote did not start the run")
        if run.error is not None:
            raise _NotStarted(run.error)
        return run

    def cancel(self, ident: str) -> None:
        with contextlib.suppress(OSError), self._send_lock:
            self._socket.send(fastwire.encode({"op": "cancel", "id": ident}))

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
                data = self._socket.recv(fastwire.MAX_MESSAGE)
            except OSError:
                data = b""
            if not data:
                break
            try:
                self._dispatch(fastwire.decode(data))
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


# -- plumbing of one run ---------------------------------------------------------------


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
    zygote: _Zygote,
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


async def _to_thread(function: Callable[[], None]) -> None:
    await asyncio.to_thread(function)
