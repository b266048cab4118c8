"""The Ansible backends with real ansible-playbook (no cluster needed), each test run
against both: `RunnerBackend` (ansible-runner) and `FastBackend` (forks of a warm zygote).

Roles and playbooks are written into tmp_path; every run goes through the same code the
operator uses: data directory, events, artifacts, logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from runner.ansible import hooks
from runner.ansible.artifacts import list_runs, read_events
from runner.ansible.backend import LogEvents
from runner.ansible.fastbackend import FastBackend
from runner.ansible.hooks import payloads
from runner.ansible.hooks.modexec import FORK_NOTE
from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import NO_STATS_ERROR, FailedTask
from runner.ansible.runnerbackend import RunnerBackend
from runner.errors import AnsibleRunError
from runner.structs.gvk import GVK

Backend = RunnerBackend | FastBackend

GVK_ = GVK("cache.example.com", "v1alpha1", "Memcached")
FAST = {"ANSIBLE_GATHERING": "explicit"}  # no fact gathering: these roles need no facts

HELLO_TASKS = """\
- name: say hello
  ansible.builtin.debug:
    msg: "hello {{ ansible_operator_meta.name }}"
- name: write the CR's name
  ansible.builtin.copy:
    dest: "{{ out_dir }}/{{ ansible_operator_meta.name }}.txt"
    content: "{{ ansible_operator_meta.namespace }}/{{ ansible_operator_meta.name }} {{ size }}"
"""

FAILING_TASKS = """\
- name: fails but ignored
  ansible.builtin.command: /bin/false
  ignore_errors: true
- name: rescued
  block:
    - name: fails inside a block
      ansible.builtin.fail:
        msg: rescued failure
  rescue:
    - name: recover
      ansible.builtin.debug:
        msg: recovered
- name: the real failure
  ansible.builtin.fail:
    msg: "boom for {{ ansible_operator_meta.name }}"
- name: never reached
  ansible.builtin.debug:
    msg: unreachable
"""

ENV_TASKS = """\
- name: write what the environment says
  ansible.builtin.copy:
    dest: "{{ out_dir }}/env.json"
    content: "{{ {'kubeconfig': lookup('env', 'KUBECONFIG'),
                  'k8s': lookup('env', 'K8S_AUTH_KUBECONFIG'),
                  'operator': lookup('env', 'TEST_OPERATOR_VAR'),
                  'collections': lookup('env', 'ANSIBLE_COLLECTIONS_PATH')} | to_json }}"
"""

TAGGED_TASKS = """\
- name: skipped by --ansible-args
  ansible.builtin.fail:
    msg: should not run
  tags: [skipme]
- name: write the inventory's variable
  ansible.builtin.copy:
    dest: "{{ out_dir }}/inventory.txt"
    content: "{{ inv_marker }}"
"""

SLOW_TASKS = """\
- name: sleep
  ansible.builtin.command: sleep 120
"""

STATS_PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: record stats
      ansible.builtin.set_stats:
        data:
          answer: 42
    - name: show a var
      ansible.builtin.debug:
        var: size
    - name: ask for a requeue
      requeue_after:
        time: 1m30s
"""

REQUEUE_MODULE = """\
#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={"time": {"type": "str", "required": True}})
    module.exit_json(changed=False, period=module.params["time"])


main()
"""

BAD_PLAYBOOK = """\
- hosts: localhost
  tasks:
    - name: x
      debug: msg="a
     bad: [
"""


YAML_ERROR = (
    "We were unable to read either as JSON nor YAML"
    if hooks.core_line(hooks.installed_core_version() or "") == "2.18"
    else "YAML parsing failed"
)
"""How ansible-playbook reports a playbook that does not parse (its wording changed in 2.19)."""


def write_role(root: Path, name: str, tasks: str) -> Path:
    role = root / "roles" / name
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text(tasks)
    return role


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    path = tmp_path / "out"
    path.mkdir()
    return path


@pytest.fixture(params=["runner", "fast"])
def backend_type(request: pytest.FixtureRequest) -> type[Backend]:
    """Each test runs against both backends: they must behave the same."""
    return FastBackend if request.param == "fast" else RunnerBackend


