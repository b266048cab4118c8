"""The operator's side of the warm runners: a few processes per webhook, one request each.

`WarmRunners.run(key, ...)` answers one request of one webhook (`key`) with the job
events of its tasks, run in one of that webhook's warm processes (`warmprocess.py`), or None
when the webhook needs a full run (its play is not one the warm runner runs, its process
cannot start, or warm runs are off). Per webhook:

- processes start on demand, one at a time, up to `max_processes` (each one is busy with
  one request at a time), the first when the operator starts (`add`) so that the
  start-up log says which webhooks run warm; those beyond the first stop after
  `_IDLE_SECONDS` without a request;
- what the process says at each (re)load of the play is logged when it changes: "runs
  warm", or why it keeps full runs;
- a request that does not finish by its deadline, or whose process dies, raises
  `WarmTimeout` / `WarmCrashed`; the process is killed and a new one started, the request
  goes to the webhook's failure policy like any run that timed out or crashed;
- a process that fails to start makes the webhook use full runs for a while
  (`_RETRY_AFTER_FAILURE`), then it is tried again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.ansible.warm import frames

__all__ = ["WarmCrashed", "WarmError", "WarmRunners", "WarmTarget", "WarmTimeout"]

_RETRY_AFTER_FAILURE = 60.0
_START_TIMEOUT = 120.0
"""How long a process may take to load ansible-core and the play."""
_IDLE_SECONDS = 120.0
"""A webhook's processes beyond its first are stopped after this long without a request."""


class WarmTimeout(Exception):
    """The request did not finish by its deadline (its process was killed)."""


class WarmCrashed(Exception):
    """The process running the request died (it was replaced)."""


class WarmError(Exception):
    """The warm runner could not run the request (an error of its own, never an answer)."""


@dataclass(frozen=True)
class WarmTarget:
    """What a webhook's processes run: a playbook file (a role's wrapper play written by
    the caller) with the inventory, environment and directory of a full run."""

    label: str
    """For the log lines: the webhook."""
    playbook: Path
    inventory: Path
    cwd: Path
    env: Mapping[str, str]
    verbosity: int = 0


class _Process:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.idle_since = time.monotonic()

    async def request(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(frames.encode(message))
        await self.proc.stdin.drain()
        return await self.receive()

    async def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        header = await self.proc.stdout.readexactly(frames.HEADER)
        body = await self.proc.stdout.readexactly(frames.length(header))
        return frames.decode(body)

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)

    async def close(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), timeout=5)
        except TimeoutError:
            self.kill()
            await self.proc.wait()


@dataclass
class _Pool:
    target: WarmTarget
    scratch: str
    idle: list[_Process] = field(default_factory=list)
    live: set[_Process] = field(default_factory=set)
    starting: int = 0
    warm: bool | None = None
    """The last decision (None: none yet)."""
    why: str = ""
    failed_until: float = 0.0
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)


