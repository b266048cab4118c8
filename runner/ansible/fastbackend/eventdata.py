"""The operator's side of the `events` hook: event data that came with the output.

A run of the fast backend writes each job event's data into its output next to the
event's uuid (`runner.ansible.hooks.events`) instead of into a partial file.
ansible-runner's `OutputEventFilter` decodes that message as it decodes any (the
`PARTIAL` entry comes with the event as an extra key), and `with_partials` wraps
ansible-runner's `Runner.event_callback` so that it gets the event as the partial file
would have made it: the data is merged in ansible-runner's order (`runner_ident` first,
then the partial data), and ansible-runner does the rest as always — it finds no partial
file (the run wrote none; its `debug` line about it is only printed when ansible-runner's
debug output is on), adds `created` when missing, calls the event handler and its
plugins, and writes `job_events/<counter>-<uuid>.json`. An event without the entry (a
run whose ansible-core was not tested with the hook) goes to ansible-runner unchanged,
with its partial file. When the runner's configuration asks ansible-runner to insist on
the partial files (`check_job_event_data`, off in the operator's runs), the data is
written to the file the run would have written, and ansible-runner reads it there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from runner.ansible.hooks.events import PARTIAL

__all__ = ["with_partials"]


def with_partials(runner: Any) -> Callable[[dict[str, Any]], None]:
    """`runner.event_callback`, taking each event's data from the output when it is there."""
    callback: Callable[[dict[str, Any]], None] = runner.event_callback

    def event_callback(event_data: dict[str, Any]) -> None:
        partial = event_data.pop(PARTIAL, None)
        if isinstance(partial, dict) and "uuid" in event_data:
            if getattr(runner.config, "check_job_event_data", False):
                _write_partial(runner.config.artifact_dir, str(event_data["uuid"]), partial)
            else:
                event_data["runner_ident"] = str(runner.config.ident)
                event_data.update(partial)
        callback(event_data)

    return event_callback


def _write_partial(artifact_dir: str, uuid: str, partial: dict[str, Any]) -> None:
    path = os.path.join(artifact_dir, "job_events", f"{uuid}-partial.json")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(partial, handle)