@pytest.fixture
async def backend(tmp_path: Path, backend_type: type[Backend]) -> AsyncIterator[Backend]:
    runner_backend = backend_type(tmp_path / "runner", env=FAST)
    yield runner_backend
    await runner_backend.close()


def request(name: str, *, out_dir: Path, **fields: Any) -> RunRequest:
    extravars = {
        "ansible_operator_meta": {"name": name, "namespace": "ns"},
        "size": 3,
        "out_dir": str(out_dir),
    }
    return RunRequest(gvk=GVK_, namespace="ns", name=name, extravars=extravars, **fields)


async def test_role_success_sees_extravars(tmp_path: Path, out_dir: Path, backend: Backend) -> None:
    role = write_role(tmp_path, "hello", HELLO_TASKS)
    req = request("sample", out_dir=out_dir, role=role, max_artifacts=3)

    result = await backend.run(req)

    assert (result.ok, result.changed, result.skipped, result.failures) == (2, 1, 0, 0)
    assert result.has_stats
    assert not result.failed
    assert result.completion is not None
    assert (out_dir / "sample.txt").read_text() == "ns/sample 3"
    data_dir = tmp_path / "runner/cache.example.com/v1alpha1/Memcached/ns/sample"
    assert backend.data_dir(req) == data_dir
    assert json.loads((data_dir / "env/extravars").read_text())["size"] == 3
    assert (data_dir / "inventory/hosts").read_text().startswith("localhost ansible_connection")
    assert os.readlink(data_dir / "artifacts/latest") == req.ident
    latest = data_dir / "artifacts/latest"
    assert (latest / "status").read_text() == "successful"
    assert (latest / "rc").read_text() == "0"
    assert "hello sample" in (latest / "stdout").read_text()


async def test_failed_task_ignored_and_rescued_are_not_failures(
    tmp_path: Path, out_dir: Path, backend: Backend
) -> None:
    role = write_role(tmp_path, "failing", FAILING_TASKS)

    result = await backend.run(request("bad", out_dir=out_dir, role=role))

    assert result.failed
    assert result.failed_tasks == (FailedTask(task="the real failure", msg="boom for bad"),)
    assert result.failure_message == "boom for bad"
    assert result.failures == 1
    data_dir = backend.data_dir(request("bad", out_dir=out_dir, role=role))
    assert (data_dir / "artifacts/latest/status").read_text() == "failed"


async def test_playbook_set_stats_debug_and_requeue_after(
    tmp_path: Path, out_dir: Path, backend: Backend
) -> None:
    playbooks = tmp_path / "playbooks"
    (playbooks / "library").mkdir(parents=True)
    (playbooks / "library" / "requeue_after.py").write_text(REQUEUE_MODULE)
    playbook = playbooks / "stats.yml"
    playbook.write_text(STATS_PLAYBOOK)
    req = request("pb", out_dir=out_dir, playbook=playbook)
    events: list[dict[str, Any]] = []

    result = await backend.run(req, on_event=events.append)

    assert (result.ok, result.changed, result.failures) == (3, 0, 0)
    assert result.requeue_after == 90.0
    stats = [e for e in events if e["event"] == "playbook_on_stats"]
    assert stats[0]["event_data"]["artifact_data"] == {"answer": 42}
    (debug,) = [
        e
        for e in events
        if e["event"] == "runner_on_ok" and e.get("event_data", {}).get("task") == "show a var"
    ]
    assert debug["event_data"]["res"]["size"] == 3
    # The playbook runs from where it is; a copy is kept for reference.
    data_dir = backend.data_dir(req)
    assert (data_dir / "project/playbook.yaml").read_text() == STATS_PLAYBOOK


