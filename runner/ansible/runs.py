"""The run machinery both Ansible backends share (`Runs`), around one step that differs.

A backend (`runner.ansible.backend`) is this plus a `PlaybookStep`: the data directory
written from the `RunRequest`, ansible-runner's configuration prepared, the step run in
a worker thread while its job events become a `RunResult`, then the artifacts rotated,
`artifacts/latest` pointed at the run and the global artifacts cap applied. Also here:
`write_inputs` (the input directory on disk), `run_env` (what ansible-playbook gets on
top of the operator's environment) and the plain ansible-runner step
(`run_with_ansible_runner`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from runner.ansible import artifacts, disk
from runner.ansible.backend import EventCallback, LogEvents, PlaybookStep
from runner.ansible.hooks import payloads
from runner.ansible.inputs import (
    HOSTS_FILE,
    KUBECONFIG_FILE,
    MANAGED_FILES,
    RunRequest,
    input_copies,
    inventory_source,
    private_data_dir,
    render_inputs,
    runner_config,
)
from runner.ansible.jobevents import NO_STATS_ERROR, EventCollector, RunResult, no_stats_reason
from runner.ansible.proctree import children, kill_tree
from runner.ansible.runlog import RunLog
from runner.errors import AnsibleRunError
from runner.structs.gvk import GVK

if TYPE_CHECKING:
    from ansible_runner import RunnerConfig

__all__ = [
    "PAYLOAD_CALLBACK_DIR",
    "Runs",
    "RunsBackend",
    "RunsOptions",
    "run_env",
    "run_with_ansible_runner",
    "write_inputs",
]


_CANCEL_POLL_SECONDS = 1.0
"""How often a quiet run checks whether it was cancelled (ansible-runner's default: 5)."""


class Runs:
    """Everything around a run that both backends share; `step` starts ansible-playbook.

    A backend builds one and hands `run`, `forget` and `close` to it. Each run goes to a
    worker thread (so the event loop never blocks): the data directory is written
    (`inputs.py`), ansible-runner's `RunnerConfig` prepared, `step` runs it while the
    job events become a `RunResult` (`jobevents.py`) and reach the caller, then the
    artifacts are rotated and `artifacts/latest` points at the run.

    Why threads are safe here: ansible-runner, used this way, changes no process-wide
    state. It reads `os.environ` into a copy, starts ansible-playbook with
    `cwd=<dir>/project` (no `os.chdir`), and installs signal handlers only from the main
    thread (we pass our own cancel callback, so it never tries). Different CRs have
    different data directories, and the engine never runs one CR twice at once.

    `env` holds variables set for every run on top of the operator's environment (the
    `--ansible-roles-path` / `--ansible-collections-path` flags); `max_workers` bounds
    the runs in progress (the engine's own limits are normally lower).
    `max_artifacts_bytes` (`--max-artifacts-bytes`) caps the disk use of all CRs' run
    directories under `base_dir`, enforced after each run (`disk.py`); <= 0: no cap.
    `share_payloads`: load the payload-sharing callback plugin into runs (off when the
    start-up check left the `payloads` hook out, see `runner.ansible.hooks`).
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
        step: PlaybookStep,
    ) -> None:
        self.base_dir = base_dir
        self._step = step
        self._share_payloads = share_payloads
        self._log_events = log_events
        self._debug_logs = debug_logs
        self.logger = logger or logging.getLogger("runner.ansible")
        self._env = dict(env or {})
        # Module payloads are shared between runs through a private store, made at the
        # first run (the `payloads` hook; the fast backend's zygote shares them too).
        self._payload_store: str | None = None
        self._payload_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="ansible")
        self._cancels: set[threading.Event] = set()
        self._closed = False
        # Run directories of runs queued or in progress (bounded by the runs at once).
        self._active: set[Path] = set()
        self._active_lock = threading.Lock()
        # Held while a run creates its data directory and while a removal removes a
        # parent directory left empty: neither sees the other half-done.
        self._layout_lock = threading.Lock()
        # The global cap runs on its own thread, off the runs' way: one pass at a time,
        # covering every data directory whose runs finished since the last pass.
        self._budget = (
            disk.ArtifactBudget(base_dir, limit=max_artifacts_bytes)
            if max_artifacts_bytes > 0
            else None
        )
        self._disk_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="artifacts")
        self._cap_lock = threading.Lock()
        self._cap_changed: set[Path] = set()
        self._cap_queued = False

    def data_dir(self, request: RunRequest) -> Path:
        """The private data directory of the CR `request` is about."""
        return private_data_dir(self.base_dir, request.gvk, request.namespace, request.name)

    async def run(self, request: RunRequest, *, on_event: EventCallback | None = None) -> RunResult:
        if self._closed:
            raise AnsibleRunError("the Ansible backend is closed")
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        deliver = None if on_event is None else _deliverer(loop, on_event, self.logger)
        run_dir = self.data_dir(request) / artifacts.ARTIFACTS / request.ident
        self._cancels.add(cancel)
        with self._active_lock:
            self._active.add(run_dir)
        try:
            future = loop.run_in_executor(
                self._executor, lambda: self._run_blocking(request, cancel, deliver)
            )
        except RuntimeError as exc:  # the executor was shut down meanwhile
            self._cancels.discard(cancel)
            with self._active_lock:
                self._active.discard(run_dir)
            raise AnsibleRunError("the Ansible backend is closed") from exc
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            cancel.set()
            # Let ansible-playbook die and the artifacts settle before giving up.
            await asyncio.wait([future])
            if not future.cancelled():
                future.exception()  # retrieved: the cancellation is what we report
            raise
        finally:
            self._cancels.discard(cancel)
            with self._active_lock:
                self._active.discard(run_dir)

    async def forget(self, gvk: GVK, namespace: str, name: str) -> None:
        data_dir = private_data_dir(self.base_dir, gvk, namespace, name)
        if data_dir in self._busy_data_dirs():
            self.logger.debug("not removing %s: a run of it is in progress", data_dir)
            return
        removed = await asyncio.to_thread(
            disk.remove_data_dir, self.base_dir, data_dir, layout_lock=self._layout_lock
        )
        if removed:
            if self._budget is not None:
                self._budget.forget(data_dir)
            self.logger.debug("removed %s", data_dir)
        else:
            self.logger.warning("could not remove %s", data_dir)

    async def close(self) -> None:
        self._closed = True
        for cancel in list(self._cancels):
            cancel.set()
        await asyncio.to_thread(self._executor.shutdown, wait=True)
        await asyncio.to_thread(self._disk_executor.shutdown, wait=True)
        if self._payload_store is not None:
            await asyncio.to_thread(shutil.rmtree, self._payload_store, True)

    # -- the worker thread --------------------------------------------------------------

    def _run_blocking(
        self,
        request: RunRequest,
        cancel: threading.Event,
        deliver: EventCallback | None,
    ) -> RunResult:
        data_dir = self.data_dir(request)
        env = self.run_variables()
        environ = {**os.environ, **env}
        log = RunLog(self.logger, request, log_events=self._log_events, debug=self._debug_logs)
        collector = EventCollector()

        def handle(event: dict[str, Any]) -> bool:
            # An exception here would abort ansible-runner with ansible-playbook running.
            try:
                collector.add(event)
                log.event(event)
                if deliver is not None:
                    deliver(event)
            except Exception:
                self.logger.exception("handling an Ansible event failed")
            return True  # ansible-runner then writes it to job_events/

        if cancel.is_set():  # stopped while waiting for a worker thread
            raise AnsibleRunError("the Ansible run was stopped")
        started = time.monotonic()
        what = f"run {request.gvk.kind} {request.namespace}/{request.name} {request.ident}"
        with self._layout_lock:
            write_inputs(data_dir, request, environ=environ)
        self.logger.debug("%s: inputs written", what)
        config_kwargs = runner_config(request, data_dir=data_dir, environ=environ)
        config_kwargs["envvars"] = run_env(env, config_kwargs["envvars"], environ)
        # ansible-runner is imported with the first run, not with the operator: its
        # import (and its plugins') is not on the way to the operator's readiness.
        from ansible_runner import RunnerConfig

        try:
            config = RunnerConfig(**config_kwargs)
            config.prepare()
            self.logger.debug("%s: prepared", what)
            status, rc = self._step(config, handle=handle, cancel=cancel)
        except AnsibleRunError:
            raise
        except Exception as exc:
            raise AnsibleRunError(f"ansible-runner could not run: {exc}") from exc
        finally:
            # The kubeconfig names this CR as the owner: no later process may reuse it.
            (data_dir / KUBECONFIG_FILE).unlink(missing_ok=True)
            if cancel.is_set():
                _record_stopped(data_dir / artifacts.ARTIFACTS / request.ident)
            self._finish_artifacts(data_dir, request)
            self.logger.debug("%s: artifacts done", what)

        result = collector.result()
        log.finished(status=status, rc=rc, result=result, seconds=time.monotonic() - started)
        if status == "canceled":
            raise AnsibleRunError("the Ansible run was stopped")
        if not result.has_stats:
            stdout = _read_stdout(data_dir, request.ident)
            raise AnsibleRunError(f"{NO_STATS_ERROR}: {no_stats_reason(stdout, rc)}")
        return result

    def run_variables(self) -> dict[str, str]:
        """What every run gets on top of the operator's environment: the backend's
        variables and those of the payload sharing."""
        if not self._share_payloads:
            return dict(self._env)
        with self._payload_lock:
            if self._payload_store is None:
                self._payload_store = tempfile.mkdtemp(prefix="ansible-operator-payloads-")
        return {**self._env, **_payload_sharing(self._env, self._payload_store)}

    def _finish_artifacts(self, data_dir: Path, request: RunRequest) -> None:
        if not (data_dir / artifacts.ARTIFACTS / request.ident).is_dir():
            return
        try:
            artifacts.link_latest(data_dir, request.ident)
            artifacts.rotate(data_dir, keep=request.max_artifacts)
        except OSError:
            self.logger.exception("rotating the artifacts of %s failed", data_dir)
        self._schedule_cap(data_dir)

    def _busy_data_dirs(self) -> set[Path]:
        with self._active_lock:
            return {run_dir.parent.parent for run_dir in self._active}

    def _schedule_cap(self, data_dir: Path) -> None:
        """Have the artifacts thread apply `--max-artifacts-bytes` after this run."""
        if self._budget is None:
            return
        with self._cap_lock:
            self._cap_changed.add(data_dir)
            if self._cap_queued:
                return
            self._cap_queued = True
        try:
            self._disk_executor.submit(self._enforce_cap)
        except RuntimeError:  # closing: the next start rescans anyway
            with self._cap_lock:
                self._cap_queued = False

    def _enforce_cap(self) -> None:
        assert self._budget is not None
        with self._cap_lock:
            changed, self._cap_changed = self._cap_changed, set()
            self._cap_queued = False
        with self._active_lock:
            busy = set(self._active)
        try:
            removed = self._budget.enforce(changed=changed, busy=busy)
        except Exception:
            self.logger.exception("enforcing --max-artifacts-bytes failed")
            return
        if removed:
            self.logger.info(
                "artifacts over --max-artifacts-bytes=%d: removed the %d oldest run "
                "directories (%d bytes left)",
                self._budget.limit,
                len(removed),
                self._budget.total(),
            )


class RunsOptions(TypedDict, total=False):
    """The keyword arguments of `Runs` that a backend passes through (see `Runs`)."""

    log_events: LogEvents
    debug_logs: bool
    logger: logging.Logger | None
    env: Mapping[str, str] | None
    max_workers: int
    max_artifacts_bytes: int
    share_payloads: bool


class RunsBackend:
    """The part of an `AnsibleBackend` that each backend hands to its `Runs` as is."""

    runs: Runs

    @property
    def base_dir(self) -> Path:
        return self.runs.base_dir

    def data_dir(self, request: RunRequest) -> Path:
        """The private data directory of the CR `request` is about."""
        return self.runs.data_dir(request)

    async def run(self, request: RunRequest, *, on_event: EventCallback | None = None) -> RunResult:
        return await self.runs.run(request, on_event=on_event)

    async def forget(self, gvk: GVK, namespace: str, name: str) -> None:
        await self.runs.forget(gvk, namespace, name)

    async def close(self) -> None:
        await self.runs.close()


def write_inputs(data_dir: Path, request: RunRequest, *, environ: Mapping[str, str]) -> None:
    """Write the input directory of `request` (see `inputs.py`); `AnsibleRunError` if not.

    A missing role or playbook is reported here, before anything is started, with the
    original's load-time wording.
    """
    if request.role is not None and not request.role.is_dir():
        raise AnsibleRunError(f"role: {request.role} was not found")
    if request.playbook is not None and not request.playbook.is_file():
        raise AnsibleRunError(f"playbook: {request.playbook} was not found")
    files = render_inputs(request, environ=environ, data_dir=data_dir)
    try:
        for sub in ("env", "project", artifacts.ARTIFACTS):
            (data_dir / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        for relative in MANAGED_FILES:
            if relative not in files:
                (data_dir / relative).unlink(missing_ok=True)
        _write_inventory(data_dir, inventory_source(environ), files)
        for relative, content in files.items():
            _write_file(data_dir / relative, content)
        for relative, source in input_copies(request).items():
            shutil.copyfile(source, data_dir / relative)
    except OSError as exc:
        raise AnsibleRunError(f"cannot write the ansible-runner input directory: {exc}") from exc


def run_with_ansible_runner(
    config: RunnerConfig,
    *,
    handle: Callable[[dict[str, Any]], bool],
    cancel: threading.Event,
) -> tuple[str, int | None]:
    """The plain ansible-runner way (a `PlaybookStep`): ansible-runner's `Runner` starts
    ansible-playbook under pexpect. The runner backend's only step, and the fast
    backend's fallback."""
    config.pexpect_timeout = _CANCEL_POLL_SECONDS
    ansible = _tree_killing_runner()(config, event_handler=handle, cancel_callback=cancel.is_set)
    status, rc = ansible.run()
    return status, rc


# -- internals ------------------------------------------------------------------------


@functools.cache
def _tree_killing_runner() -> Any:
    """`_TreeKillingRunner`, made at the first run (ansible-runner imported then)."""
    from ansible_runner import Runner

    class _TreeKillingRunner(Runner):  # type: ignore[misc]
        """ansible-runner's `Runner` whose cancel and timeouts also kill the task workers
        and their modules, which have left the run's process group (`proctree`).

        `Runner` kills the group through the class (`Runner.handle_termination`), right
        after `kill_container()`, so the tree is killed there: the run's process is this
        process's child whose command line names the run's private data directory."""

        def kill_container(self) -> None:
            super().kill_container()
            data_dir = os.fsencode(str(self.config.private_data_dir))
            for pid in children(os.getpid()):
                try:
                    command = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if data_dir in command:
                    kill_tree(pid)

    return _TreeKillingRunner


def _write_inventory(data_dir: Path, source: Path | None, files: Mapping[str, str]) -> None:
    """A fresh `inventory/`: the generated hosts file, or a copy of `ANSIBLE_INVENTORY`."""
    inventory = data_dir / Path(HOSTS_FILE).parent
    shutil.rmtree(inventory, ignore_errors=True)
    inventory.mkdir(mode=0o700)
    if source is None:
        return  # inventory/hosts is among `files`
    if source.is_dir():
        shutil.copytree(source, inventory, dirs_exist_ok=True)
    elif source.is_file():
        shutil.copy2(source, data_dir / HOSTS_FILE)
    else:
        raise AnsibleRunError(f"ANSIBLE_INVENTORY: {source} was not found")


def _write_file(path: Path, content: str) -> None:
    # Extra-vars carry the CR's spec, which may hold secrets: owner-only.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(content)


PAYLOAD_CALLBACK_DIR = Path(payloads.__file__).resolve().parent / "callback_plugins"
"""Holds `ansible_operator_payloads`, the callback plugin that shares module payloads."""


def _payload_sharing(env: Mapping[str, str], store: str) -> dict[str, str]:
    """The variables that load the payload-sharing callback plugin into every run: its
    directory before any the operator was given (ansible-runner appends its own)."""
    given = env.get("ANSIBLE_CALLBACK_PLUGINS", os.environ.get("ANSIBLE_CALLBACK_PLUGINS", ""))
    paths = [str(PAYLOAD_CALLBACK_DIR), *(p for p in given.split(os.pathsep) if p)]
    return {"ANSIBLE_CALLBACK_PLUGINS": os.pathsep.join(paths), payloads.STORE_ENV: store}


def run_env(
    operator_env: Mapping[str, str], run_env: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    """Variables added to the operator's environment for ansible-playbook.

    ansible-runner starts `ansible-playbook` from `PATH`; an operator started as
    `.venv/bin/ansible-operator` without an activated venv finds it next to its Python.
    """
    env = {**operator_env, **run_env}
    path = environ.get("PATH", os.defpath)
    if shutil.which("ansible-playbook", path=path) is None:
        bindir = Path(sys.executable).parent
        if (bindir / "ansible-playbook").exists():
            env["PATH"] = f"{bindir}{os.pathsep}{path}"
    return env


def _deliverer(
    loop: asyncio.AbstractEventLoop, on_event: EventCallback, logger: logging.Logger
) -> EventCallback:
    """Call `on_event` on `loop`'s thread, in event order, whatever thread emits."""

    def call(event: dict[str, Any]) -> None:
        try:
            on_event(event)
        except Exception:
            logger.exception("an Ansible event callback failed")

    def deliver(event: dict[str, Any]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
            loop.call_soon_threadsafe(call, event)

    return deliver


def _record_stopped(run_dir: Path) -> None:
    """A run stopped before ansible-playbook ended (e.g. while waiting for a warm
    process) still records its end, as ansible-runner records a cancelled run: `status`
    `canceled`, `rc` 254. The history of the CR then shows when it stopped."""
    if not run_dir.is_dir() or (run_dir / "status").exists():
        return
    try:
        (run_dir / "rc").write_text("254")
        (run_dir / "status").write_text("canceled")
    except OSError:
        pass


def _read_stdout(data_dir: Path, ident: str) -> str:
    try:
        return (data_dir / artifacts.ARTIFACTS / ident / "stdout").read_text(
            encoding="utf-8", errors="replace"
        )
    except OSError:
        return ""
