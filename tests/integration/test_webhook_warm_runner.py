"""The webhooks' warm runner against full runs, with real Ansible and no cluster.

The same requests through a full run per request (the fast backend's ansible-playbook)
and through the warm runner (a warm process per webhook) must give the same answers:
allowed or denied, message, warnings, patch, converted object. The roles: what
`create webhook --defaulting --programmatic-validation --conversion` writes, the admission
benchmark's, tests/integration/test_webhooks.py's (two of which keep full runs: they
run a command), and one that uses every keyword the warm runner supports. Then what only
the warm runner has: requests isolated from each other, a role edited on disk taken at
the next request, and a request that times out or whose process dies going to the
failure policy with a fresh process afterwards.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import test_webhooks as cluster_webhooks
from prometheus_client import CollectorRegistry

from runner.ansible.fastbackend import FastBackend
from runner.ansible.warm.pool import WarmRunners
from runner.devtools.scaffold.webhook.files import CONVERSION_ROLE, DEFAULTING_ROLE, VALIDATION_ROLE
from runner.errors import AnsibleRunError
from runner.structs import GVK
from runner.webhooks.declarations import Webhook
from runner.webhooks.server import warmtargets
from runner.webhooks.server.roles import EventLog, RunOptions, WebhookMetrics, WebhookRunner

ROOT = Path(__file__).resolve().parents[2]
GVK_ = GVK("warm.example.com", "v1alpha1", "Widget")
CR_VAR = "_warm_example_com_widget"
CLUSTER_GVK = GVK(cluster_webhooks.GROUP, "v1alpha1", cluster_webhooks.KIND)


def _bench_role() -> str:
    """The validating role of bench/admission.py (read, not imported: the bench needs a
    cluster's client at import)."""
    tree = ast.parse((ROOT / "bench" / "admission.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "VALIDATE":
            return str(ast.literal_eval(node.value))
    raise AssertionError("bench/admission.py has no VALIDATE")


SEMANTICS_DEFAULTS = """\
limit: 5
greeting: "hello {{ ansible_operator_meta.name }}"
"""
SEMANTICS_VARS = """\
kind_label: widget
"""
SEMANTICS = """\
- name: remember the size
  ansible.builtin.set_fact:
    doubled: "{{ (size | default(0) | int) * 2 }}"
- name: a check that may fail, ignored
  ansible.builtin.assert:
    that: ["doubled | int < limit | int * 2"]
    fail_msg: "doubled {{ doubled }} over {{ limit }}"
  ignore_errors: true
  register: size_check
- name: a block
  when: operation != 'DELETE'
  vars:
    note: "{{ greeting }} ({{ kind_label }})"
  block:
    - name: say it
      ansible.builtin.debug:
        msg: "{{ note }}"
      register: said
    - name: deny, hidden
      ansible.builtin.fail:
        msg: "secret reason {{ size }}"
      no_log: true
      when: (mode | default('')) == 'hidden'
    - name: deny by failed_when
      ansible.builtin.debug:
        msg: checking
      failed_when: (mode | default('')) == 'failed_when'
      changed_when: true
- name: count the colours, one item at a time
  ansible.builtin.set_fact:
    colour_count: "{{ (colour_count | default(0) | int) + 1 }}"
  loop: "{{ colours | default([]) }}"
  loop_control:
    label: "{{ item }}"
- name: refuse a bad colour
  ansible.builtin.fail:
    msg: "bad colour {{ item }} ({{ ansible_loop.index }})"
  when: item == 'bad'
  loop: "{{ colours | default([]) }}"
  loop_control:
    extended: true
- name: warn with what was registered
  ansible.builtin.set_fact:
    webhook_warnings:
      - "{{ said.msg | default('none') }}"
      - "check failed: {{ size_check.failed | default(false) }}"
      - "{{ size_check.msg | default('') }}"
      - "{{ colour_count | default(0) }} colours"
- name: a fact set with no_log is not returned
  ansible.builtin.set_fact:
    webhook_warnings: ["hidden"]
  no_log: true
  when: (mode | default('')) == 'nolog_fact'
- name: an undefined variable
  ansible.builtin.fail:
    msg: "{{ missing_variable }}"
  when: (mode | default('')) == 'undefined'
- name: extra-vars are templates
  ansible.builtin.fail:
    msg: "templated: {{ tmpl | default('') }}"
  when: (mode | default('')) == 'template'
- name: a patch instead of an object
  ansible.builtin.set_fact:
    webhook_patch: [{op: add, path: /metadata/labels, value: {size: "{{ size }}"}}]
  when: webhook_type == 'mutating'
"""

PLAYBOOK = """\
- name: a validating playbook
  hosts: localhost
  gather_facts: false
  vars:
    most: 6
  pre_tasks:
    - name: the size, doubled
      ansible.builtin.set_fact:
        doubled: "{{ (size | default(0) | int) * 2 }}"
  tasks:
    - name: at most
      ansible.builtin.assert:
        that: ["(size | default(0) | int) <= most"]
        fail_msg: "{{ size }} is more than {{ most }} (doubled {{ doubled }})"
      when: operation != 'DELETE'
"""

ISOLATION = """\
- name: set a fact only when asked
  ansible.builtin.set_fact:
    leaked: "{{ size }}"
  when: (mode | default('')) == 'set'
- name: report it when it is there
  ansible.builtin.set_fact:
    webhook_warnings: ["leaked {{ leaked }}"]
  when: leaked is defined
- name: burn CPU when asked (a role that never finishes in time)
  ansible.builtin.set_fact:
    burnt: "{{ range(10 ** 10) | sum }}"
  when: (mode | default('')) == 'hang'
"""


def _format(template: str) -> str:
    return template.format(kind="Widget", what="create and update", cr_var=CR_VAR)


def _write_role(roles: Path, name: str, tasks: str, **files: str) -> Path:
    role = roles / name
    (role / "tasks").mkdir(parents=True, exist_ok=True)
    (role / "tasks" / "main.yml").write_text(tasks)
    for directory, text in files.items():
        (role / directory).mkdir(exist_ok=True)
        (role / directory / "main.yml").write_text(text)
    return role


def _webhook(kind: str, role: Path, gvk: GVK = GVK_, tag: str = "", **fields: Any) -> Webhook:
    version = GVK(gvk.group, f"{kind[:3]}{role.name}{tag}", gvk.kind)  # one key per webhook
    # A full run on a loaded machine may take seconds: no answer may come from a timeout.
    fields.setdefault("timeout", 120.0)
    return Webhook(type=kind, gvk=version, role=role, **fields)  # type: ignore[arg-type]


def _widget(spec: dict[str, Any], version: str = "v1alpha1", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GVK_.group}/{version}",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "ns", "uid": "u-1", "labels": labels},
        "spec": spec,
    }


def _admission(
    operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "uid": "req-1",
        "kind": {"group": GVK_.group, "version": "v1alpha1", "kind": "Widget"},
        "operation": operation,
        "name": "w1",
        "namespace": "ns",
        "object": obj,
        "oldObject": old,
        "userInfo": {"username": "alice", "groups": ["dev"]},
        "dryRun": False,
    }


ADMISSIONS = [
    _admission("CREATE", _widget({"size": 3})),
    _admission("CREATE", _widget({"size": -1})),
    _admission("CREATE", _widget({"size": 0})),
    _admission("CREATE", _widget({"size": 7})),
    _admission("CREATE", _widget({"size": 11})),
    _admission("CREATE", _widget({"size": 200})),
    _admission("CREATE", _widget({})),
    _admission("UPDATE", _widget({"size": 4}), _widget({"size": 2})),
    _admission("DELETE", None, _widget({"size": 2}, protected="yes")),
]
MODES = [
    *[
        _admission("CREATE", _widget({"size": 2, "mode": mode, "tmpl": "{{ 1 + 1 }}"}))
        for mode in ("hidden", "failed_when", "nolog_fact", "undefined", "template")
    ],
    _admission("CREATE", _widget({"size": 2, "colours": ["red", "blue", "green"]})),
    _admission("CREATE", _widget({"size": 2, "colours": ["red", "bad"]})),
]
"""Requests for the role that uses every keyword."""
CONVERSIONS = [
    (_widget({"size": 3}), f"{GVK_.group}/v1beta1"),
    (_widget({"replicas": 3}, "v1beta1"), f"{GVK_.group}/v1alpha1"),
    (_widget({}), f"{GVK_.group}/v1beta1"),
]


class NoFullRuns:
    """A backend for runners that should make no full runs: it records them, each
    fails (its webhook's failure policy then answers)."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def run(self, request: Any, *, on_event: Any = None) -> Any:
        self.requests.append(request)
        raise AnsibleRunError("no full runs here")

    async def forget(self, *args: Any) -> None:
        pass


@pytest.fixture
def log() -> logging.Logger:
    return logging.getLogger("ansible-operator.webhooks")


def _warm_for(
    webhooks: list[Webhook],
    base: Path,
    env: dict[str, str],
    log: logging.Logger,
    processes: int = 1,
) -> WarmRunners:
    warm = WarmRunners(max_processes=processes, logger=log)
    for webhook in webhooks:
        target = warmtargets.target(webhook, base=base, run_env=env, verbosity=0)
        warm.add(warmtargets.warm_key(webhook), target)
    return warm


async def _until(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[FastBackend]:
    fast = FastBackend(tmp_path / "full", env={"ANSIBLE_GATHERING": "explicit"}, max_workers=2)
    fast.start()
    yield fast
    await fast.close()


def _env(tmp_path: Path) -> dict[str, str]:
    """A full run's environment without starting a backend (the tests that make no full
    runs)."""
    fast = FastBackend(tmp_path / "env", env={"ANSIBLE_GATHERING": "explicit"})
    return fast.run_environment()


async def test_warm_and_full_runs_give_the_same_answers(
    tmp_path: Path, backend: FastBackend, log: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    caplog.set_level(logging.INFO, logger=backend.runs.logger.name)
    roles = tmp_path / "roles"
    semantics = _write_role(
        roles, "semantics", SEMANTICS, defaults=SEMANTICS_DEFAULTS, vars=SEMANTICS_VARS
    )
    admission_hooks = [
        _webhook("validating", _write_role(roles, "scaffold_validation", _format(VALIDATION_ROLE))),
        _webhook("mutating", _write_role(roles, "scaffold_defaulting", _format(DEFAULTING_ROLE))),
        _webhook("validating", _write_role(roles, "bench", _bench_role())),
        _webhook("validating", semantics),
        _webhook("mutating", semantics, failure_policy="Ignore"),
        _webhook("validating", semantics, tag="unsafe", mark_unsafe=True),
        _webhook(
            "validating", _write_role(roles, "it_validate", cluster_webhooks.VALIDATE), CLUSTER_GVK
        ),
        _webhook(
            "mutating", _write_role(roles, "it_defaults", cluster_webhooks.DEFAULTS), CLUSTER_GVK
        ),
    ]
    conversion_hooks = [
        _webhook("conversion", _write_role(roles, "scaffold_conversion", _format(CONVERSION_ROLE))),
        _webhook(
            "conversion", _write_role(roles, "it_convert", cluster_webhooks.CONVERT), CLUSTER_GVK
        ),
    ]
    playbook = tmp_path / "validate.yml"
    playbook.write_text(PLAYBOOK)
    admission_hooks.append(Webhook(type="validating", gvk=GVK_, playbook=playbook, timeout=120.0))
    everything = admission_hooks + conversion_hooks
    options = RunOptions(envvars={})
    full = WebhookRunner(
        backend, workers=2, options=options, metrics=WebhookMetrics(CollectorRegistry())
    )
    warm_runners = _warm_for(everything, tmp_path / "warm", backend.run_environment(), log)
    warm = WebhookRunner(
        backend,
        workers=2,
        options=options,
        metrics=WebhookMetrics(CollectorRegistry()),
        warm=warm_runners,
        warm_log=EventLog(backend.runs.logger),
    )
    try:
        await _until(lambda: not warm_runners.warming(), "the warm runners to load")
        await _until(lambda: not backend.warming(), "the zygote to warm up", 300)
        decisions = {
            w.target.name: warm_runners.decision(warmtargets.warm_key(w)) for w in everything
        }
        # The two roles of test_webhooks.py that can hang run a command: full runs.
        assert {name for name, (is_warm, _) in decisions.items() if not is_warm} == {
            "it_validate",
            "it_defaults",
        }, decisions
        assert (
            "the action ansible.builtin.command runs only in a full run"
            in decisions["it_validate"][1]
        )
        assert any("runs warm" in r.getMessage() for r in caplog.records)
        assert any(
            "validating webhook for" in r.getMessage() and "full run" in r.getMessage()
            for r in caplog.records
        )
        differences = []
        for webhook in admission_hooks:
            requests = {
                "semantics": MODES if webhook.mark_unsafe else ADMISSIONS + MODES,
                "it_validate": ADMISSIONS[:2],  # full runs both ways: only the fallback
                "it_defaults": ADMISSIONS[:2],
            }.get(webhook.target.name, ADMISSIONS)
            for request in requests:
                expected = await full.admit(webhook, request)
                got = await warm.admit(webhook, request)
                if got != expected:
                    differences.append((webhook.target.name, request["object"], expected, got))
        for webhook in conversion_hooks:
            for obj, version in CONVERSIONS:
                outcomes = []
                for runner in (full, warm):
                    try:
                        outcomes.append(await runner.convert(webhook, obj, version))
                    except Exception as exc:
                        outcomes.append(f"{type(exc).__name__}: {exc}")
                if outcomes[0] != outcomes[1]:
                    differences.append((webhook.target.name, obj, *outcomes))
        assert differences == []

        # Both log a line per task result, as the backend's --ansible-log-events says.
        semantics_hook = admission_hooks[3]
        lines = []
        for runner in (full, warm):
            caplog.clear()
            await runner.admit(semantics_hook, ADMISSIONS[3])
            lines.append(
                [
                    r.getMessage().split("] ", 1)[1]
                    for r in caplog.records
                    if r.name == backend.runs.logger.name and " task " in r.getMessage()
                ]
            )
        assert lines[0] == lines[1]
        assert "task failed (ignored): a check that may fail, ignored" in " ".join(lines[1])
    finally:
        await warm.close()


async def _runner(
    tmp_path: Path, log: logging.Logger, role_text: str, **fields: Any
) -> tuple[WebhookRunner, WarmRunners, Webhook, NoFullRuns]:
    webhook = _webhook(
        "validating", _write_role(tmp_path / "roles", "isolation", role_text), **fields
    )
    warm_runners = _warm_for([webhook], tmp_path / "warm", _env(tmp_path), log)
    backend = NoFullRuns()
    runner = WebhookRunner(
        backend,  # type: ignore[arg-type]
        workers=2,
        options=RunOptions(envvars={}),
        metrics=WebhookMetrics(CollectorRegistry()),
        warm=warm_runners,
    )
    await _until(lambda: not warm_runners.warming(), "the warm runner to load")
    assert warm_runners.decision(warmtargets.warm_key(webhook)) == (True, "")
    return runner, warm_runners, webhook, backend


def _warnings(answer: dict[str, Any]) -> list[str]:
    return list(answer["response"].get("warnings", []))


async def test_nothing_of_one_request_reaches_the_next(tmp_path: Path, log: logging.Logger) -> None:
    runner, warm_runners, webhook, _ = await _runner(tmp_path, log, ISOLATION)
    try:
        key = warmtargets.warm_key(webhook)
        first = await runner.admit(
            webhook, _admission("CREATE", _widget({"size": 3, "mode": "set"}))
        )
        pids = warm_runners.pids(key)
        second = await runner.admit(webhook, _admission("CREATE", _widget({"size": 4})))
        assert _warnings(first) == ["leaked 3"]
        assert _warnings(second) == []
        assert warm_runners.pids(key) == pids and len(pids) == 1  # the same process
    finally:
        await runner.close()


async def test_an_edited_role_is_used_by_the_next_request(
    tmp_path: Path, log: logging.Logger
) -> None:
    runner, warm_runners, webhook, backend = await _runner(tmp_path, log, ISOLATION)
    tasks = webhook.target / "tasks" / "main.yml"
    request = _admission("CREATE", _widget({"size": 3}))
    try:
        assert _warnings(await runner.admit(webhook, request)) == []
        tasks.write_text(
            '- ansible.builtin.set_fact:\n    webhook_warnings: ["edited, size {{ size }}"]\n'
        )
        assert _warnings(await runner.admit(webhook, request)) == ["edited, size 3"]
        # Now a module: the next request is a full run (here: refused by the stand-in).
        tasks.write_text("- ansible.builtin.command: 'true'\n")
        answer = await runner.admit(webhook, request)
        assert len(backend.requests) == 1
        assert answer["response"]["allowed"] is False
        key = warmtargets.warm_key(webhook)
        assert warm_runners.decision(key) == (
            False,
            f"{tasks}:1: the action ansible.builtin.command runs only in a full run",
        )
        tasks.write_text(ISOLATION)
        assert _warnings(await runner.admit(webhook, request)) == []
        assert len(backend.requests) == 1 and warm_runners.decision(key) == (True, "")
    finally:
        await runner.close()


async def test_a_timed_out_or_dead_process_goes_to_the_failure_policy_and_is_replaced(
    tmp_path: Path, log: logging.Logger
) -> None:
    runner, warm_runners, webhook, _ = await _runner(tmp_path, log, ISOLATION, timeout=1.0)
    key = warmtargets.warm_key(webhook)
    hang = _admission("CREATE", _widget({"size": 3, "mode": "hang"}))
    fine = _admission("CREATE", _widget({"size": 3, "mode": "set"}))
    # The same webhook with time for a new process to start.
    slow = dataclasses.replace(webhook, timeout=30.0)
    try:
        [first] = warm_runners.pids(key)
        answer = (await runner.admit(webhook, hang))["response"]
        assert answer["allowed"] is False and answer["status"]["code"] == 500
        assert answer["status"]["message"] == (
            f"{webhook.describe()}: role isolation did not finish within 1s and was stopped"
            " (failurePolicy Fail)"
        )
        await _until(lambda: not _alive(first), "the timed-out process to be gone", 10)
        assert _warnings(await runner.admit(slow, fine)) == ["leaked 3"]
        [second] = warm_runners.pids(key)
        assert second != first

        # A process that dies in the middle of a request.
        request = asyncio.create_task(runner.admit(slow, hang))
        await asyncio.sleep(0.3)
        os.kill(second, signal.SIGKILL)
        answer = (await asyncio.wait_for(request, 20))["response"]
        assert answer["allowed"] is False and answer["status"]["code"] == 500
        assert answer["status"]["message"] == (
            f"{webhook.describe()}: role isolation could not run: the warm Ansible process"
            " was killed by signal 9 (failurePolicy Fail)"
        )
        assert _warnings(await runner.admit(slow, fine)) == ["leaked 3"]
        assert second not in warm_runners.pids(key)
    finally:
        await runner.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