async def test_events_arrive_on_the_loop_in_order(
    tmp_path: Path, out_dir: Path, backend: Backend
) -> None:
    role = write_role(tmp_path, "hello", HELLO_TASKS)
    seen: list[tuple[int, int]] = []
    loop_thread = threading.get_ident()

    def on_event(event: dict[str, Any]) -> None:
        seen.append((threading.get_ident(), event["counter"]))

    req = request("ev", out_dir=out_dir, role=role)
    await backend.run(req, on_event=on_event)

    assert seen, "no events delivered"
    assert {thread for thread, _ in seen} == {loop_thread}
    counters = [counter for _, counter in seen]
    assert counters == sorted(counters)
    (run,) = list_runs(backend.data_dir(req))
    assert [e["counter"] for e in read_events(run)] == counters


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        pytest.param("missing-role", "role: {path} was not found", id="missing-role"),
        pytest.param("missing-playbook", "playbook: {path} was not found", id="missing-playbook"),
        pytest.param("syntax-error", f"{NO_STATS_ERROR}: {YAML_ERROR}", id="syntax-error"),
        pytest.param(
            "unknown-role-in-playbook",
            f"{NO_STATS_ERROR}: the role 'nothere' was not found",
            id="unknown-role-in-playbook",
        ),
    ],
)
async def test_runs_without_result_raise_with_the_reason(
    tmp_path: Path, out_dir: Path, backend: Backend, kind: str, expected: str
) -> None:
    path: Path
    if kind == "missing-role":
        path = tmp_path / "roles" / "absent"
        req = request("x", out_dir=out_dir, role=path)
    else:
        path = tmp_path / f"{kind}.yml"
        if kind == "syntax-error":
            path.write_text(BAD_PLAYBOOK)
        elif kind == "unknown-role-in-playbook":
            path.write_text("- hosts: localhost\n  roles: [nothere]\n")
        req = request("x", out_dir=out_dir, playbook=path)

    with pytest.raises(AnsibleRunError) as caught:
        await backend.run(req)

    assert str(caught.value).startswith(expected.format(path=path)), str(caught.value)


async def test_concurrent_runs_for_different_crs(
    tmp_path: Path, out_dir: Path, backend: Backend
) -> None:
    role = write_role(tmp_path, "hello", HELLO_TASKS)
    names = ["one", "two", "three"]
    windows: dict[str, list[float]] = {name: [] for name in names}
    ticks = 0

    def recorder(name: str) -> Any:
        return lambda event: windows[name].append(time.monotonic())

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    begin = time.monotonic()
    try:
        results = await asyncio.gather(
            *(
                backend.run(request(name, out_dir=out_dir, role=role), on_event=recorder(name))
                for name in names
            )
        )
    finally:
        ticking.cancel()
    elapsed = time.monotonic() - begin

    assert [(r.ok, r.changed, r.failed) for r in results] == [(2, 1, False)] * len(names)
    for name in names:
        assert (out_dir / f"{name}.txt").read_text() == f"ns/{name} 3"
    # The runs overlapped, and the event loop kept running meanwhile.
    assert max(w[0] for w in windows.values()) < min(w[-1] for w in windows.values())
    assert ticks >= elapsed / 0.05 / 4  # 2 cores shared with three runs


async def test_artifacts_rotated_and_latest_is_newest(
    tmp_path: Path, out_dir: Path, backend: Backend
) -> None:
    role = write_role(tmp_path, "hello", HELLO_TASKS)
    idents = []
    for _ in range(4):
        req = request("rot", out_dir=out_dir, role=role, max_artifacts=2)
        idents.append(req.ident)
        await backend.run(req)

    data_dir = backend.data_dir(req)
    assert [run.ident for run in list_runs(data_dir)] == [idents[3], idents[2]]
    assert sorted(p.name for p in (data_dir / "artifacts").iterdir()) == sorted(
        [idents[2], idents[3], "latest"]
    )
    assert os.readlink(data_dir / "artifacts/latest") == idents[3]


