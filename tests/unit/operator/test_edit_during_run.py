"""A run whose role was saved half-way while it started (live reload) leaves the CR's
status as the API had it, even when the reconciler's cached copy was a write behind: the
reconciler hands it to the watch's gate, and the reloader puts the status back."""

from __future__ import annotations

import asyncio
import copy
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from support.fake_api import FakeAPI, one_cr

from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import RunResult
from runner.engine.outcome import Done, Retry
from runner.operator.reconciler import Reconciler, RunSettings
from runner.operator.reload import restore_status
from runner.operator.reloadgate import ReloadGate
from runner.status.conditions import AnsibleResult, running, succeeded
from runner.structs import GVK, NamespacedName
from runner.watches.model import Watch

KIND = GVK("reload.example.com", "v1alpha1", "Reloaded")
SETTLED = succeeded(
    None,
    result=AnsibleResult(ok=2, changed=0, skipped=0, failures=0, completion=datetime.now(UTC)),
    now=datetime.now(UTC),
)


class HalfSavedRole:
    """A backend whose run reads a role saved while it starts: no stats event."""

    def __init__(self, edit: Any) -> None:
        self.edit = edit

    async def run(self, request: RunRequest, *, on_event: Any = None) -> RunResult:
        self.edit()
        return RunResult(has_stats=False)


def reconcile(*, edited: bool) -> tuple[Any, dict[str, Any]]:
    obj = one_cr(KIND, resource_version="7", status=SETTLED)
    api = FakeAPI(obj)
    stale = {**copy.deepcopy(obj), "status": running(SETTLED, now=datetime.now(UTC))}
    watch = Watch(gvk=KIND, role=Path("/roles/r"))
    gate = ReloadGate("reloaded")
    gate.attach(partial(restore_status, api, watch))  # type: ignore[arg-type]

    def edit() -> None:
        if edited:
            gate.note_edit()

    reconciler = Reconciler(
        watch=watch,
        client=api,  # type: ignore[arg-type]
        backend=HalfSavedRole(edit),  # type: ignore[arg-type]
        settings=RunSettings(),
        read=lambda _key: copy.deepcopy(stale),  # the cache, one status write behind
        gate=gate,
    )
    outcome = asyncio.run(reconciler.reconcile(NamespacedName("ns", "one")))
    return outcome, api.obj["status"]


def test_the_status_from_before_the_run_comes_back_and_no_error_is_counted() -> None:
    outcome, status = reconcile(edited=True)
    assert outcome == Done()
    assert status["conditions"] == SETTLED["conditions"]


def test_without_an_edit_the_run_is_an_error_and_the_status_says_running() -> None:
    outcome, status = reconcile(edited=False)
    assert isinstance(outcome, Retry)
    reasons = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert reasons["Running"] == ("True", "Running")
    assert reasons["Successful"][0] == "False"
