"""What the API server sends a webhook and what it expects back: AdmissionReview
(admission.k8s.io/v1) and ConversionReview (apiextensions.k8s.io/v1).

TypedDicts of the fields this package reads or writes: the bodies stay the decoded JSON
(plain dicts), so a request from the wire may still lack any field or hold a value of
another type, and readers check what they use.
"""

from typing import Any, TypedDict

from runner.structs.bodies import KubeObject

__all__ = [
    "AdmissionRequest",
    "AdmissionResponse",
    "AdmissionReview",
    "ConversionRequest",
    "ConversionResponse",
    "ConversionReview",
    "PatchOperation",
    "ResultStatus",
    "UserInfo",
]


class UserInfo(TypedDict, total=False):
    """Who sent the request the API server asks about."""

    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


class AdmissionRequest(TypedDict, total=False):
    """`AdmissionReview.request`."""

    uid: str
    name: str
    namespace: str
    operation: str
    userInfo: UserInfo
    object: KubeObject | None
    oldObject: KubeObject | None
    dryRun: bool


class ResultStatus(TypedDict, total=False):
    """The `Status` of an answer: an admission's denial, a conversion's result."""

    status: str
    message: str
    reason: str
    code: int


# One RFC 6902 operation (`from` is a keyword, hence the functional form).
PatchOperation = TypedDict(
    "PatchOperation", {"op": str, "path": str, "value": Any, "from": str}, total=False
)


class AdmissionResponse(TypedDict, total=False):
    """`AdmissionReview.response`; `patch` is the base64 of a JSON Patch."""

    uid: str
    allowed: bool
    status: ResultStatus
    warnings: list[str]
    patchType: str
    patch: str


class AdmissionReview(TypedDict, total=False):
    apiVersion: str
    kind: str
    request: AdmissionRequest
    response: AdmissionResponse


class ConversionRequest(TypedDict, total=False):
    """`ConversionReview.request`."""

    uid: str
    desiredAPIVersion: str
    objects: list[KubeObject]


class ConversionResponse(TypedDict, total=False):
    """`ConversionReview.response`."""

    uid: str
    convertedObjects: list[KubeObject]
    result: ResultStatus


class ConversionReview(TypedDict, total=False):
    apiVersion: str
    kind: str
    request: ConversionRequest
    response: ConversionResponse