async def test_runs_leave_no_temporary_directories(
    tmp_path: Path, out_dir: Path, backend_type: type[Backend]
) -> None:
    """Each ansible-playbook makes a local temp directory (`ansible-local-<pid>...`) and
    each file-transferring action a remote one (`ansible-tmp-...`); both go at the end."""
    local_temp, remote_temp = tmp_path / "local", tmp_path / "remote"
    env = {**FAST, "ANSIBLE_LOCAL_TEMP": str(local_temp), "ANSIBLE_REMOTE_TEMP": str(remote_temp)}
    backend = backend_type(tmp_path / "runner", env=env)
    role = write_role(tmp_path, "hello", HELLO_TASKS)
    try:
        for _ in range(3):
            result = await backend.run(request("temp", out_dir=out_dir, role=role))
            assert not result.failed, result.failure_message
    finally:
        await backend.close()
    assert sorted(local_temp.iterdir()) == []
    assert sorted(remote_temp.iterdir()) == []


async def test_the_runner_backend_builds_a_module_payload_once(
    tmp_path: Path, out_dir: Path
) -> None:
    """Every ansible-playbook of the runner backend loads the payload-sharing callback:
    the first run stores each module's payload, later runs reuse it."""
    backend = RunnerBackend(tmp_path / "runner", env=FAST)
    role = write_role(tmp_path, "hello", HELLO_TASKS)
    stored: list[list[str]] = []
    try:
        for name in ("first", "second"):
            result = await backend.run(request(name, out_dir=out_dir, role=role))
            assert not result.failed, result.failure_message
            store = Path(backend.runs.run_variables()[payloads.STORE_ENV])
            stored.append(sorted(p.name for p in store.glob("*.pickle")))
    finally:
        await backend.close()
    assert stored[0]  # `copy` and the modules it calls
    assert stored[1] == stored[0]
    assert not store.exists()  # removed when the backend closes


async def test_environment_reaches_the_role(
    tmp_path: Path,
    out_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend_type: type[Backend],
) -> None:
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", str(tmp_path / "collections"))
    role = write_role(tmp_path, "env", ENV_TASKS)
    backend = backend_type(tmp_path / "runner", env={**FAST, "TEST_OPERATOR_VAR": "from-flag"})
    try:
        req = request(
            "env",
            out_dir=out_dir,
            role=role,
            envvars={"KUBECONFIG": "/tmp/kc", "K8S_AUTH_KUBECONFIG": "/tmp/kc"},
        )
        result = await backend.run(req)
    finally:
        await backend.close()
    assert not result.failed
    assert json.loads((out_dir / "env.json").read_text()) == {
        "kubeconfig": "/tmp/kc",
        "k8s": "/tmp/kc",
        "operator": "from-flag",
        "collections": str(tmp_path / "collections"),
    }


async def test_ansible_args_and_inventory_from_the_environment(
    tmp_path: Path, out_dir: Path, backend_type: type[Backend]
) -> None:
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        "localhost ansible_connection=local ansible_python_interpreter={{ansible_playbook_python}}"
        " inv_marker=from-inventory\n"
    )
    role = write_role(tmp_path, "tagged", TAGGED_TASKS)
    backend = backend_type(tmp_path / "runner", env={**FAST, "ANSIBLE_INVENTORY": str(inventory)})
    req = request("args", out_dir=out_dir, role=role, cmdline="'--skip-tags skipme'")
    try:
        result = await backend.run(req)
    finally:
        await backend.close()
    assert (result.ok, result.changed, result.failed) == (1, 1, False)
    assert (out_dir / "inventory.txt").read_text() == "from-inventory"
    data_dir = backend.data_dir(req)
    assert (data_dir / "env/cmdline").read_text() == "--skip-tags skipme"
    assert (data_dir / "inventory/hosts").read_text() == inventory.read_text()


