"""The fast backend: each run is a fork of a warm zygote instead of a new ansible-runner.

`--ansible-backend fast`. A run through ansible-runner starts `ansible-playbook` (a new
interpreter importing ansible-core, about 0.5 s of CPU) and that starts a new interpreter
for every module task (0.3 s for a no-op, 0.7 s for `kubernetes.core.k8s_info`, most of
it `import kubernetes`). Here one zygote process per operator imports and warms all of
that once (`zygoteprocess.py`, its ansible-core side in `runner.ansible.hooks`); every run is a
fork of it running ansible-playbook's CLI in process (`zygotes.run_in`), and allow-listed
Python modules run as forks of the warm worker or in process (the `modexec` hook).

What stays the same, on purpose:
- the data directory, the command line, the environment, the working directory: they
  come from the same `RunnerConfig.prepare()` the runner backend uses, and the child is
  given exactly that environment (`command` artifact: `{command, cwd, env}`);
- the job events and artifacts: the child writes to a pseudo-terminal, like under
  pexpect, and its output goes through ansible-runner's own `OutputEventFilter` and
  `Runner.event_callback` here, which write `stdout` and `job_events/*.json`; `status`
  and `rc` are written with ansible-runner's values (`canceled` and 254 on cancel);
- everything around the run (inputs, logging, events to the caller, rotation, `latest`,
  the artifacts cap, `forget`): the same `runs.Runs` the runner backend uses, with this
  backend's step (`_execute`) instead of ansible-runner's, which stays the fallback.

Isolation: every run is a fresh fork, so nothing of one run (memory, loaded plugin
state, leaked objects) reaches the next; the zygote never runs anything itself. A zygote
that dies is replaced at the next run; a zygote that cannot start makes runs fall back to
ansible-runner (logged) for a while. Runs are bounded by the backend's worker threads.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from runner.ansible.fastbackend import wire
from runner.ansible.fastbackend.zygotes import READY_TIMEOUT, Stopped, Zygote, run_in
from runner.ansible.runs import Runs, RunsBackend, RunsOptions, run_env, run_with_ansible_runner
from runner.errors import AnsibleRunError

if TYPE_CHECKING:
    from ansible_runner import RunnerConfig

__all__ = ["FastBackend"]

_RETRY_AFTER_FAILURE = 60.0
"""After a zygote failed to start, runs use ansible-runner for this long."""
_MAX_ZYGOTES = 2


class FastBackend(RunsBackend):
    """`AnsibleBackend` forking each run from a warm zygote (see the module docstring).

    Takes `RunnerBackend`'s arguments; `python` is the interpreter of the zygote (this
    one by default: its ansible-core and collections are the ones that run).
    """

    def __init__(
        self,
        base_dir: Path,
        *,
        python: str | None = None,
        **options: Unpack[RunsOptions],
    ) -> None:
        self.runs = Runs(base_dir, step=self._execute, **options)
        self._logger = self.runs.logger
        self._python = python or sys.executable
        self._zygotes: dict[tuple[tuple[str, str], ...], Zygote] = {}
        self._zygotes_lock = threading.Lock()
        self._failed_until = 0.0
        self._discovery: wire.Discovery | None = None

    def warming(self) -> bool:
        """A zygote is still warming up: the first runs would wait for it (for /readyz,
        so that "ready" means ready to run at full speed)."""
        with self._zygotes_lock:
            return any(zygote.warming for zygote in self._zygotes.values())

    def start(
        self,
        *,
        envvars: Mapping[str, str] | None = None,
        discovery: wire.Discovery | None = None,
    ) -> None:
        """Start warming up the zygote for runs whose per-run variables are `envvars`.

        Optional (the first run starts one otherwise): called when the operator starts,
        the warm-up overlaps the informers' sync and leader election. Does not wait.
        With `discovery`, this zygote and any that replaces it discover those kinds of
        the API while warming up.
        """
        self._discovery = discovery
        env = self.run_environment(envvars)
        key = wire.zygote_key(env)
        with self._zygotes_lock:
            if key not in self._zygotes:
                self._zygotes[key] = Zygote(
                    self._python,
                    wire.zygote_env(env),
                    logger=self._logger,
                    discovery=self._discovery,
                )

    def run_environment(self, envvars: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment ansible-playbook gets in this backend's runs whose per-run
        variables are `envvars` (as ansible-runner prepares it), but for the variables
        that name the run's own data directory."""
        from ansible_runner import RunnerConfig

        with tempfile.TemporaryDirectory(prefix="ansible-operator-prestart-") as scratch:
            env = self.runs.run_variables()
            environ = {**os.environ, **env}
            config = RunnerConfig(
                private_data_dir=scratch,
                playbook="prestart.yml",
                ident="prestart",
                envvars={**run_env(env, {}, environ), **dict(envvars or {})},
            )
            config.prepare_env()
            return dict(config.env)

    async def close(self) -> None:
        await self.runs.close()
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
        """This backend's `PlaybookStep`: the run in a zygote, or through ansible-runner
        while none can start."""
        for _ in range(2):
            zygote = self._zygote_for(config.env, cancel=cancel)
            if zygote is None:
                return run_with_ansible_runner(config, handle=handle, cancel=cancel)
            outcome = run_in(zygote, config, handle=handle, cancel=cancel)
            if outcome is not None:
                return outcome
            if zygote.alive:
                self._logger.info("a collection changed on disk: starting a new Ansible zygote")
                self._drop(zygote)
            else:
                self._logger.warning("the Ansible zygote exited: starting a new one")
        raise AnsibleRunError("the Ansible zygote could not run it twice in a row")

    def _zygote_for(self, env: Mapping[str, str], *, cancel: threading.Event) -> Zygote | None:
        """The ready zygote for runs with `env`, started if needed; None: use ansible-runner.

        `AnsibleRunError` when `cancel` is set while the zygote warms up.
        """
        key = wire.zygote_key(env)
        with self._zygotes_lock:
            if time.monotonic() < self._failed_until:
                return None
            zygote = self._zygotes.get(key)
            retired = []
            if zygote is None or not zygote.alive:
                if zygote is not None:
                    retired.append(zygote)  # dead: reap it and remove its directory
                zygote = Zygote(
                    self._python,
                    wire.zygote_env(env),
                    logger=self._logger,
                    discovery=self._discovery,
                )
                self._zygotes[key] = zygote
                retired += self._retire(keep=key)
            zygote.last_used = time.monotonic()
        for old in retired:
            threading.Thread(target=old.close, name="zygote-close", daemon=True).start()
        try:
            zygote.wait_ready(timeout=READY_TIMEOUT, cancel=cancel)
        except Stopped:
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

    def _drop(self, zygote: Zygote) -> None:
        """Stop using `zygote` (its runs in progress finish) and close it in the background."""
        with self._zygotes_lock:
            for key, value in list(self._zygotes.items()):
                if value is zygote:
                    del self._zygotes[key]
        threading.Thread(target=zygote.close_when_idle, name="zygote-close", daemon=True).start()

    def _retire(self, *, keep: tuple[tuple[str, str], ...]) -> list[Zygote]:
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


async def _to_thread(function: Callable[[], None]) -> None:
    await asyncio.to_thread(function)
