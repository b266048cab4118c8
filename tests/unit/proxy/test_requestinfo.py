"""Request classification with kube-apiserver's RequestInfoFactory rules."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from runner.proxy.requestinfo import RequestInfo, parse_request
from runner.structs import NamespacedName

NON_RESOURCE = RequestInfo(
    is_resource=False,
    verb="get",
    api_prefix="",
    group="",
    version="",
    namespace="",
    resource="",
    subresource="",
    name="",
)


def core(**changes: Any) -> RequestInfo:
    base = RequestInfo(
        is_resource=True,
        verb="get",
        api_prefix="api",
        group="",
        version="v1",
        namespace="",
        resource="",
        subresource="",
        name="",
    )
    return replace(base, **changes)


def apps(**changes: Any) -> RequestInfo:
    return replace(core(api_prefix="apis", group="apps"), **changes)


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        # --- core group, namespaced -----------------------------------------------------
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods/x",
            {},
            core(namespace="ns", resource="pods", name="x"),
            id="core-get",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods",
            {},
            core(verb="list", namespace="ns", resource="pods"),
            id="core-list",
        ),
        pytest.param(
            "GET",
            "/api/v1/pods",
            {},
            core(verb="list", resource="pods"),
            id="core-list-all-namespaces",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods/x/status",
            {},
            core(namespace="ns", resource="pods", name="x", subresource="status"),
            id="core-get-status",
        ),
        pytest.param(
            "PUT",
            "/api/v1/namespaces/ns/pods/x/status",
            {},
            core(verb="update", namespace="ns", resource="pods", name="x", subresource="status"),
            id="core-update-status",
        ),
        pytest.param(
            "POST",
            "/api/v1/namespaces/ns/pods/x/exec",
            {"command": "ls"},
            core(verb="create", namespace="ns", resource="pods", name="x", subresource="exec"),
            id="core-exec",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods/x/log/extra/parts",
            {},
            core(namespace="ns", resource="pods", name="x", subresource="log"),
            id="parts-after-subresource-ignored",
        ),
        pytest.param(
            "POST",
            "/api/v1/namespaces/ns/configmaps",
            {},
            core(verb="create", namespace="ns", resource="configmaps"),
            id="core-create",
        ),
        pytest.param(
            "PUT",
            "/api/v1/namespaces/ns/configmaps/c",
            {},
            core(verb="update", namespace="ns", resource="configmaps", name="c"),
            id="core-update",
        ),
        pytest.param(
            "PATCH",
            "/api/v1/namespaces/ns/configmaps/c",
            {},
            core(verb="patch", namespace="ns", resource="configmaps", name="c"),
            id="core-patch",
        ),
        pytest.param(
            "DELETE",
            "/api/v1/namespaces/ns/configmaps/c",
            {},
            core(verb="delete", namespace="ns", resource="configmaps", name="c"),
            id="core-delete",
        ),
        pytest.param(
            "DELETE",
            "/api/v1/namespaces/ns/configmaps",
            {},
            core(verb="deletecollection", namespace="ns", resource="configmaps"),
            id="core-deletecollection",
        ),
        pytest.param(
            "HEAD",
            "/api/v1/namespaces/ns/configmaps/c",
            {},
            core(namespace="ns", resource="configmaps", name="c"),
            id="head-is-get",
        ),
        pytest.param(
            "OPTIONS",
            "/api/v1/namespaces/ns/configmaps/c",
            {},
            core(verb="", namespace="ns", resource="configmaps", name="c"),
            id="unknown-method-no-verb",
        ),
        pytest.param(
            "get",
            "/api/v1/namespaces/ns/configmaps/c",
            {},
            core(namespace="ns", resource="configmaps", name="c"),
            id="method-case-insensitive",
        ),
        # --- named groups ----------------------------------------------------------------
        pytest.param(
            "GET",
            "/apis/apps/v1/namespaces/ns/deployments",
            {},
            apps(verb="list", namespace="ns", resource="deployments"),
            id="group-list",
        ),
        pytest.param(
            "GET",
            "/apis/apps/v1/namespaces/ns/deployments/d",
            {},
            apps(namespace="ns", resource="deployments", name="d"),
            id="group-get",
        ),
        pytest.param(
            "PUT",
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            {},
            apps(
                verb="update", namespace="ns", resource="deployments", name="d", subresource="scale"
            ),
            id="group-scale",
        ),
        pytest.param(
            "GET",
            "/apis/apps/v1/deployments",
            {},
            apps(verb="list", resource="deployments"),
            id="group-list-all-namespaces",
        ),
        pytest.param(
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            {},
            core(
                verb="create",
                api_prefix="apis",
                group="rbac.authorization.k8s.io",
                resource="clusterroles",
            ),
            id="cluster-scoped-create",
        ),
        pytest.param(
            "GET",
            "/apis/cache.example.com/v1alpha1/namespaces/ns/memcacheds/m/status",
            {},
            core(
                api_prefix="apis",
                group="cache.example.com",
                version="v1alpha1",
                namespace="ns",
                resource="memcacheds",
                name="m",
                subresource="status",
            ),
            id="custom-resource-status",
        ),
        # --- the Namespace object and its subresources -------------------------------------
        pytest.param(
            "GET",
            "/api/v1/namespaces",
            {},
            core(verb="list", resource="namespaces"),
            id="namespaces-list",
        ),
        pytest.param(
            "POST",
            "/api/v1/namespaces",
            {},
            core(verb="create", resource="namespaces"),
            id="namespaces-create",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns",
            {},
            core(namespace="ns", resource="namespaces", name="ns"),
            id="namespace-get",
        ),
        pytest.param(
            "DELETE",
            "/api/v1/namespaces/ns",
            {},
            core(verb="delete", namespace="ns", resource="namespaces", name="ns"),
            id="namespace-delete",
        ),
        pytest.param(
            "PUT",
            "/api/v1/namespaces/ns/status",
            {},
            core(
                verb="update",
                namespace="ns",
                resource="namespaces",
                name="ns",
                subresource="status",
            ),
            id="namespace-status",
        ),
        pytest.param(
            "PUT",
            "/api/v1/namespaces/ns/finalize",
            {},
            core(
                verb="update",
                namespace="ns",
                resource="namespaces",
                name="ns",
                subresource="finalize",
            ),
            id="namespace-finalize",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/statuses",
            {},
            core(verb="list", namespace="ns", resource="statuses"),
            id="resource-named-like-subresource-prefix",
        ),
        # --- watches ---------------------------------------------------------------------
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"watch": "true"},
            core(verb="watch", namespace="ns", resource="pods"),
            id="watch-true",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"watch": "1"},
            core(verb="watch", namespace="ns", resource="pods"),
            id="watch-1",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"watch": "True"},
            core(verb="watch", namespace="ns", resource="pods"),
            id="watch-True",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"watch": ""},
            core(verb="watch", namespace="ns", resource="pods"),
            id="watch-empty-value-is-true",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"watch": "false"},
            core(verb="list", namespace="ns", resource="pods"),
            id="watch-false",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"watch": "FALSE"},
            core(verb="list", namespace="ns", resource="pods"),
            id="watch-FALSE",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"watch": "0"},
            core(verb="list", namespace="ns", resource="pods"),
            id="watch-0",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods/x",
            {"watch": "true"},
            core(namespace="ns", resource="pods", name="x"),
            id="watch-param-ignored-with-name",
        ),
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods",
            {"labelSelector": "app=x", "fieldSelector": "metadata.name=x"},
            core(verb="list", namespace="ns", resource="pods"),
            id="field-selector-name-does-not-make-a-get",
        ),
        pytest.param(
            "GET",
            "/api/v1/watch/namespaces/ns/pods",
            {},
            core(verb="watch", namespace="ns", resource="pods"),
            id="legacy-watch-collection",
        ),
        pytest.param(
            "GET",
            "/api/v1/watch/namespaces/ns/pods/x",
            {},
            core(verb="watch", namespace="ns", resource="pods", name="x"),
            id="legacy-watch-one",
        ),
        pytest.param(
            "GET",
            "/api/v1/watch/pods",
            {},
            core(verb="watch", resource="pods"),
            id="legacy-watch-all-namespaces",
        ),
        pytest.param(
            "GET",
            "/apis/apps/v1/watch/namespaces/ns/deployments",
            {},
            apps(verb="watch", namespace="ns", resource="deployments"),
            id="legacy-watch-group",
        ),
        pytest.param(
            "GET",
            "/api/v1/watch/namespaces",
            {},
            core(verb="watch", resource="namespaces"),
            id="legacy-watch-namespaces",
        ),
        pytest.param(
            "GET",
            "/api/v1/proxy/namespaces/ns/pods/x/some/path",
            {},
            core(verb="proxy", namespace="ns", resource="pods", name="x"),
            id="legacy-proxy-no-subresource",
        ),
        # --- paths kept as given ---------------------------------------------------------
        pytest.param(
            "GET",
            "/api/v1/namespaces/ns/pods/x/",
            {},
            core(namespace="ns", resource="pods", name="x"),
            id="trailing-slash",
        ),
        pytest.param(
            "GET",
            "api/v1/namespaces/ns/pods/x",
            {},
            core(namespace="ns", resource="pods", name="x"),
            id="no-leading-slash",
        ),
    ],
)
def test_resource_requests(
    method: str, path: str, query: dict[str, str], expected: RequestInfo
) -> None:
    assert parse_request(method, path, query) == expected


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("GET", "/", id="root"),
        pytest.param("GET", "", id="empty"),
        pytest.param("GET", "/api", id="api"),
        pytest.param("GET", "/api/", id="api-slash"),
        pytest.param("GET", "/api/v1", id="api-v1"),
        pytest.param("GET", "/apis", id="apis"),
        pytest.param("GET", "/apis/apps", id="apis-group"),
        pytest.param("GET", "/apis/apps/v1", id="apis-group-version"),
        pytest.param("GET", "/version", id="version"),
        pytest.param("GET", "/healthz", id="healthz"),
        pytest.param("GET", "/readyz/etcd", id="readyz-check"),
        pytest.param("GET", "/openapi/v2", id="openapi-v2"),
        pytest.param("GET", "/openapi/v3/apis/apps/v1", id="openapi-v3"),
        pytest.param("GET", "/metrics", id="metrics"),
        pytest.param("GET", "/other/v1/pods", id="unknown-prefix"),
        pytest.param("GET", "/api/v1/watch", id="bare-watch-unparseable"),
        pytest.param("GET", "/apis/apps/v1/proxy", id="bare-proxy-unparseable"),
        pytest.param("POST", "/version", id="post-non-resource"),
        pytest.param("DELETE", "/apis", id="delete-non-resource"),
    ],
)
def test_non_resource_requests(method: str, path: str) -> None:
    info = parse_request(method, path, {"watch": "true"})
    assert info == replace(NON_RESOURCE, verb=method.lower())
    assert info.api_version == ""


@pytest.mark.parametrize(
    ("path", "api_version"),
    [
        pytest.param("/api/v1/pods", "v1", id="core"),
        pytest.param("/apis/apps/v1/deployments", "apps/v1", id="apps"),
        pytest.param(
            "/apis/cache.example.com/v1alpha1/memcacheds", "cache.example.com/v1alpha1", id="crd"
        ),
        pytest.param("/version", "", id="non-resource"),
    ],
)
def test_api_version(path: str, api_version: str) -> None:
    assert parse_request("GET", path, {}).api_version == api_version


@pytest.mark.parametrize(
    ("path", "key", "is_namespace_object"),
    [
        pytest.param(
            "/api/v1/namespaces/ns/pods/x", NamespacedName("ns", "x"), False, id="namespaced"
        ),
        pytest.param("/api/v1/nodes/n", NamespacedName("", "n"), False, id="cluster-scoped"),
        pytest.param(
            "/api/v1/namespaces/ns", NamespacedName("", "ns"), True, id="namespace-object"
        ),
        pytest.param(
            "/api/v1/namespaces/ns/status", NamespacedName("", "ns"), True, id="namespace-status"
        ),
        pytest.param(
            "/apis/example.com/v1/namespaces/ns/namespaces/x",
            NamespacedName("ns", "x"),
            False,
            id="crd-called-namespaces",
        ),
        pytest.param("/api/v1/namespaces/ns/pods", NamespacedName("ns", ""), False, id="list"),
    ],
)
def test_key(path: str, key: NamespacedName, is_namespace_object: bool) -> None:
    info = parse_request("GET", path, {})
    assert info.key == key
    assert info.is_namespace_object is is_namespace_object


def test_request_info_is_frozen_and_keyword_only() -> None:
    info = parse_request("GET", "/api/v1/pods", {})
    with pytest.raises(AttributeError):
        info.verb = "get"  # type: ignore[misc]
    with pytest.raises(TypeError):
        RequestInfo(True, "get", "api", "", "v1", "", "pods", "", "")  # type: ignore[call-arg]