class WarmRunners:
    """The warm processes of every webhook (see the module docstring)."""

    def __init__(
        self,
        *,
        max_processes: int,
        logger: logging.Logger,
        python: str | None = None,
    ) -> None:
        self._max = max(1, max_processes)
        self._log = logger
        self._python = python or sys.executable
        self._pools: dict[str, _Pool] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def add(self, key: str, target: WarmTarget) -> None:
        """Declare a webhook's target; its first process starts right away."""
        scratch = tempfile.mkdtemp(prefix="ansible-operator-warm-")
        pool = _Pool(target=target, scratch=scratch)
        self._pools[key] = pool
        self._spawn(pool)

    def warming(self) -> bool:
        """A webhook's first process is still loading (it has decided nothing yet)."""
        return any(
            pool.warm is None and time.monotonic() >= pool.failed_until
            for pool in self._pools.values()
        )

    def decision(self, key: str) -> tuple[bool | None, str]:
        pool = self._pools[key]
        return pool.warm, pool.why

    def pids(self, key: str) -> list[int]:
        """The processes of a webhook (for tests and diagnostics)."""
        return [process.proc.pid for process in self._pools[key].live]

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for pool in self._pools.values():
            for process in list(pool.live):
                await process.close()
            pool.live.clear()
            pool.idle.clear()
            shutil.rmtree(pool.scratch, ignore_errors=True)

    async def run(
        self, key: str, extravars: Mapping[str, Any], *, deadline: float
    ) -> list[dict[str, Any]] | None:
        """The job events of the webhook's tasks run with `extravars`, or None: use a full
        run. `deadline` is on the loop's clock (`time.monotonic`)."""
        pool = self._pools.get(key)
        if pool is None or (pool.warm is False and not pool.live):
            return None
        process = await self._acquire(pool, deadline)
        if process is None:
            return None
        try:
            answer = await asyncio.wait_for(
                process.request({"vars": dict(extravars)}),
                timeout=max(0.0, deadline - time.monotonic()),
            )
        except TimeoutError:
            self._discard(pool, process)
            raise WarmTimeout() from None
        except asyncio.CancelledError:
            self._discard(pool, process)  # its answer would be the next request's
            raise
        except (OSError, EOFError, asyncio.IncompleteReadError, ValueError) as exc:
            code = None
            with contextlib.suppress(TimeoutError):
                # Its output ended: it exits, or is stopped by _discard.
                code = await asyncio.wait_for(process.proc.wait(), timeout=1)
            self._discard(pool, process)
            raise WarmCrashed(_exit_reason(code, exc)) from None
        self._release(pool, process)
        loaded = answer.get("loaded")
        if isinstance(loaded, Mapping):
            self._decided(pool, bool(loaded.get("warm")), str(loaded.get("why") or ""))
        if "error" in answer:
            raise WarmError(str(answer["error"]))
        if answer.get("cold"):
            return None
        events = answer.get("events")
        if not isinstance(events, list):
            raise WarmError("the warm runner's answer has no events")
        return events

    # -- processes --------------------------------------------------------------------

    async def _acquire(self, pool: _Pool, deadline: float) -> _Process | None:
        self._retire_idle(pool)
        async with pool.changed:
            while True:
                if time.monotonic() < pool.failed_until:
                    return None
                while pool.idle:
                    process = pool.idle.pop()
                    if process.proc.returncode is None:
                        return process
                    self._discard(pool, process)  # died while idle: replaced
                if pool.warm is False and not pool.live and not pool.starting:
                    return None
                if not pool.starting and len(pool.live) < self._max and pool.warm is not False:
                    self._spawn(pool)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WarmTimeout()
                try:
                    await asyncio.wait_for(pool.changed.wait(), timeout=left)
                except TimeoutError:
                    raise WarmTimeout() from None

    def _release(self, pool: _Pool, process: _Process) -> None:
        process.idle_since = time.monotonic()
        pool.idle.append(process)
        self._notify(pool)

    def _retire_idle(self, pool: _Pool) -> None:
        """Stop the processes a burst of requests started once it is long over (the
        idle list is a stack: its bottom waited longest)."""
        now = time.monotonic()
        while len(pool.live) > 1 and pool.idle and now - pool.idle[0].idle_since > _IDLE_SECONDS:
            process = pool.idle.pop(0)
            pool.live.discard(process)
            self._background(process.close())

    def _discard(self, pool: _Pool, process: _Process) -> None:
        process.kill()
        pool.live.discard(process)
        with contextlib.suppress(ValueError):
            pool.idle.remove(process)
        self._background(process.proc.wait())
        if not self._closed and (pool.warm is not False or not pool.live):
            self._spawn(pool)  # its replacement, warming up before the next request
        self._notify(pool)

    def _notify(self, pool: _Pool) -> None:
        async def notify() -> None:
            async with pool.changed:
                pool.changed.notify_all()

        self._background(notify())

    def _background(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _spawn(self, pool: _Pool) -> None:
        if self._closed:
            return
        pool.starting += 1
        self._background(self._start(pool))

    async def _start(self, pool: _Pool) -> None:
        target = pool.target
        process: _Process | None = None
        try:
            proc = await asyncio.create_subprocess_exec(
                self._python,
                "-m",
                "runner.ansible.warm.warmprocess",
                "--playbook",
                str(target.playbook),
                "--inventory",
                str(target.inventory),
                "--verbosity",
                str(target.verbosity),
                "--scratch",
                pool.scratch,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                cwd=str(target.cwd),
                env=dict(target.env),
                limit=frames.MAX_FRAME,
            )
            process = _Process(proc)
            hello = await asyncio.wait_for(process.receive(), timeout=_START_TIMEOUT)
            loaded = hello.get("loaded")
            if not isinstance(loaded, Mapping):
                raise WarmError(str(hello.get("error") or hello)[:2000])
        except Exception as exc:
            pool.starting -= 1
            if process is not None:
                process.kill()
                self._background(process.proc.wait())
            if isinstance(exc, asyncio.CancelledError):
                raise
            pool.failed_until = time.monotonic() + _RETRY_AFTER_FAILURE
            self._log.error(
                "%s: the warm runner could not start (%s); full runs for %.0f s",
                target.label,
                _reason(exc),
                _RETRY_AFTER_FAILURE,
            )
            self._notify(pool)
            return
        pool.starting -= 1
        pool.live.add(process)
        self._decided(pool, bool(loaded.get("warm")), str(loaded.get("why") or ""))
        if pool.warm is False and len(pool.live) > 1:
            # One process stays to notice when the files change; more are not needed.
            pool.live.discard(process)
            await process.close()
            self._notify(pool)
            return
        pool.idle.append(process)
        self._notify(pool)

    def _decided(self, pool: _Pool, warm: bool, why: str) -> None:
        if (pool.warm, pool.why) == (warm, why):
            return
        pool.warm, pool.why = warm, why
        if warm:
            self._log.info("%s: runs warm (its tasks run in a warm process)", pool.target.label)
        else:
            self._log.info("%s: runs each request as a full run: %s", pool.target.label, why)


def _exit_reason(code: int | None, exc: BaseException) -> str:
    if code is not None and code < 0:
        return f"the warm Ansible process was killed by signal {-code}"
    if code is not None:
        return f"the warm Ansible process exited with code {code}"
    return f"the warm Ansible process stopped answering ({_reason(exc)})"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"[:500]
