"""bench/soaking/workload.py: the end of a soak trims the population back to its target
(a burst late in the chaos window leaves more CRs, and the end's RSS is compared with
the baseline's, measured with the target's population), deleting only CRs that carry
the finalizer, each once."""

from __future__ import annotations

import threading
from typing import Any

from bench.soaking.project import FINALIZER
from bench.soaking.workload import Workload


class FakeCustomObjects:
    """The CRs by name: those named in `unreconciled` carry no finalizer yet."""

    def __init__(self, names: list[str], unreconciled: set[str]) -> None:
        self.lock = threading.Lock()
        self.objects = {
            name: {
                "metadata": {
                    "name": name,
                    "uid": f"uid-{name}",
                    "finalizers": [] if name in unreconciled else [FINALIZER],
                }
            }
            for name in names
        }
        self.deleted: list[str] = []

    def get_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        with self.lock:
            return self.objects[args[-1]]

    def delete_namespaced_custom_object(self, *args: Any, body: Any) -> None:
        with self.lock:
            self.deleted.append(args[-1])
            self.objects[args[-1]]["metadata"]["deletionTimestamp"] = "now"


class FakeWorkload(Workload):
    def __init__(self, api: FakeCustomObjects, target: int) -> None:
        super().__init__(lambda: None, target=target, rate=1, seed=3, on_event=self.said)  # type: ignore[arg-type,return-value]
        self.fake = api
        self.events: list[str] = []
        for name, obj in api.objects.items():
            self.population.uids[name] = obj["metadata"]["uid"]

    def said(self, source: str, text: str) -> None:
        self.events.append(f"{source}: {text}")

    @property
    def _api(self) -> Any:
        return self.fake


def test_the_population_is_trimmed_back_to_the_target() -> None:
    names = [f"s-{i:05d}" for i in range(1, 141)]
    unreconciled = set(names[100:130])  # most of a late burst is not reconciled yet
    api = FakeCustomObjects(names, unreconciled)
    workload = FakeWorkload(api, target=100)
    assert workload.trim() == 40
    assert len(api.deleted) == len(set(api.deleted)) == 40, "a CR deleted twice"
    assert not set(api.deleted) & unreconciled
    assert len(workload.population.alive()) == 100
    assert workload.events == ["workload: trimmed: 40 CRs deleted, 100 left"]


def test_nothing_to_trim() -> None:
    api = FakeCustomObjects([f"s-{i:05d}" for i in range(1, 51)], set())
    assert FakeWorkload(api, target=100).trim() == 0
    assert api.deleted == []
