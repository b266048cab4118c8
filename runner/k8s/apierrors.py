"""The errors the API edge raises, so callers never see HTTP libraries' exceptions.

    AnsibleOperatorError
    └── APIError             any failed API request: status, reason, message, body
        ├── Forbidden        403: RBAC says no
        ├── NotFound         404: the object (or the kind) does not exist
        ├── Conflict         409: stale resourceVersion, or the object already exists
        ├── Gone             410: a resourceVersion or continue token is too old; relist
        ├── Invalid          422: the server rejected the body
        └── Unavailable      no answer (connection error, status 0), 429 or 5xx: retry later

`reason` and `message` come from the `Status` object the server answers with, `body` is
that object as a dict (empty when there was none). Errors made from a library exception
are raised `from` it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from runner.errors import AnsibleOperatorError
from runner.structs.bodies import Status


class APIError(AnsibleOperatorError):
    """An API request failed; `status` is the HTTP status, 0 when there was no answer."""

    def __init__(self, status: int, reason: str, message: str, body: Mapping[str, Any]) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else f"{reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = cast(Status, dict(body))


class Forbidden(APIError):
    """403."""


class NotFound(APIError):
    """404."""


class Conflict(APIError):
    """409."""


class Gone(APIError):
    """410: the resourceVersion asked for is no longer available."""


class Invalid(APIError):
    """422."""


class Unavailable(APIError):
    """The server could not be reached or cannot serve now; retrying may help."""


_BY_STATUS: dict[int, type[APIError]] = {
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: Unavailable,
}


def error_class(status: int) -> type[APIError]:
    """The class of error for an HTTP status (or 0 for "no answer")."""
    if status == 0 or status >= 500:
        return Unavailable
    return _BY_STATUS.get(status, APIError)


def from_status(status: int, body: Mapping[str, Any]) -> APIError:
    """An error from a `Status` object, as the server sends in error responses and in
    watch ERROR events (where `status` is the object's `code`)."""
    reason = str(body.get("reason") or _default_reason(status))
    message = str(body.get("message") or reason)
    return error_class(status)(status, reason, message, body)


def from_response(status: int, data: bytes) -> APIError:
    """An error from an HTTP response: its body is usually a `Status`, but proxies and
    load balancers in front of the server may answer with anything."""
    body: Any
    try:
        body = json.loads(data) if data else {}
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if not body and data:
        text = data.decode("utf-8", "replace").strip()[:500]
        return error_class(status)(status, _default_reason(status), text, {})
    return from_status(status, body)


def _default_reason(status: int) -> str:
    return {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        405: "MethodNotAllowed",
        409: "Conflict",
        410: "Expired",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
        504: "Timeout",
    }.get(status, "Unknown" if status else "ConnectionError")
