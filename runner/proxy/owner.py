"""Who a role's request is made for, and how the objects it creates are tied to that CR.

A role never mentions its owner: the kubeconfig generated for its run names a user whose
username is the owning CR, as URL-safe base64 of the JSON
`{"apiVersion", "kind", "name", "uid", "Namespace"}` (the Go operator's
`NamespacedOwnerReference`, capital `N` included). The proxy reads it back from the Basic
auth header and, on a create, makes the new object belong to the CR:

* an ownerReference `{apiVersion, kind, name, uid}` when the object lives in the CR's
  namespace or the CR is cluster-scoped (garbage collection then removes it with the CR);
* otherwise — a cross-namespace or cluster-scoped object of a namespaced CR, which an
  ownerReference cannot express — the annotations `operator-sdk/primary-resource:
  <ns>/<name>` and `operator-sdk/primary-resource-type: <Kind>.<group>`.

`owners_of` is the way back, for dependent watches: which CRs of one kind an object
belongs to, by either mechanism. Everything here is pure; the proxy server and the
dependent-watch engine do the IO.
"""

from __future__ import annotations

import base64
import binascii
import copy
import enum
import json
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from runner.structs import NamespacedName, bodies
from runner.structs.bodies import OwnerReference

__all__ = [
    "KUBECTL_ENV",
    "PRIMARY_RESOURCE_ANNOTATION",
    "PRIMARY_RESOURCE_TYPE_ANNOTATION",
    "PROXY_CLUSTER",
    "PROXY_USER",
    "Injection",
    "Owner",
    "basic_credentials",
    "decode_owner",
    "encode_owner",
    "group_kind",
    "inject_owner",
    "owner_from_basic_auth",
    "owner_reference",
    "owners_of",
    "proxy_kubeconfig",
]

PRIMARY_RESOURCE_ANNOTATION: Final = "operator-sdk/primary-resource"
PRIMARY_RESOURCE_TYPE_ANNOTATION: Final = "operator-sdk/primary-resource-type"

PROXY_CLUSTER: Final = "proxy-server"
PROXY_USER: Final = "admin/proxy-server"
KUBECTL_ENV: Final = {
    "KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false",
    "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false",
}
"""Given to runs unless the operator's own environment sets them. kubectl (1.30 and
later) execs, attaches and port-forwards over WebSocket first, and its WebSocket client
refuses a URL with user info, which is how the run's kubeconfig authenticates Go clients
(`proxy_kubeconfig`); over SPDY/3.1 the same commands work through the proxy."""

# The JSON keys of the username, in the order Go's encoding/json writes them.
_OWNER_KEYS: Final = ("apiVersion", "kind", "name", "uid", "Namespace")
_REQUIRED_KEYS: Final = ("apiVersion", "kind", "name", "uid")
# Go's encoding/json also escapes these, so the same owner gives the same username.
_GO_JSON_ESCAPES: Final = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


