"""runner.ansible.hooks.preview in a real ansible-playbook: a planned run skips what it
cannot preview, after the task's `when` and per loop item, writes it down, and stops
before any task when the hook cannot be installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.hooks.previewactions import MARK, PLAN_ENV, PlanMode
from runner.plan.session import preview_callback_dir

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Touch
      ansible.builtin.command: touch {{ out }}/touched
      register: touched
      changed_when: touched.rc == 0
    - name: Never
      ansible.builtin.shell: touch {{ out }}/never
      when: false
    - name: Loop
      ansible.builtin.command: touch {{ out }}/item-{{ item }}
      loop: [1, 2]
    - name: Seen
      ansible.builtin.set_fact:
        seen: "{{ touched }}"
    - name: Local file
      ansible.builtin.copy:
        content: "kept"
        dest: "{{ out }}/copied"
"""


def run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = {
        **os.environ,
        "ANSIBLE_CALLBACK_PLUGINS": str(preview_callback_dir()),
        PLAN_ENV: mode,
        "ANSIBLE_STDOUT_CALLBACK": "json",
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"out={out} ansible_python_interpreter={sys.executable}",
            str(tmp_path / "play.yml"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, out


def results(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    report = json.loads(done.stdout)
    return {
        task["task"]["name"]: task["hosts"]["localhost"]
        for play in report["plays"]
        for task in play["tasks"]
    }


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_tasks_acting_outside_the_api_are_skipped(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    done, out = run(tmp_path, PlanMode(record=str(record)).encode())
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(path.name for path in out.iterdir()) == ["copied"]
    found = results(done)
    assert found["Touch"]["skipped"] is True
    assert found["Touch"]["skip_reason"].startswith("not previewable in a plan: runs a program")
    assert found["Touch"][MARK] == {"reason": found["Touch"][MARK]["reason"], "ran": False}
    assert found["Never"]["skip_reason"] == "Conditional result was False"
    assert [item["skipped"] for item in found["Loop"]["results"]] == [True, True]
    assert found["Seen"]["ansible_facts"]["seen"]["skipped"] is True
    written = records(record)
    assert [(r["task"], r["action"], r["ran"]) for r in written] == [
        ("Touch", "ansible.builtin.command", False),
        ("Loop", "ansible.builtin.command", False),
        ("Loop", "ansible.builtin.command", False),
    ]


def test_side_effects_allowed_run_and_are_written_down(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    done, out = run(tmp_path, PlanMode(allow_side_effects=True, record=str(record)).encode())
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(path.name for path in out.iterdir()) == [
        "copied",
        "item-1",
        "item-2",
        "touched",
    ]
    found = results(done)
    assert found["Touch"]["changed"] is True
    assert found["Touch"][MARK]["ran"] is True
    assert {r["task"] for r in records(record)} == {"Touch", "Loop"}


@pytest.mark.parametrize("mode", ['{"allow_side_effects": "maybe"}'])
def test_a_hook_that_cannot_install_stops_the_run(tmp_path: Path, mode: str) -> None:
    done, out = run(tmp_path, mode)
    assert done.returncode == 3, done.stdout + done.stderr
    assert list(out.iterdir()) == []
    assert "cannot skip the tasks a plan cannot preview" in done.stderr + done.stdout