async def test_group_and_host_vars_of_an_inventory_directory(
    tmp_path: Path, out_dir: Path, backend_type: type[Backend]
) -> None:
    """`ANSIBLE_INVENTORY` naming a directory: its `group_vars/` and `host_vars/` are
    loaded (by the `host_group_vars` vars plugin) as ansible-playbook loads them."""
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "host_vars").mkdir()
    (inventory / "hosts").write_text(
        "localhost ansible_connection=local"
        " ansible_python_interpreter={{ansible_playbook_python}}\n"
    )
    (inventory / "group_vars" / "all.yml").write_text("from_group: group-all\n")
    (inventory / "host_vars" / "localhost.yml").write_text("from_host: host-localhost\n")
    role = write_role(
        tmp_path,
        "inventory_vars",
        "- ansible.builtin.copy:\n"
        '    dest: "{{ out_dir }}/vars.txt"\n'
        '    content: "{{ from_group }} {{ from_host }}"\n',
    )
    backend = backend_type(tmp_path / "runner", env={**FAST, "ANSIBLE_INVENTORY": str(inventory)})
    try:
        # Twice: the second run of a backend must see them as the first did.
        for name in ("first", "second"):
            result = await backend.run(request(name, out_dir=out_dir, role=role))
            assert not result.failed, result.failure_message
            assert (out_dir / "vars.txt").read_text() == "group-all host-localhost"
            (out_dir / "vars.txt").unlink()
    finally:
        await backend.close()


@pytest.mark.parametrize(
    ("log_events", "debug_logs", "present", "absent"),
    [
        pytest.param(
            "tasks",
            False,
            ["task ok: say hello (ansible.builtin.debug): hello logs", "task changed: write"],
            ["playbook_on_stats", "PLAY RECAP"],
            id="tasks",
        ),
        pytest.param(
            "everything", False, ["event playbook_on_stats", "event runner_on_ok"], [], id="all"
        ),
        pytest.param("nothing", False, [], ["task ok", "event "], id="nothing"),
        pytest.param("nothing", True, ["PLAY RECAP", "hello logs"], ["task ok"], id="debug-logs"),
    ],
)
async def test_logging(
    tmp_path: Path,
    out_dir: Path,
    caplog: pytest.LogCaptureFixture,
    log_events: LogEvents,
    debug_logs: bool,
    present: list[str],
    absent: list[str],
    backend_type: type[Backend],
) -> None:
    role = write_role(tmp_path, "hello", HELLO_TASKS)
    logger = logging.getLogger("test.ansible.backend")
    backend = backend_type(
        tmp_path / "runner", env=FAST, log_events=log_events, debug_logs=debug_logs, logger=logger
    )
    try:
        with caplog.at_level(logging.INFO, logger=logger.name):
            await backend.run(request("logs", out_dir=out_dir, role=role))
    finally:
        await backend.close()
    # The run's own logger only: on a loaded machine another test's background thread
    # (a zygote being closed, say) may log in this window.
    ours = [r for r in caplog.records if r.name.split(".")[:3] == logger.name.split(".")]
    text = "\n".join(record.getMessage() for record in ours)
    for fragment in present:
        assert fragment in text
    for fragment in absent:
        assert fragment not in text
    if log_events == "nothing" and not debug_logs:
        assert ours == [], [r.getMessage() for r in ours]


