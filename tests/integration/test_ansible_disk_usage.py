"""RunnerBackend's disk rules and what it prints, with real ansible-runner runs.

No cluster is needed: roles are written into tmp_path. Covers the global artifacts cap,
`forget` (and its no-op while a run is in progress), start-up cleanup, the `history`
command on real artifacts, and that a planted token never reaches the log output.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.artifacts import list_runs
from runner.ansible.disk import scan
from runner.ansible.inputs import RunRequest
from runner.ansible.runnerbackend import RunnerBackend
from runner.cli.main import main
from runner.observability.logging import JSONFormatter
from runner.structs.gvk import GVK

GVK_ = GVK("cache.example.com", "v1alpha1", "Memcached")
FAST = {"ANSIBLE_GATHERING": "explicit"}
TOKEN = "sha256~PLANTED-integration-token-51d2"
SECRET_VALUE = "dG9wLXNlY3JldC12YWx1ZQ=="

# Action plugins only (no module is shipped to a Python process): the fastest real runs.
CHATTY_TASKS = """\
- name: write some output
  ansible.builtin.debug:
    msg: "{{ 'x' * 20000 }}"
- name: change something
  ansible.builtin.debug:
    msg: changed
  changed_when: true
"""

SLOW_TASKS = """\
- name: wait for the test
  ansible.builtin.wait_for:
    path: "{{ out_dir }}/go"
    timeout: 60
"""

LEAKY_TASKS = f"""\
- name: show the request headers
  ansible.builtin.debug:
    var: headers
  vars:
    headers:
      Authorization: "Bearer {TOKEN}"
- name: show a Secret
  ansible.builtin.debug:
    var: secret
  vars:
    secret:
      apiVersion: v1
      kind: Secret
      metadata: {{name: db}}
      type: Opaque
      data: {{password: "{SECRET_VALUE}"}}
- name: call the API
  ansible.builtin.fail:
    msg: "401 Unauthorized, sent Authorization: Bearer {TOKEN}"
"""


def write_role(root: Path, name: str, tasks: str) -> Path:
    role = root / "roles" / name
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text(tasks)
    return role


def request(name: str, role: Path, out_dir: Path, **fields: Any) -> RunRequest:
    extravars = {
        "ansible_operator_meta": {"name": name, "namespace": "ns"},
        "out_dir": str(out_dir),
    }
    return RunRequest(gvk=GVK_, namespace="ns", name=name, role=role, extravars=extravars, **fields)


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[RunnerBackend]:
    runner_backend = RunnerBackend(tmp_path / "runner", env=FAST)
    yield runner_backend
    await runner_backend.close()


async def test_global_cap_removes_oldest_runs_but_keeps_each_latest(
    tmp_path: Path, out_dir: Path
) -> None:
    role = write_role(tmp_path, "chatty", CHATTY_TASKS)
    base = tmp_path / "runner"
    uncapped = RunnerBackend(base, env=FAST)
    try:
        await uncapped.run(request("a", role, out_dir))
    finally:
        await uncapped.close()
    (first,) = scan(base)
    limit = int(first.size * 2.5)

    backend = RunnerBackend(base, env=FAST, max_artifacts_bytes=limit)
    latest: dict[str, str] = {}
    try:
        for name in ("b", "a", "b"):
            req = request(name, role, out_dir)
            await backend.run(req)
            latest[name] = req.ident
    finally:
        await backend.close()

    # Four runs of two CRs do not fit in 2.5 runs: the two older ones went first.
    listing = scan(base)
    assert sum(entry.size for entry in listing) <= limit
    assert sorted(entry.path.name for entry in listing) == sorted(latest.values())
    assert all(entry.is_latest for entry in listing)
    for name, ident in latest.items():
        runs = list_runs(backend.data_dir(request(name, role, out_dir)))
        assert [run.ident for run in runs] == [ident]


async def test_forget_waits_for_no_run_and_removes_the_data_dir(
    tmp_path: Path, out_dir: Path, backend: RunnerBackend
) -> None:
    role = write_role(tmp_path, "slow", SLOW_TASKS)
    req = request("gone", role, out_dir)
    data_dir = backend.data_dir(req)
    started = asyncio.Event()

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "runner_on_start":
            started.set()

    running = asyncio.create_task(backend.run(req, on_event=on_event))
    await asyncio.wait_for(started.wait(), timeout=60)
    await backend.forget(GVK_, "ns", "gone")
    assert data_dir.is_dir()  # a run is in progress: nothing removed

    (out_dir / "go").touch()
    result = await asyncio.wait_for(running, timeout=60)
    assert not result.failed
    await backend.forget(GVK_, "ns", "gone")
    assert not data_dir.exists()
    assert not data_dir.parent.exists()  # the namespace held nothing else
    await backend.forget(GVK_, "ns", "never-existed")


async def test_history_and_logs_on_real_artifacts(
    tmp_path: Path, out_dir: Path, backend: RunnerBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write_role(tmp_path, "chatty", CHATTY_TASKS)
    bad = write_role(tmp_path, "leaky", LEAKY_TASKS)
    await backend.run(request("web", good, out_dir))
    failing = request("web", bad, out_dir)
    await backend.run(failing)
    capsys.readouterr()

    assert main(["history", "--runner-dir", str(backend.base_dir), "memcached/web"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "Memcached ns/web (Memcached.cache.example.com/v1alpha1)"
    assert lines[2].split()[3:] == ["failed", "2", "0", "1", failing.ident]
    assert lines[3] == (
        "    failed: call the API: 401 Unauthorized, sent Authorization: Bearer <redacted>"
    )
    assert lines[4].split()[3:7] == ["successful", "2", "1", "0"]
    assert lines[5] == "    changed: change something"
    assert TOKEN not in out

    assert main(["logs", "--runner-dir", str(backend.base_dir), "Memcached/web"]) == 0
    out = capsys.readouterr().out
    assert "TASK [leaky : call the API]" in out
    assert TOKEN not in out and SECRET_VALUE not in out


@pytest.mark.parametrize(
    ("log_events", "debug_logs"),
    [
        pytest.param("everything", False, id="everything"),
        pytest.param("tasks", True, id="tasks-and-debug-logs"),
    ],
)
async def test_planted_token_never_logged(
    tmp_path: Path, out_dir: Path, log_events: Any, debug_logs: bool
) -> None:
    role = write_role(tmp_path, "leaky", LEAKY_TASKS)
    logger = logging.getLogger(f"test.leaky.{log_events}")
    logger.propagate = False
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(JSONFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    backend = RunnerBackend(
        tmp_path / "runner", env=FAST, log_events=log_events, debug_logs=debug_logs, logger=logger
    )
    try:
        result = await backend.run(request("leak", role, out_dir))
    finally:
        await backend.close()
        logger.removeHandler(handler)
    assert result.failed
    output = buffer.getvalue()
    assert "call the API" in output
    assert "<redacted>" in output
    assert TOKEN not in output
    assert SECRET_VALUE not in output
