"""The answers the dry-run layer gives: the API server's, relayed, or its own.

`Answer` is one HTTP answer read whole (status, body, content type); `answer` makes one of
an object and `status_answer` a Kubernetes `Status` failure, the shape clients turn into
their NotFound, Conflict, Invalid errors. A JSON answer leaves out `managedFields`, as
every answer of the proxy does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from runner.plan.overlay import ObjectKey
from runner.proxy.forward import without_managed_fields

__all__ = ["Answer", "answer", "status_answer"]


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str

    def json(self) -> Any:
        """The body as JSON; None when it is not."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def response(self) -> web.Response:
        body = self.body
        if self.content_type == "application/json":
            body = without_managed_fields(body)
        return web.Response(status=self.status, body=body, content_type=self.content_type)


def answer(status: int, obj: Any) -> Answer:
    """`obj` as a JSON answer."""
    return Answer(status, json.dumps(obj).encode(), "application/json")


def status_answer(code: int, reason: str, message: str, key: ObjectKey | None) -> Answer:
    """A `Status` failure answer (`key`: the object it is about, for its details)."""
    details = {"name": key.name, "group": key.group, "kind": key.resource} if key else {}
    return answer(
        code,
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "details": details,
            "code": code,
        },
    )
