"""A run that takes longer than the watch's reconcile timeout is stopped through the
backend's cancel path and leaves a Failure condition naming the limit."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from support.fake_api import FakeAPI, one_cr

from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import RunResult
from runner.engine.outcome import Retry
from runner.operator.reconciler import Reconciler, RunSettings
from runner.structs import GVK, NamespacedName
from runner.watches.model import Watch

KIND = GVK("timeout.example.com", "v1alpha1", "Slow")


class Backend:
    """Runs for `seconds`; records whether the run was cancelled."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.cancelled = False

    async def run(self, request: RunRequest, *, on_event: Any = None) -> RunResult:
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return RunResult(has_stats=True, ok=1)


def reconcile(*, timeout: float, run_seconds: float) -> tuple[Any, dict[str, Any], Backend]:
    obj = one_cr(KIND)
    api = FakeAPI(obj)
    backend = Backend(run_seconds)
    reconciler = Reconciler(
        watch=Watch(gvk=KIND, role=Path("/roles/r"), reconcile_timeout=timeout),
        client=api,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        settings=RunSettings(),
        read=lambda _key: api.obj,
    )
    outcome = asyncio.run(reconciler.reconcile(NamespacedName("ns", "one")))
    return outcome, api.obj.get("status") or {}, backend


def test_a_run_over_the_limit_is_cancelled_and_fails_naming_the_limit() -> None:
    outcome, status, backend = reconcile(timeout=0.2, run_seconds=60)
    assert backend.cancelled
    assert isinstance(outcome, Retry) and "timed out after 200ms" in outcome.reason
    found = {c["type"]: c for c in status["conditions"]}
    assert found["Failure"]["status"] == "True"
    assert "timed out after 200ms" in found["Failure"]["message"]
    assert "RECONCILE_TIMEOUT_SLOW_TIMEOUT_EXAMPLE_COM" in found["Failure"]["message"]
    assert found["Running"]["status"] == "False"


def test_a_run_within_the_limit_is_not_touched() -> None:
    outcome, status, backend = reconcile(timeout=5, run_seconds=0.01)
    assert not backend.cancelled
    assert not isinstance(outcome, Retry)
    found = {c["type"]: c["status"] for c in status["conditions"]}
    assert found["Successful"] == "True"


def test_no_limit_by_default() -> None:
    assert Watch(gvk=KIND, role=Path("/r")).reconcile_timeout == 0
