"""`RunnerBackend`: every run through ansible-runner's own `Runner`, as the Go operator.

The plain way, and the reference the fast backend is measured against: each run is a
new `ansible-playbook` process that ansible-runner starts under pexpect, and every module
task a new interpreter. It is `runs.Runs` (the data directory, events, logging,
artifacts, `forget`) with `runs.run_with_ansible_runner` as its step. The only
ansible-core hook it uses is the payload-sharing callback plugin (the `payloads` hook),
loaded into every run unless the start-up check left it out (`share_payloads`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

from runner.ansible.runs import Runs, RunsBackend, RunsOptions, run_with_ansible_runner

__all__ = ["RunnerBackend"]


class RunnerBackend(RunsBackend):
    """`AnsibleBackend` on ansible-runner's Python API, one worker thread per run.

    Takes the arguments of `runs.Runs` (where they are described) but `step`.
    """

    def __init__(
        self,
        base_dir: Path,
        **options: Unpack[RunsOptions],
    ) -> None:
        self.runs = Runs(base_dir, step=run_with_ansible_runner, **options)
