"""What a request to the proxy is about: verb, group/version, namespace, resource, name.

The proxy decides per request whether to inject an owner (a create), answer from the
informer cache (a get or list of a watched kind) or just pass the request through. The
Go operator asks kube-apiserver's `RequestInfoFactory` for that; this is the same parse
as a pure function of method, path and query, so the proxy and the API server agree on
what every URL means:

* `/api/<version>/...` is the core group, `/apis/<group>/<version>/...` a named group;
  anything shorter (`/api`, `/api/v1`, `/apis/apps`, `/apis/apps/v1`) or outside those
  prefixes (`/version`, `/healthz`, `/openapi/v2`) is not a resource request and keeps the
  lower-cased HTTP method as its verb;
* `namespaces/<ns>/<resource>/...` puts the rest relative to the resource, except that
  `namespaces/<ns>`, `namespaces/<ns>/status` and `namespaces/<ns>/finalize` address the
  Namespace object itself (its `namespace` field is then `<ns>`, as in the API server);
* the legacy `/watch/` segment after the version makes the verb `watch`;
* GET/HEAD without a name is `list`, or `watch` when the `watch` query parameter is given
  and is neither `0` nor `false`; DELETE without a name is `deletecollection`.

Two departures, both on purpose: a path the API server would reject as unparseable (a
bare `/api/v1/watch`) is reported as a non-resource request, so the proxy passes it
through and the API server answers it; and a `fieldSelector=metadata.name=x` on a list
does not fill in `name` (the API server does that only for its authorizer; here `name`
always means "a single object was addressed").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from runner.structs import NamespacedName

__all__ = ["RequestInfo", "parse_request"]

_API_PREFIXES: Final = frozenset({"api", "apis"})
_GROUPLESS_PREFIXES: Final = frozenset({"api"})
_SPECIAL_VERBS: Final = frozenset({"proxy", "watch"})
_SPECIAL_VERBS_NO_SUBRESOURCES: Final = frozenset({"proxy"})
_NAMESPACE_SUBRESOURCES: Final = frozenset({"status", "finalize"})
_METHOD_VERBS: Final = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


@dataclass(frozen=True, kw_only=True)
class RequestInfo:
    """One request as kube-apiserver classifies it; empty strings for absent parts."""

    is_resource: bool
    verb: str
    api_prefix: str
    group: str
    version: str
    namespace: str
    resource: str
    subresource: str
    name: str

    @property
    def api_version(self) -> str:
        """`v1` for the core group, `apps/v1` otherwise; empty for non-resource requests."""
        if not self.version:
            return ""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def is_namespace_object(self) -> bool:
        """Whether the request addresses core Namespace objects (a cluster-scoped kind)."""
        return self.is_resource and self.group == "" and self.resource == "namespaces"

    @property
    def key(self) -> NamespacedName:
        """The addressed object's key in a cache: a Namespace object has no namespace."""
        namespace = "" if self.is_namespace_object else self.namespace
        return NamespacedName(namespace=namespace, name=self.name)


def _non_resource(method: str) -> RequestInfo:
    return RequestInfo(
        is_resource=False,
        verb=method.lower(),
        api_prefix="",
        group="",
        version="",
        namespace="",
        resource="",
        subresource="",
        name="",
    )


def _watch_requested(query: Mapping[str, str]) -> bool:
    # The API server's query-parameter boolean: present and neither "0" nor "false".
    value = query.get("watch")
    if value is None:
        return False
    return not (value == "0" or value.lower() == "false")


def parse_request(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """Classify a request by kube-apiserver's rules (see the module docstring).

    `path` is the decoded URL path without the query string; `query` holds the first
    value of each query parameter.
    """
    method = method.upper()
    trimmed = path.strip("/")
    parts = trimmed.split("/") if trimmed else []
    if len(parts) < 3 or parts[0] not in _API_PREFIXES:
        return _non_resource(method)
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in _GROUPLESS_PREFIXES:
        if len(parts) < 3:
            return _non_resource(method)
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]

    if parts[0] in _SPECIAL_VERBS:
        if len(parts) < 2:
            return _non_resource(method)
        verb, parts = parts[0], parts[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")

    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]

    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = ""
    if len(parts) >= 3 and verb not in _SPECIAL_VERBS_NO_SUBRESOURCES:
        subresource = parts[2]

    if not name and verb == "get":
        verb = "watch" if _watch_requested(query) else "list"
    if not name and verb == "delete":
        verb = "deletecollection"

    return RequestInfo(
        is_resource=True,
        verb=verb,
        api_prefix=prefix,
        group=group,
        version=version,
        namespace=namespace,
        resource=resource,
        subresource=subresource,
        name=name,
    )
