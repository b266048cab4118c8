"""A CR's finalizer role runs once: a reconcile that finds our finalizer in a cached copy
from before our own removal of it (an event queued the key again during the finalizer's
run) does not run the role a second time, and neither does the retry of a reconcile
whose role completed but whose removal of the finalizer failed. Found by the chaos soak
(docs/soak.md): the finalizer of a CR ran twice, 60 ms apart, on one replica with no
fault around; and an API server restart between the role's end and the removal made
the retry run the role again."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

from support.fake_api import FakeAPI, RecordingBackend, one_cr

from runner.engine.outcome import Done, Retry
from runner.k8s.apierrors import NotFound, Unavailable
from runner.operator.reconciler import Reconciler, RunSettings
from runner.structs import GVK, NamespacedName
from runner.watches.model import Finalizer, Watch

KIND = GVK("once.example.com", "v1alpha1", "Final")
FINALIZER = "once.example.com/cleanup"


class DeletingAPI(FakeAPI):
    """The API server's side of a deletion: once the last finalizer is removed from a CR
    being deleted, it is gone."""

    def __init__(self, obj: dict[str, Any]) -> None:
        super().__init__(obj)
        self.gone = False

    async def get(self, gvk: GVK, *, name: str, namespace: str | None) -> dict[str, Any]:
        if self.gone:
            raise NotFound(404, "NotFound", f"{name} not found", {})
        return await super().get(gvk, name=name, namespace=namespace)

    async def patch(self, gvk: GVK, **kwargs: Any) -> dict[str, Any]:
        if self.gone:
            raise NotFound(404, "NotFound", "not found", {})
        written = await super().patch(gvk, **kwargs)
        if not self.obj["metadata"].get("finalizers"):
            self.gone = True
        return written


def deleting_cr(**metadata: Any) -> dict[str, Any]:
    obj = one_cr(KIND)
    obj["metadata"].update(
        {"finalizers": [FINALIZER], "deletionTimestamp": "2024-01-01T00:00:00Z", **metadata}
    )
    return obj


def reconciler_over(api: FakeAPI, backend: RecordingBackend, cached: dict[str, Any]) -> Reconciler:
    return Reconciler(
        watch=Watch(gvk=KIND, role=Path("/roles/r"), finalizer=Finalizer(name=FINALIZER)),
        client=api,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        settings=RunSettings(),
        read=lambda _key: cached,  # the informer's copy: not updated in this test
    )


def test_a_stale_cached_copy_does_not_run_the_finalizer_again() -> None:
    stale = deleting_cr()
    api, backend = DeletingAPI(copy.deepcopy(stale)), RecordingBackend()
    reconciler = reconciler_over(api, backend, stale)
    key = NamespacedName("ns", "one")

    assert asyncio.run(reconciler.reconcile(key)) == Done()
    assert api.gone and len(backend.requests) == 1
    # Queued again during that run; the cache has not seen the removal yet.
    assert asyncio.run(reconciler.reconcile(key)) == Done()
    assert len(backend.requests) == 1, "the finalizer's role ran a second time"
    assert backend.forgotten == ["ns/one"]


def test_a_finalizer_already_removed_by_another_is_not_run() -> None:
    stale = deleting_cr()
    live = deleting_cr(finalizers=["someone.else/keeps-it"])
    api, backend = DeletingAPI(live), RecordingBackend()
    assert (
        asyncio.run(reconciler_over(api, backend, stale).reconcile(NamespacedName("ns", "one")))
        == Done()
    )
    assert backend.requests == []


def test_the_finalizer_runs_on_the_live_copy() -> None:
    stale = deleting_cr()
    live = deleting_cr(annotations={"seen": "live"})
    api, backend = DeletingAPI(live), RecordingBackend()
    asyncio.run(reconciler_over(api, backend, stale).reconcile(NamespacedName("ns", "one")))
    (request,) = backend.requests
    cr = request.extravars["_once_example_com_final"]
    assert cr["metadata"]["annotations"] == {"seen": "live"}


class UnavailableOnce(DeletingAPI):
    """The API server goes away for the first finalizer patch."""

    def __init__(self, obj: dict[str, Any]) -> None:
        super().__init__(obj)
        self.failures = 1

    async def patch(self, gvk: GVK, **kwargs: Any) -> dict[str, Any]:
        if self.failures:
            self.failures -= 1
            raise Unavailable(0, "", "Cannot connect to host: connection refused", {})
        return await super().patch(gvk, **kwargs)


def test_a_failed_finalizer_removal_is_retried_without_the_role() -> None:
    api, backend = UnavailableOnce(deleting_cr()), RecordingBackend()
    reconciler = Reconciler(
        watch=Watch(gvk=KIND, role=Path("/roles/r"), finalizer=Finalizer(name=FINALIZER)),
        client=api,  # type: ignore[arg-type]
        backend=backend,  # type: ignore[arg-type]
        settings=RunSettings(),
        read=lambda _key: api.obj,
    )
    key = NamespacedName("ns", "one")
    assert isinstance(asyncio.run(reconciler.reconcile(key)), Retry)
    assert len(backend.requests) == 1 and not api.gone
    assert asyncio.run(reconciler.reconcile(key)) == Done()
    assert api.gone
    assert len(backend.requests) == 1, "the finalizer's role ran again for a lost removal"