@dataclass(frozen=True, kw_only=True)
class Owner:
    """The CR a run works for; `namespace` is empty for a cluster-scoped CR."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str

    @property
    def group(self) -> str:
        """The API group of `api_version` (`""` for the core group)."""
        group, _, _ = self.api_version.rpartition("/")
        return group

    @property
    def cluster_scoped(self) -> bool:
        return self.namespace == ""

    @property
    def key(self) -> NamespacedName:
        return NamespacedName(namespace=self.namespace, name=self.name)


class Injection(enum.Enum):
    """How `inject_owner` tied an object to its owner."""

    REFERENCE = "reference"
    ANNOTATIONS = "annotations"


def group_kind(*, group: str, kind: str) -> str:
    """`<Kind>.<group>` as Kubernetes prints a GroupKind (`<Kind>` alone for the core group)."""
    return f"{kind}.{group}" if group else kind


# --- the username ---------------------------------------------------------------------


def encode_owner(owner: Owner) -> str:
    """The kubeconfig username for `owner`: URL-safe base64 (padded) of compact JSON.

    Byte for byte what the Go operator's `json.Marshal` + `base64.URLEncoding` produce.
    """
    document = {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
        "Namespace": owner.namespace,
    }
    text = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in _GO_JSON_ESCAPES.items():
        text = text.replace(char, escaped)
    return base64.urlsafe_b64encode(text.encode()).decode("ascii")


def _b64decode_any(text: str) -> bytes | None:
    """Standard or URL-safe base64, padded or not; None when it is neither."""
    text = text.strip()
    if not text or "=" in text.rstrip("="):
        return None
    body = text.rstrip("=").replace("-", "+").replace("_", "/")
    if len(body) % 4 == 1:
        return None
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _field(document: Mapping[str, Any], key: str) -> Any:
    # Go's encoding/json matches keys case-insensitively, preferring an exact match.
    if key in document:
        return document[key]
    folded = key.casefold()
    for candidate, value in document.items():
        if isinstance(candidate, str) and candidate.casefold() == folded:
            return value
    return None


def decode_owner(username: str) -> Owner | None:
    """The owner encoded in a kubeconfig username, or None when it does not hold one.

    Accepts URL-safe and standard base64, with or without padding. All of `apiVersion`,
    `kind`, `name` and `uid` must be non-empty strings; `Namespace` may be absent (a
    cluster-scoped owner) but must be a string when present.
    """
    raw = _b64decode_any(username)
    if raw is None:
        return None
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    values: dict[str, str] = {}
    for key in _OWNER_KEYS:
        value = _field(document, key)
        if value is None and key == "Namespace":
            value = ""
        if not isinstance(value, str) or (key in _REQUIRED_KEYS and not value):
            return None
        values[key] = value
    return Owner(
        api_version=values["apiVersion"],
        kind=values["kind"],
        name=values["name"],
        uid=values["uid"],
        namespace=values["Namespace"],
    )


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(username, password) of an `Authorization: Basic ...` header, or None."""
    if not header:
        return None
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    raw = _b64decode_any(credentials)
    if raw is None:
        return None
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return None
    username, colon, password = text.partition(":")
    if not colon:
        return None
    return username, password


def owner_from_basic_auth(header: str | None) -> Owner | None:
    """The owner named by an `Authorization: Basic ...` header's username, if any."""
    credentials = basic_credentials(header)
    return decode_owner(credentials[0]) if credentials is not None else None


# --- injection ------------------------------------------------------------------------


def owner_reference(owner: Owner) -> OwnerReference:
    """The ownerReference the Go operator adds: no `controller`, no `blockOwnerDeletion`."""
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.uid,
    }


def inject_owner(
    obj: Mapping[str, Any], owner: Owner, *, namespace: str
) -> tuple[dict[str, Any], Injection]:
    """A copy of `obj` (a create's body) tied to `owner`, and how it was tied.

    `namespace` is where the object is created (`""` for a cluster-scoped object). An
    ownerReference is used when that is the owner's namespace or the owner is
    cluster-scoped; one already naming the owner's uid is kept as the role wrote it (a
    `controller: true` the role set survives, and no duplicate is added). Otherwise the
    primary-resource annotations are set, replacing any earlier values. `obj` itself is
    never modified.
    """
    result: dict[str, Any] = copy.deepcopy(dict(obj))
    metadata = result.get("metadata")
    metadata = result["metadata"] = dict(metadata) if isinstance(metadata, Mapping) else {}

    if owner.cluster_scoped or namespace == owner.namespace:
        existing = metadata.get("ownerReferences")
        references = list(existing) if isinstance(existing, list) else []
        if not any(isinstance(ref, Mapping) and ref.get("uid") == owner.uid for ref in references):
            references.append(owner_reference(owner))
        metadata["ownerReferences"] = references
        return result, Injection.REFERENCE

    existing_annotations = metadata.get("annotations")
    annotations = dict(existing_annotations) if isinstance(existing_annotations, Mapping) else {}
    annotations[PRIMARY_RESOURCE_ANNOTATION] = f"{owner.namespace}/{owner.name}"
    annotations[PRIMARY_RESOURCE_TYPE_ANNOTATION] = group_kind(group=owner.group, kind=owner.kind)
    metadata["annotations"] = annotations
    return result, Injection.ANNOTATIONS


