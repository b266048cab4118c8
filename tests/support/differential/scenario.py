"""Drives one fixture's scenario against one running operator and records it.

Each step applies its changes, then waits: for the runs it names to have finished, for
the objects it names to be gone, for `sleep` seconds, then until the fixture's
objects have had no run starting or ending for `quiet` seconds (objects of `periodic`
excepted), and at most `SETTLE` seconds more for the CRs' status to show their runs'
end. A wait that times out is recorded (as `waits`), not raised: the comparison
shows what each operator did instead. After each step the fixture's CRs, objects, Events
and run counts are recorded; at the end, every run and what its recorder task dumped.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes.dynamic.exceptions import NotFoundError

from . import recorder
from .fixtures import Fixture, Wait

POLL = 0.5
SETTLE = 20.0
"""How long a step's end waits for the CRs' status to show their runs' end."""


@dataclass
class Phase:
    """One operator's phase: where its runs are, and the namespaces it watches."""

    data_base: Callable[[], Path | None]
    namespaces: dict[str, str]
    """fixture name -> its namespace for this operator."""
    recorder_namespace: str
    busy: Callable[[set[str]], bool] = lambda _controllers: False
    """Whether the operator is reconciling, or has queued, keys of these controllers."""
    stopping: threading.Event = field(default_factory=threading.Event)
    """Set when the phase is given up (a failure, a timeout): waits end at once."""


@dataclass
class FixtureRun:
    fixture: Fixture
    namespace: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    waits: list[str] = field(default_factory=list)


def _resource(dyn: Any, fixture: Fixture, kind: str) -> Any:
    return dyn.resources.get(api_version=fixture.api_version(kind), kind=kind)


def _get(dyn: Any, fixture: Fixture, ref: str, namespace: str) -> dict[str, Any] | None:
    kind, name = ref.split("/", 1)
    scoped = namespace if fixture.namespaced(kind) else None
    try:
        found = _resource(dyn, fixture, kind).get(name=name, namespace=scoped)
    except NotFoundError:
        return None
    return dict(found.to_dict())


def _true(obj: dict[str, Any] | None, kind: str) -> bool:
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _running(obj: dict[str, Any] | None) -> bool:
    """The operator has written Running (reason Running) and not yet the run's end."""
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "Running" and c.get("status") == "True" and c.get("reason") == "Running"
        for c in conditions
    )


def create(dyn: Any, fixture: Fixture, obj: dict[str, Any], namespace: str) -> None:
    body = fixture.manifest(obj, namespace)
    scoped = namespace if fixture.namespaced(body["kind"]) else None
    _resource(dyn, fixture, body["kind"]).create(body=body, namespace=scoped)


def _patch(dyn: Any, fixture: Fixture, ref: str, body: Any, namespace: str) -> None:
    kind, name = ref.split("/", 1)
    scoped = namespace if fixture.namespaced(kind) else None
    _resource(dyn, fixture, kind).patch(
        name=name,
        namespace=scoped,
        body=fixture.manifest({"kind": kind, **body}, namespace),
        content_type="application/merge-patch+json",
    )


def _delete(dyn: Any, fixture: Fixture, ref: str, namespace: str) -> None:
    kind, name = ref.split("/", 1)
    scoped = namespace if fixture.namespaced(kind) else None
    with contextlib.suppress(NotFoundError):
        _resource(dyn, fixture, kind).delete(name=name, namespace=scoped)


