"""The seam between the engine and Ansible: `AnsibleBackend`, and what its backends share.

The reconciler only knows `AnsibleBackend.run(request) -> RunResult`. Two backends
implement it, each in a package of its own, both built on the same run machinery
(`runs.Runs`: the data directory, logging, events to the caller, artifacts rotation,
`latest`, the artifacts cap, `forget`) and differing only in how ansible-playbook is
started for a prepared run (a `PlaybookStep`):

- `runner.ansible.runnerbackend.RunnerBackend` (`--ansible-backend runner`):
  ansible-runner's own `Runner`, a new ansible-playbook process per run;
- `runner.ansible.fastbackend.FastBackend` (`--ansible-backend fast`, the default): a fork
  of a warm zygote per run, falling back to the runner step when no zygote can run it.

How a run ends, for the caller:
- it returns a `RunResult` whenever ansible-playbook got to its final stats, failed tasks
  included (`result.failed`, `result.failure_message`);
- it raises `AnsibleRunError` when there is no result to report: the role or playbook is
  missing, the playbook does not parse, ansible-playbook cannot start, the input
  directory cannot be written, the run was stopped by `close()`. The message starts
  with the reason (`role: /x was not found`, or `did not receive playbook_on_stats event:
  <Ansible's error>`), ready for a Failure condition;
- it raises `CancelledError` when the awaiting task is cancelled, after ansible-playbook
  has been killed and the artifacts are in place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import RunResult
from runner.ansible.runlog import LogEvents
from runner.structs.gvk import GVK

if TYPE_CHECKING:
    from ansible_runner import RunnerConfig

__all__ = [
    "AnsibleBackend",
    "EventCallback",
    "LogEvents",
    "PlaybookStep",
]

EventCallback = Callable[[dict[str, Any]], None]


class AnsibleBackend(Protocol):
    """Runs one role or playbook for one CR and reports what happened."""

    async def run(self, request: RunRequest, *, on_event: EventCallback | None = None) -> RunResult:
        """Run `request`; `on_event` gets every job event, on the caller's event loop."""
        ...

    async def forget(self, gvk: GVK, namespace: str, name: str) -> None:
        """The CR is gone: drop what the backend keeps for it (its data directory).

        Does nothing while a run of that CR is in progress or queued.
        """
        ...

    async def close(self) -> None:
        """Stop the runs in progress and release resources; `run` fails afterwards."""
        ...


class PlaybookStep(Protocol):
    """Runs ansible-playbook for a prepared ansible-runner configuration, to its end.

    `handle` gets each job event before it is written to `job_events/` (it returns True);
    `cancel` set means kill the run. Returns ansible-runner's final status and rc, with
    `status`, `rc`, `stdout` and `job_events/` in the run's artifact directory as
    ansible-runner leaves them.
    """

    def __call__(
        self,
        config: RunnerConfig,
        *,
        handle: Callable[[dict[str, Any]], bool],
        cancel: threading.Event,
    ) -> tuple[str, int | None]: ...