async def test_failure_is_logged_with_its_message(
    tmp_path: Path,
    out_dir: Path,
    caplog: pytest.LogCaptureFixture,
    backend_type: type[Backend],
) -> None:
    role = write_role(tmp_path, "failing", FAILING_TASKS)
    logger = logging.getLogger("test.ansible.failures")
    backend = backend_type(tmp_path / "runner", env=FAST, logger=logger)
    try:
        with caplog.at_level(logging.INFO, logger=logger.name):
            await backend.run(request("f", out_dir=out_dir, role=role))
    finally:
        await backend.close()
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(
        "task failed: the real failure (ansible.builtin.fail): boom for f" in m for m in errors
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("task failed (ignored): fails but ignored" in m for m in warnings)


def _running(argument: str) -> list[int]:
    """Live processes with `argument` on their command line (a zombie has none)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if argument.encode() in cmdline.read_bytes().split(b"\0"):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


async def _until(probe: Callable[[], bool], *, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, message
        await asyncio.sleep(0.1)


async def test_cancelling_the_caller_kills_the_run_and_its_modules(
    tmp_path: Path, out_dir: Path, backend: Backend
) -> None:
    # A duration of its own names this test's module process among all others.
    duration = f"120.{uuid.uuid4().int % 10**9:09d}"
    role = write_role(
        tmp_path, "slow", f"- name: sleep\n  ansible.builtin.command: sleep {duration}\n"
    )
    req = request("slow", out_dir=out_dir, role=role)
    task = asyncio.create_task(backend.run(req))
    await _until(lambda: bool(_running(duration)), timeout=60, message="the module runs")
    begin = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - begin < 30
    latest = backend.data_dir(req) / "artifacts/latest"
    assert (latest / "status").read_text() == "canceled"
    # ansible-core's task workers leave the run's process group: the module survived
    # a kill of the group alone.
    await _until(lambda: not _running(duration), timeout=10, message="the module outlived its run")


async def test_close_stops_runs_in_progress_and_queued(
    tmp_path: Path, out_dir: Path, backend_type: type[Backend]
) -> None:
    role = write_role(tmp_path, "slow", SLOW_TASKS)
    backend = backend_type(tmp_path / "runner", env=FAST, max_workers=1)
    started = asyncio.Event()

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "runner_on_start":
            started.set()

    running = asyncio.create_task(
        backend.run(request("c", out_dir=out_dir, role=role), on_event=on_event)
    )
    queued = asyncio.create_task(backend.run(request("q", out_dir=out_dir, role=role)))
    await asyncio.wait_for(started.wait(), timeout=60)
    await asyncio.wait_for(backend.close(), timeout=30)
    for task in (running, queued):
        with pytest.raises(AnsibleRunError, match="stopped"):
            await task
    assert not backend.data_dir(request("q", out_dir=out_dir, role=role)).exists()
    with pytest.raises(AnsibleRunError, match="closed"):
        await backend.run(request("c", out_dir=out_dir, role=role))


async def test_trivial_role_run_time(
    tmp_path: Path, out_dir: Path, backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    role = write_role(tmp_path, "hello", HELLO_TASKS)
    await backend.run(request("warm", out_dir=out_dir, role=role))
    timings = []
    for index in range(3):
        begin = time.monotonic()
        await backend.run(request(f"t{index}", out_dir=out_dir, role=role))
        timings.append(time.monotonic() - begin)
    with capsys.disabled():
        print(f"\ntrivial role run (2 tasks, no facts): {', '.join(f'{t:.2f}s' for t in timings)}")
    assert min(timings) < 30


MODULE_TASKS = """\
- name: stat a file
  ansible.builtin.stat:
    path: "{{ fixture }}"
- name: run a command
  ansible.builtin.command: echo hello
- name: a module that warns
  ansible.builtin.command:
    cmd: echo warned
    executable: /bin/bash
- name: a directory
  ansible.builtin.file:
    path: "{{ out_dir }}/dir"
    state: directory
    mode: "0750"
- name: a file with content
  ansible.builtin.copy:
    dest: "{{ out_dir }}/file.txt"
    content: "content\\n"
- name: a failing command
  ansible.builtin.command: /bin/false
  ignore_errors: true
- name: bad arguments
  ansible.builtin.file:
    path: "{{ out_dir }}/x"
    state: bogus
  ignore_errors: true
- name: the task's environment
  ansible.builtin.command: printenv FAST_TEST_VAR
  environment:
    FAST_TEST_VAR: from the task
- name: the working directory a module sees
  ansible.builtin.command: printenv PWD
- name: the locale Python set for a module
  ansible.builtin.command: printenv LC_CTYPE
  ignore_errors: true
- name: the locale Python set for ansible-playbook
  ansible.builtin.debug:
    msg: "{{ lookup('env', 'LC_CTYPE') }}"
- name: stat a directory with a checksum
  ansible.builtin.stat:
    path: "{{ out_dir }}"
    get_checksum: true
    checksum_algorithm: sha1
  register: ok_stat
"""
VOLATILE_KEYS = {
    *("start", "end", "delta"),  # command timing
    *("atime", "mtime", "ctime", "inode", "version"),  # stat of files made by each run
    *("src", "_original_basename"),  # copy's temporary file
}


def _comparable(value: Any, out_dir: Path, base: Path) -> Any:
    """A task result without what differs between any two runs (times, temp paths)."""
    if isinstance(value, dict):
        return {
            key: _comparable(item, out_dir, base)
            for key, item in value.items()
            if key not in VOLATILE_KEYS
        }
    if isinstance(value, list):
        return [_comparable(item, out_dir, base) for item in value]
    if isinstance(value, str):
        return value.replace(str(out_dir), "<out>").replace(str(base), "<base>")
    return value


async def test_modules_in_process_give_the_results_of_new_interpreters(tmp_path: Path) -> None:
    role = write_role(tmp_path, "modules", MODULE_TASKS)
    fixture = tmp_path / "fixture.txt"
    fixture.write_text("fixture\n")
    results: dict[str, dict[str, Any]] = {}
    outputs: dict[str, str] = {}
    for kind, backend_type in (("runner", RunnerBackend), ("fast", FastBackend)):
        out = tmp_path / f"out-{kind}"
        out.mkdir()
        base = tmp_path / f"runner-{kind}"
        backend = backend_type(base, env=FAST)
        events: list[dict[str, Any]] = []
        req = RunRequest(
            gvk=GVK_,
            namespace="ns",
            name="modules",
            role=role,
            verbosity=4,
            extravars={"out_dir": str(out), "fixture": str(fixture)},
        )
        try:
            result = await backend.run(req, on_event=events.append)
        finally:
            await backend.close()
        assert (result.ok, result.failures) == (12, 0)
        results[kind] = {
            event["event_data"]["task"]: (
                event["event"],
                _comparable(event["event_data"]["res"], out, base),
            )
            for event in events
            if event["event"] in ("runner_on_ok", "runner_on_failed")
        }
        outputs[kind] = (backend.data_dir(req) / "artifacts/latest/stdout").read_text()

    assert results["fast"] == results["runner"]
    warned = results["fast"]["a module that warns"][1]
    assert "executable" in " ".join(warned["warnings"])
    assert results["fast"]["the task's environment"][1]["stdout"] == "from the task"
    assert results["fast"]["the working directory a module sees"][1]["stdout"] == (
        "<base>/cache.example.com/v1alpha1/Memcached/ns/modules/project"
    )
    assert FORK_NOTE not in outputs["runner"]
    for fqn in ("ansible.modules.stat", "ansible.modules.command", "ansible.modules.file"):
        assert f"{FORK_NOTE}: {fqn}" in outputs["fast"]


PROBE_MODULE = """\
#!/usr/bin/python
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={})
    module.exit_json(changed=False, answer="%s")


