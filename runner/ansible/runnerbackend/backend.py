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

from runner.ansible.backend import LogEvents
from runner.ansible.runs import Runs, RunsBackend, run_with_ansible_runner

__all__ = ["RunnerBackend"]


class RunnerBackend(RunsBackend):
    """`AnsibleBackend` on ansible-runner's Python API, one worker thread per run.

    Takes the arguments of `runs.Runs` (where they are described) but `step`.
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
