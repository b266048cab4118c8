"""The `events` hook and the fast backend's `eventdata`: a job event is the same whether its
data came through a partial file (ansible-runner's way) or with the output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Run in a process of its own: importing awx_display patches ansible-core's Display.
SCRIPT = r"""
import io, json, os, sys, types
from pathlib import Path

root = Path(sys.argv[1])
os.environ["AWX_ISOLATED_DATA_DIR"] = str(root / "child")
(root / "child" / "job_events").mkdir(parents=True)
from ansible_runner.display_callback.callback import awx_display
from ansible_runner.runner import Runner
from ansible_runner.utils import OutputEventFilter

from runner.ansible.fastbackend.eventdata import with_partials
from runner.ansible.hooks import events

def run(install):
    if install:
        events.install([awx_display])
    context = awx_display.EventContext()
    output = io.StringIO()
    for number, (event, data) in enumerate(EVENTS):
        context.add_local(
            event=event, uuid=f"00000000-0000-0000-0000-00000000000{number}",
            created="2026-01-01T00:00:00+00:00", pid=4242, **data,
        )
        context.dump_begin(output)
        output.write(f"text of {event}\r\n")
        context.dump_end(output)
        context.remove_local(event=None, uuid=None, created=None, pid=None, **data)
    return output.getvalue()

EVENTS = [
    ("playbook_on_task_start", {"task": "a task", "task_uuid": "t-1", "event_data": {"x": 1}}),
    ("runner_on_ok", {"task_uuid": "t-1", "res": {"changed": False, "msg": "é" * 3000,
                      "when": __import__("datetime").date(2026, 1, 2)}}),
    ("runner_on_skipped", {"task_uuid": "t-1", "res": {"skipped": True}}),
]

def collect(text, name, check=False):
    artifacts = root / name
    (artifacts / "job_events").mkdir(parents=True)
    for partial in (root / "child" / "job_events").glob("*-partial.json"):
        partial.rename(artifacts / "job_events" / partial.name)
    seen = []
    config = types.SimpleNamespace(artifact_dir=str(artifacts), ident="ident-1", settings={},
                                   check_job_event_data=check)
    runner = Runner(config, event_handler=lambda event: seen.append(json.dumps(event)) or True)
    stdout = io.StringIO()
    flt = OutputEventFilter(stdout, with_partials(runner), suppress_ansible_output=True)
    for offset in range(0, len(text), 777):
        flt.write(text[offset:offset + 777])
    flt._handle = None
    flt.close()
    files = {p.name: p.read_text() for p in sorted((artifacts / "job_events").iterdir())}
    return {"files": files, "seen": seen, "stdout": stdout.getvalue()}

through_files = collect(run(False), "files")
output_text = run(True)
with_output = collect(output_text, "output")
insisting = collect(output_text, "insisting", check=True)
print(json.dumps({"files": through_files, "output": with_output, "insisting": insisting}))
"""


def test_a_job_event_is_the_same_with_its_data_in_the_output(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    files, output = result["files"], result["output"]
    assert len(files["files"]) == 3
    assert all("-partial" not in name for name in files["files"])
    assert output == files
    assert result["insisting"] == files  # ansible-runner set to insist on partial files
    first = json.loads(next(iter(output["files"].values())))
    assert list(first)[:6] == [
        "uuid",
        "counter",
        "stdout",
        "start_line",
        "end_line",
        "runner_ident",
    ]
    assert first["event"] == "playbook_on_task_start"
    assert not list((tmp_path / "child" / "job_events").iterdir())  # no partial file written
