"""The `events` hook: a job event's data travels with the run's terminal output.

ansible-runner's callback plugin (`awx_display`) hands each job event to ansible-runner in
two parts: the event's data (the task, the result, the host, ...) goes into a file of its
own, `job_events/<uuid>-partial.json` (written to a temporary name, then renamed), and
only the event's uuid goes into the output, base64-encoded between terminal escape
sequences; ansible-runner (`Runner.event_callback`, in the operator for both backends)
reads and removes that file when it meets the uuid, merges it into the event and writes
`job_events/<counter>-<uuid>.json`. So every event costs the run a file created, written
and renamed, and the operator a file opened, read and removed — three to five events a
task, and on a file system where creating a file is slow (the `/tmp` of some machines:
3 ms a file) a large part of a task's time.

In a run of the fast backend, `install()` makes `EventContext.dump_begin` put the event's
data into the output itself, next to its uuid (`{"uuid": ..., PARTIAL: <the data>}`,
encoded as `dump` encodes: JSON, base64, the same escape sequences), with the JSON
encoder the partial file would have been written with; the backend's side
(`runner.ansible.fastbackend.eventdata`) takes it out of the decoded output and merges
it as ansible-runner merges the file, so the job events, `stdout` and what the event
handler sees are the same as with the file. Nothing else of `awx_display` changes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

__all__ = ["PARTIAL", "install"]

PARTIAL = "_ansible_operator_partial"
"""The key of the event's data in the output's message (next to `uuid`)."""

_MAX_WIDTH = 78
"""`EventContext.dump`'s default chunk width."""


def install(modules: Iterable[Any]) -> None:
    """Make the `EventContext` of each loaded `awx_display` module send the event data with
    the output (for the contexts made from now on and the current ones)."""
    found = [module for module in modules if _usable(module)]
    if not found:
        raise LookupError("no awx_display callback module with an EventContext is loaded")
    for module in found:
        _patch(module)


def _usable(module: Any) -> bool:
    context = getattr(module, "EventContext", None)
    return (
        context is not None
        and callable(getattr(context, "dump_begin", None))
        and callable(getattr(context, "get_begin_dict", None))
        and getattr(module, "AnsibleJSONEncoderLocal", None) is not None
    )


def _patch(module: Any) -> None:
    context_class = module.EventContext
    if getattr(context_class, "_runner_events", False):
        return
    encoder = module.AnsibleJSONEncoderLocal

    def dump_begin(self: Any, fileobj: Any) -> None:
        begin_dict = self.get_begin_dict()
        # What IsolatedFileWrite.set would have written to the partial file, as JSON text.
        partial = json.dumps(begin_dict, cls=encoder)
        message = '{"uuid": ' + json.dumps(begin_dict["uuid"]) + f', "{PARTIAL}": {partial}}}'
        _write(self, fileobj, message)

    context_class.dump_begin = dump_begin
    context_class._runner_events = True


def _write(context: Any, fileobj: Any, message: str) -> None:
    """`EventContext.dump` of a message that is JSON already."""
    b64data = base64.b64encode(message.encode("utf-8")).decode()
    chunks = (
        f"{b64data[offset : offset + _MAX_WIDTH]}\x1b[{len(b64data[offset : offset + _MAX_WIDTH])}D"
        for offset in range(0, len(b64data), _MAX_WIDTH)
    )
    text = "\x1b[K" + "".join(chunks) + "\x1b[K"  # what dump writes, in one write
    with context.display_lock:
        fileobj.write(text)