class Driver:
    """Runs one fixture's scenario on one operator (a thread per fixture)."""

    def __init__(self, dyn: Any, phase: Phase, fixture: Fixture) -> None:
        self.dyn = dyn
        self.phase = phase
        self.fixture = fixture
        self.namespace = phase.namespaces[fixture.name]
        self.result = FixtureRun(fixture, self.namespace)
        periodic = {ref.split("/", 1)[0] for ref in fixture.periodic}
        self.controllers = {
            f"{w['kind']}-{w['version']}-controller".lower()
            for w in fixture.watches()
            if w["kind"] not in periodic
        }
        """Its watches' controllers, by controller-runtime's names (those of objects that
        keep running on a timer left out: they are never idle for long)."""
        self.seconds = 0.0
        """How long the scenario took (a figure to print, not compared)."""

    # -- runs ---------------------------------------------------------------------------

    def _runs(self, ref: str) -> list[Any]:
        return recorder.runs(self.phase.data_base(), self.fixture, ref, self.namespace)

    def _signature(self) -> tuple[tuple[str, int, int], ...]:
        refs = [ref for ref in self.fixture.watched() if ref not in self.fixture.periodic]
        signature = []
        for ref in refs:
            found = self._runs(ref)
            signature.append((ref, len(found), sum(1 for r in found if recorder.finished(r))))
        return tuple(signature)

    def _finished(self, ref: str) -> int:
        return sum(1 for run in self._runs(ref) if recorder.finished(run))

    def _wait(self, index: int, wait: Wait) -> None:
        deadline = time.monotonic() + wait.timeout

        def waiting() -> list[str]:
            pending = [
                f"{ref}: {self._finished(ref)} of {count} runs"
                for ref, count in wait.runs.items()
                if self._finished(ref) < count
            ]
            pending += [
                f"{ref} still there"
                for ref in wait.gone
                if _get(self.dyn, self.fixture, ref, self.namespace) is not None
            ]
            pending += [
                f"{ref} not {kind}"
                for ref, kind in wait.conditions.items()
                if not _true(_get(self.dyn, self.fixture, ref, self.namespace), kind)
            ]
            return pending

        while pending := waiting():
            if self.phase.stopping.is_set():
                raise RuntimeError("the phase was stopped")
            if time.monotonic() > deadline:
                self.result.waits.append(f"step {index}: timed out: {', '.join(pending)}")
                return
            time.sleep(POLL)
        if wait.sleep:
            self.phase.stopping.wait(wait.sleep)
        signature, since = self._signature(), time.monotonic()
        while True:
            if self.phase.stopping.is_set():
                raise RuntimeError("the phase was stopped")
            if time.monotonic() > deadline:
                self.result.waits.append(f"step {index}: runs never settled")
                return
            running = any(total != done for _, total, done in signature)
            if running or self.phase.busy(self.controllers):
                since = time.monotonic()
            elif time.monotonic() - since >= wait.quiet:
                self._settle(min(deadline, time.monotonic() + SETTLE))
                return
            time.sleep(POLL)
            current = self._signature()
            if current != signature:
                signature, since = current, time.monotonic()

    def _settle(self, until: float) -> None:
        """Wait (until `until`, not recorded) for no CR to be left in `Running=True reason
        Running`: an operator slow to write a run's end (the Go one, on a loaded
        machine) would otherwise be caught half-way. Objects on a timer count too (a
        retry's backoff fired after the recovering run: caught in between); a CR that
        stays so (the Go operator's, after a `requeue_after` or a run without stats)
        only costs the wait."""
        refs = list(self.fixture.crs())
        while time.monotonic() < until and not self.phase.stopping.is_set():
            found = [_get(self.dyn, self.fixture, ref, self.namespace) for ref in refs]
            if not any(_running(obj) for obj in found):
                return
            time.sleep(POLL)

    # -- the scenario -------------------------------------------------------------------

    def setup(self) -> None:
        for obj in self.fixture.setup:
            create(self.dyn, self.fixture, dict(obj), self.namespace)

    def run(self) -> dict[str, Any]:
        """Play the scenario, record it, then remove the fixture's CRs (so that its
        periodic runs and retries stop loading the machine); the record."""
        started = time.monotonic()
        try:
            for index, step in enumerate(self.fixture.steps):
                for obj in step.create:
                    create(self.dyn, self.fixture, dict(obj), self.namespace)
                for ref, body in step.patch.items():
                    _patch(self.dyn, self.fixture, ref, body, self.namespace)
                for ref in step.delete:
                    _delete(self.dyn, self.fixture, ref, self.namespace)
                self._wait(index, step.wait)
                self.result.steps.append(self.snapshot(index))
        except Exception as exc:  # recorded: one broken fixture must not hide the others
            self.result.waits.append(f"scenario stopped: {type(exc).__name__}: {exc}")
        record = self.finish(recorder.dumps(self.dyn, self.phase.recorder_namespace))
        self.release()
        self.seconds = time.monotonic() - started
        return record

    def snapshot(self, step: int) -> dict[str, Any]:
        counts = {}
        for ref in self.fixture.watched():
            count = len(self._runs(ref))
            limit = self.fixture.periodic.get(ref)
            counts[ref] = f">={limit}" if limit is not None and count >= limit else count
        objects = recorder.objects(self.dyn, self.fixture, self.namespace)
        for ref, obj in objects.items():
            if not self.fixture.settled(ref, step) and "status" in obj:
                obj["status"] = "<unsettled>"
        return {
            "objects": objects,
            "events": recorder.events(self.dyn, self.namespace),
            "runs": counts,
        }

    def finish(self, dumps: dict[tuple[str, str, str], list[Any]]) -> dict[str, Any]:
        """The fixture's whole record (before normalising)."""
        runs: dict[str, Any] = {}
        recorded: dict[str, Any] = {}
        for ref in self.fixture.watched():
            kind, name = ref.split("/", 1)
            limit = self.fixture.periodic.get(ref)
            found = [
                recorder.run_record(run, secrets=self.fixture.secrets) for run in self._runs(ref)
            ]
            runs[ref] = _first(found, limit)
            namespace = self.namespace if self.fixture.namespaced(kind) else ""
            recorded[ref] = _first(dumps.get((kind, namespace, name), []), limit)
        return {
            "steps": self.result.steps,
            "runs": runs,
            "dumps": recorded,
            "waits": self.result.waits,
        }

    def release(self) -> None:
        """Delete what is left of the fixture's CRs, their finalizers dropped first (no
        finalizer run): its cluster-scoped ones are made again in the next phase."""
        for kind in self.fixture.kinds:
            scoped = self.namespace if self.fixture.namespaced(kind) else None
            resource = _resource(self.dyn, self.fixture, kind)
            with contextlib.suppress(NotFoundError):
                items = resource.get(namespace=scoped).to_dict().get("items") or []
            for item in items:
                name = item["metadata"]["name"]
                with contextlib.suppress(NotFoundError):
                    if item["metadata"].get("finalizers"):
                        resource.patch(
                            name=name,
                            namespace=scoped,
                            body={"metadata": {"finalizers": None}},
                            content_type="application/merge-patch+json",
                        )
                    resource.delete(name=name, namespace=scoped)


def _first(items: list[Any], limit: int | None) -> list[Any]:
    """All of `items`, or (an object whose later runs depend on timing) the first
    `limit`."""
    return items if limit is None else items[:limit]
