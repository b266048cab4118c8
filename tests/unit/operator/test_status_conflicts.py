"""A status that keeps changing under the operator's writes is never reported as written:
the reconcile fails and is retried, instead of succeeding with the conditions unwritten."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from support.fake_api import FakeAPI, RecordingBackend, one_cr

from runner.engine.outcome import Retry
from runner.k8s.apierrors import Conflict
from runner.operator.reconciler import Reconciler, RunSettings
from runner.structs import GVK, NamespacedName
from runner.watches.model import Finalizer, Watch

KIND = GVK("conflicts.example.com", "v1alpha1", "Busy")


class AlwaysConflicting(FakeAPI):
    """Someone else writes the status between every read and write of ours."""

    def __init__(self, obj: dict[str, Any]) -> None:
        super().__init__(obj)
        self.status_writes = 0

    async def replace_status(self, gvk: GVK, *, obj: Any) -> dict[str, Any]:
        self.status_writes += 1
        raise Conflict(409, "Conflict", "the object has been modified", {})


def test_the_reconcile_fails_when_the_status_cannot_be_written() -> None:
    obj = one_cr(KIND)
    api = AlwaysConflicting(obj)
    backend = RecordingBackend()
    reconciler = Reconciler(
        watch=Watch(gvk=KIND, role=Path("/roles/r")),
        client=api,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        settings=RunSettings(),
        read=lambda _key: api.obj,
    )
    outcome = asyncio.run(reconciler.reconcile(NamespacedName("ns", "one")))
    assert isinstance(outcome, Retry), "a status never written must not count as a success"
    assert "kept changing" in outcome.reason
    assert len(backend.requests) == 1, "the run itself went ahead"
    assert api.status_writes >= 2


class FinalizerConflicting(FakeAPI):
    """Someone else writes the CR between every read and finalizer patch of ours."""

    def __init__(self, obj: dict[str, Any]) -> None:
        super().__init__(obj)
        self.patches = 0

    async def patch(self, gvk: GVK, *, name: str, namespace: str | None, **_: Any) -> Any:
        self.patches += 1
        raise Conflict(409, "Conflict", "the object has been modified", {})


def test_a_finalizer_that_cannot_be_removed_is_retried_with_the_reason() -> None:
    finalizer = "conflicts.example.com/cleanup"
    obj = one_cr(KIND)
    obj["metadata"].update(finalizers=[finalizer], deletionTimestamp="2024-01-01T00:00:00Z")
    api = FinalizerConflicting(obj)
    backend = RecordingBackend()
    reconciler = Reconciler(
        watch=Watch(gvk=KIND, role=Path("/roles/r"), finalizer=Finalizer(name=finalizer)),
        client=api,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        settings=RunSettings(),
        read=lambda _key: api.obj,
    )
    outcome = asyncio.run(reconciler.reconcile(NamespacedName("ns", "one")))
    assert outcome == Retry(
        f"could not remove finalizer {finalizer} from Busy ns/one: it kept changing under "
        f"{api.patches} writes in a row"
    )
    assert len(backend.requests) == 1, "the finalizer's run is not repeated per conflict"
    assert api.patches > 1
