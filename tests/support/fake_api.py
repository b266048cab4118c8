"""In-memory stand-ins for unit tests of the reconciler: one CR as the API server keeps
it, and a backend that records what it was asked to run."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import RunResult
from runner.structs import GVK


def one_cr(kind: GVK, *, resource_version: str = "1", **fields: Any) -> dict[str, Any]:
    """CR `ns/one` of `kind` with an empty spec, as the API server returns it; `fields`
    adds top-level fields (status, ...)."""
    return {
        "apiVersion": f"{kind.group}/{kind.version}",
        "kind": kind.kind,
        "metadata": {
            "name": "one",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": resource_version,
        },
        "spec": {},
        **fields,
    }


class FakeAPI:
    """The one CR, as the API server would keep it: merge patches, status writes."""

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.obj = copy.deepcopy(dict(obj))

    async def get(self, gvk: GVK, *, name: str, namespace: str | None) -> dict[str, Any]:
        return copy.deepcopy(self.obj)

    async def patch(
        self, gvk: GVK, *, name: str, namespace: str | None, body: Any, **_: Any
    ) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        if "finalizers" in meta:
            self.obj["metadata"]["finalizers"] = list(meta["finalizers"])
        return copy.deepcopy(self.obj)

    async def replace_status(self, gvk: GVK, *, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.obj["status"] = copy.deepcopy(obj.get("status"))
        return copy.deepcopy(self.obj)


class RecordingBackend:
    def __init__(self) -> None:
        self.requests: list[RunRequest] = []
        self.forgotten: list[str] = []

    async def forget(self, gvk: GVK, namespace: str, name: str) -> None:
        self.forgotten.append(f"{namespace}/{name}")

    async def run(self, request: RunRequest, *, on_event: Any = None) -> RunResult:
        self.requests.append(request)
        return RunResult(ok=1, has_stats=True, completion=datetime.now(UTC))