# --- the way back: owners of a dependent ----------------------------------------------


def _api_group(api_version: object) -> str | None:
    """The group of an apiVersion, or None when it cannot be one (`a/b/c`, not a string)."""
    if not isinstance(api_version, str) or api_version.count("/") > 1:
        return None
    group, _, _ = api_version.rpartition("/")
    return group


def owners_of(obj: Mapping[str, Any], *, group: str, kind: str) -> list[NamespacedName]:
    """The keys of the `group`/`kind` CRs that `obj` belongs to, deduplicated, in order.

    First every ownerReference of that group and kind (its key takes the object's
    namespace — for a cluster-scoped primary the caller drops it), then the
    primary-resource annotation when the type annotation names that group and kind:
    `<ns>/<name>`, or a bare `<name>` for a cluster-scoped owner. Entries without a name
    are skipped.
    """
    object_namespace = bodies.namespace(obj)
    found: dict[NamespacedName, None] = {}

    for ref in bodies.owner_references(obj):
        name = ref.get("name")
        if (
            ref.get("kind") == kind
            and _api_group(ref.get("apiVersion")) == group
            and isinstance(name, str)
            and name
        ):
            found[NamespacedName(namespace=object_namespace, name=name)] = None

    annotations = bodies.annotations(obj)
    if annotations:
        type_text = annotations.get(PRIMARY_RESOURCE_TYPE_ANNOTATION)
        accepted = {group_kind(group=group, kind=kind)}
        if not group:
            accepted.add(f"{kind}.")  # what a Go-written annotation says for the core group
        primary = annotations.get(PRIMARY_RESOURCE_ANNOTATION)
        if type_text in accepted and isinstance(primary, str) and primary:
            owner_namespace, slash, name = primary.partition("/")
            if not slash:
                owner_namespace, name = "", primary
            if name:
                found[NamespacedName(namespace=owner_namespace, name=name)] = None

    return list(found)


# --- the run's kubeconfig -------------------------------------------------------------


def proxy_server(
    *, port: int, host: str = "localhost", user: str | None = None, password: str | None = None
) -> str:
    """The proxy's URL as a run's kubeconfig names it (with the owner as `user` and the
    proxy's secret as `password`)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address in a URL
    if not user:
        return f"http://{host}:{port}"
    userinfo = f"{user}:{urllib.parse.quote(password, safe='')}" if password else user
    return f"http://{userinfo}@{host}:{port}"


def proxy_kubeconfig(
    owner: Owner, *, port: int, password: str, host: str = "localhost"
) -> dict[str, Any]:
    """The kubeconfig a run for `owner` uses: the proxy, with the owner as its user.

    The same document the Go operator writes, except that the server follows the port the
    proxy really listens on and the user's password is `password`, the proxy's secret
    (`access.py`), where the original writes `unused`. Owner and secret are both in the
    user entry (what the Python client sends) and in the server URL: Go clients
    (`kubectl` in a role) read no user entry for a plain-HTTP server and send the URL's
    user info as Basic auth instead. The context is `<namespace>/proxy-server`, which for
    a cluster-scoped owner is `/proxy-server`, as in the original; it sets no default
    namespace.
    """
    username = encode_owner(owner)
    context = f"{owner.namespace}/{PROXY_CLUSTER}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": PROXY_CLUSTER,
                "cluster": {
                    "insecure-skip-tls-verify": True,
                    "server": proxy_server(port=port, host=host, user=username, password=password),
                },
            }
        ],
        "contexts": [
            {"name": context, "context": {"cluster": PROXY_CLUSTER, "user": PROXY_USER}},
        ],
        "current-context": context,
        "preferences": {},
        "users": [
            {"name": PROXY_USER, "user": {"username": username, "password": password}},
        ],
    }