main()
"""
PROBE_TASKS = """\
- name: ask the role's own module
  probe:
  register: probed
- name: show it
  ansible.builtin.debug:
    msg: "{{ probed.answer }}"
"""


def write_probe_role(root: Path, name: str, answer: str) -> Path:
    role = write_role(root, name, PROBE_TASKS)
    (role / "library").mkdir()
    (role / "library" / "probe.py").write_text(PROBE_MODULE % answer)
    return role


def _answers(events: list[dict[str, Any]]) -> list[str]:
    return [
        event["event_data"]["res"]["msg"]
        for event in events
        if event["event"] == "runner_on_ok" and event["event_data"]["task"] == "show it"
    ]


async def test_library_modules_of_different_roles_and_versions_are_not_mixed_up(
    tmp_path: Path, out_dir: Path, backend: Backend
) -> None:
    first = write_probe_role(tmp_path / "a", "first", "first role")
    second = write_probe_role(tmp_path / "b", "second", "second role")
    events: list[dict[str, Any]] = []

    await backend.run(request("p1", out_dir=out_dir, role=first), on_event=events.append)
    await backend.run(request("p2", out_dir=out_dir, role=second), on_event=events.append)
    # The same role with its module edited: the next run uses the new code.
    module = first / "library" / "probe.py"
    module.write_text(PROBE_MODULE % "first role, edited")
    stat = module.stat()
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    await backend.run(request("p1", out_dir=out_dir, role=first), on_event=events.append)

    assert _answers(events) == ["first role", "second role", "first role, edited"]
