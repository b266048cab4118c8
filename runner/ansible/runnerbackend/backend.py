"""`RunnerBackend`: every run through ansible-runner's own `Runner`, as the Go operator.

The plain way, and the reference the fast backend is measured against: each run is a
new `ansible-playbook` process that ansible-runner starts under pexpect, and every module
task a new interpreter. It is `runs.Runs` (the data directory, events, logging,
artifacts, `forget`) with `runs.run_with_ansible_runner` as its step. The only
ansible-core hook it uses is the payload-sharing callback plugin (the `payloads` hook),
loaded into every run unless the start-up check left it out (`share_payloads`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from runner.ansible.backend import EventCallback, LogEvents
from runner.ansible.events import RunResult
from runner.ansible.inputs import RunRequest
from runner.ansible.runs import Runs, run_with_ansible_runner
from runner.structs.gvk import GVK

__all__ = ["RunnerBackend"]


class RunnerBackend:
    """`AnsibleBackend` on ansible-runner's Python API, one worker thread per run.

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
    ) -> None:
        self.runs = Runs(
            base_dir,
            log_events=log_events,
            debug_logs=debug_logs,
            logger=logger,
            env=env,
            max_workers=max_workers,
            max_artifacts_bytes=max_artifacts_bytes,
            share_payloads=share_payloads,
            step=run_with_ansible_runner,
        )

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
