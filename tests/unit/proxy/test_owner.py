"""Owner identity in the proxy's username, owner injection, owners of dependents, kubeconfig."""

from __future__ import annotations

import base64
import copy
import http.server
import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.proxy.owner import (
    PRIMARY_RESOURCE_ANNOTATION,
    PRIMARY_RESOURCE_TYPE_ANNOTATION,
    Injection,
    Owner,
    decode_owner,
    encode_owner,
    group_kind,
    inject_owner,
    owner_from_basic_auth,
    owner_reference,
    owners_of,
    proxy_kubeconfig,
    proxy_server,
)
from runner.structs import NamespacedName

UID = "1b6d5f3c-6b1e-4a53-9d0e-0c3f2d7a9e11"
OTHER_UID = "7f0e2a44-2c5d-4f8b-8e4a-5d9c3b1a0f22"
OWNER = Owner(
    api_version="cache.example.com/v1alpha1",
    kind="Memcached",
    name="memcached-sample",
    uid=UID,
    namespace="ns",
)
CLUSTER_OWNER = Owner(
    api_version="cache.example.com/v1alpha1",
    kind="ClusterMemcached",
    name="everywhere",
    uid=UID,
    namespace="",
)
CORE_OWNER = Owner(api_version="v1", kind="ConfigMap", name="cm", uid=UID, namespace="ns")
REF = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "name": "memcached-sample",
    "uid": UID,
}
CLUSTER_REF = {**REF, "kind": "ClusterMemcached", "name": "everywhere"}
GO_DOCUMENT = (
    '{"apiVersion":"cache.example.com/v1alpha1","kind":"Memcached","name":"memcached-sample",'
    f'"uid":"{UID}","Namespace":"ns"}}'
)


def b64(text: str, *, url: bool = False, pad: bool = True) -> str:
    encode = base64.urlsafe_b64encode if url else base64.standard_b64encode
    out = encode(text.encode()).decode()
    return out if pad else out.rstrip("=")


def basic(credentials: str) -> str:
    return "Basic " + b64(credentials)


# --- Owner -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("owner", "group", "cluster_scoped"),
    [
        pytest.param(OWNER, "cache.example.com", False, id="namespaced"),
        pytest.param(CLUSTER_OWNER, "cache.example.com", True, id="cluster-scoped"),
        pytest.param(CORE_OWNER, "", False, id="core-group"),
    ],
)
def test_owner_properties(owner: Owner, group: str, cluster_scoped: bool) -> None:
    assert owner.group == group
    assert owner.cluster_scoped is cluster_scoped
    assert owner.key == NamespacedName(owner.namespace, owner.name)


@pytest.mark.parametrize(
    ("group", "kind", "text"),
    [
        pytest.param("cache.example.com", "Memcached", "Memcached.cache.example.com", id="group"),
        pytest.param("", "ConfigMap", "ConfigMap", id="core"),
    ],
)
def test_group_kind(group: str, kind: str, text: str) -> None:
    assert group_kind(group=group, kind=kind) == text


# --- encode / decode ---------------------------------------------------------------------


def test_encode_is_what_the_go_operator_writes() -> None:
    # json.Marshal(NamespacedOwnerReference) then base64.URLEncoding.EncodeToString.
    assert encode_owner(OWNER) == b64(GO_DOCUMENT, url=True)


def test_encode_cluster_scoped_keeps_empty_namespace() -> None:
    document = json.loads(base64.urlsafe_b64decode(encode_owner(CLUSTER_OWNER)))
    assert document == {**CLUSTER_REF, "Namespace": ""}
    assert list(document) == ["apiVersion", "kind", "name", "uid", "Namespace"]


@pytest.mark.parametrize(
    ("name", "alphabet_char"),
    [
        pytest.param("x?", "_", id="slash-becomes-underscore"),
        pytest.param("~~~", "-", id="plus-becomes-dash"),
    ],
)
def test_encode_uses_url_safe_alphabet(name: str, alphabet_char: str) -> None:
    encoded = encode_owner(Owner(**{**OWNER.__dict__, "name": name}))
    assert alphabet_char in encoded
    assert "+" not in encoded
    assert "/" not in encoded


def test_encode_has_no_newlines_for_long_owners() -> None:
    long_owner = Owner(**{**OWNER.__dict__, "name": "n" * 253, "namespace": "s" * 63})
    encoded = encode_owner(long_owner)
    assert "\n" not in encoded
    assert len(encoded) > 76  # longer than a MIME line
    assert decode_owner(encoded) == long_owner


def test_encode_escapes_html_characters_like_go() -> None:
    owner = Owner(**{**OWNER.__dict__, "name": "a<b>&c\u2028é"})
    text = base64.urlsafe_b64decode(encode_owner(owner)).decode()
    assert '"name":"a\\u003cb\\u003e\\u0026c\\u2028é"' in text
    assert decode_owner(encode_owner(owner)) == owner


@pytest.mark.parametrize(
    "owner",
    [
        pytest.param(OWNER, id="namespaced"),
        pytest.param(CLUSTER_OWNER, id="cluster-scoped"),
        pytest.param(CORE_OWNER, id="core-group"),
        pytest.param(Owner(**{**OWNER.__dict__, "name": "ünïcødé"}), id="unicode"),
    ],
)
def test_round_trip(owner: Owner) -> None:
    assert decode_owner(encode_owner(owner)) == owner


@pytest.mark.parametrize(
    "username",
    [
        pytest.param(b64(GO_DOCUMENT, url=True), id="url-safe-padded"),
        pytest.param(b64(GO_DOCUMENT, url=True, pad=False), id="url-safe-unpadded"),
        pytest.param(b64(GO_DOCUMENT), id="standard-padded"),
        pytest.param(b64(GO_DOCUMENT, pad=False), id="standard-unpadded"),
        pytest.param(" " + b64(GO_DOCUMENT) + "\n", id="surrounding-whitespace"),
        pytest.param(
            b64(GO_DOCUMENT.replace('"Namespace"', '"namespace"')), id="namespace-lower-case"
        ),
        pytest.param(
            b64(GO_DOCUMENT.replace('"apiVersion"', '"APIVERSION"').replace('"uid"', '"UID"')),
            id="keys-case-insensitive",
        ),
        pytest.param(
            b64(GO_DOCUMENT[:-1] + ',"controller":true,"blockOwnerDeletion":true}'),
            id="extra-keys-ignored",
        ),
    ],
)
def test_decode_accepts(username: str) -> None:
    assert decode_owner(username) == OWNER


def test_decode_prefers_exact_key_over_case_folded_one() -> None:
    document = {**REF, "Namespace": "ns", "namespace": "other"}
    assert decode_owner(b64(json.dumps(document))) == OWNER


def test_decode_missing_namespace_means_cluster_scoped() -> None:
    assert decode_owner(b64(json.dumps(CLUSTER_REF))) == CLUSTER_OWNER


@pytest.mark.parametrize(
    "username",
    [
        pytest.param("", id="empty"),
        pytest.param("   ", id="blank"),
        pytest.param("!!!!", id="not-base64"),
        pytest.param("abcde", id="impossible-length"),
        pytest.param("ab=cd===", id="padding-inside"),
        pytest.param("=", id="only-padding"),
        pytest.param(b64("not json"), id="not-json"),
        pytest.param(base64.b64encode(b"\xff\xfe{}").decode(), id="not-utf8"),
        pytest.param(b64("[1, 2]"), id="json-list"),
        pytest.param(b64('"text"'), id="json-string"),
        pytest.param(b64("null"), id="json-null"),
        pytest.param(b64("{}"), id="json-empty-object"),
        *(
            pytest.param(
                b64(json.dumps({k: v for k, v in {**REF, "Namespace": "ns"}.items() if k != key})),
                id=f"missing-{key}",
            )
            for key in ("apiVersion", "kind", "name", "uid")
        ),
        *(
            pytest.param(b64(json.dumps({**REF, "Namespace": "ns", key: ""})), id=f"empty-{key}")
            for key in ("apiVersion", "kind", "name", "uid")
        ),
        pytest.param(b64(json.dumps({**REF, "name": 5})), id="name-not-a-string"),
        pytest.param(b64(json.dumps({**REF, "uid": None})), id="uid-null"),
        pytest.param(b64(json.dumps({**REF, "Namespace": 3})), id="namespace-not-a-string"),
        pytest.param(b64(json.dumps({**REF, "Namespace": ["ns"]})), id="namespace-list"),
        pytest.param("admin", id="plain-username"),
    ],
)
def test_decode_rejects(username: str) -> None:
    assert decode_owner(username) is None


# --- Basic auth ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param(basic(encode_owner(OWNER) + ":unused"), OWNER, id="kubeconfig-user"),
        pytest.param(
            "basic " + b64(encode_owner(OWNER) + ":unused"), OWNER, id="scheme-case-insensitive"
        ),
        pytest.param(
            "  Basic   " + b64(encode_owner(OWNER) + ":unused") + " ", OWNER, id="extra-spaces"
        ),
        pytest.param(basic(encode_owner(OWNER) + ":"), OWNER, id="empty-password"),
        pytest.param(basic(encode_owner(OWNER) + ":a:b:c"), OWNER, id="password-with-colons"),
        pytest.param(basic(b64(GO_DOCUMENT) + ":unused"), OWNER, id="standard-base64-username"),
        pytest.param(
            "Basic " + b64(encode_owner(CLUSTER_OWNER) + ":unused", pad=False),
            CLUSTER_OWNER,
            id="unpadded-credentials",
        ),
        pytest.param(None, None, id="no-header"),
        pytest.param("", None, id="empty-header"),
        pytest.param("Basic", None, id="scheme-only"),
        pytest.param("Basic ", None, id="scheme-and-space"),
        pytest.param("Bearer " + encode_owner(OWNER), None, id="bearer-token"),
        pytest.param("Basic !!!", None, id="credentials-not-base64"),
        pytest.param(basic(encode_owner(OWNER)), None, id="no-colon"),
        pytest.param(basic("admin:secret"), None, id="username-not-an-owner"),
        pytest.param(basic(":unused"), None, id="empty-username"),
        pytest.param(
            "Basic " + base64.b64encode(b"\xff:\xfe").decode(), None, id="credentials-not-utf8"
        ),
    ],
)
def test_owner_from_basic_auth(header: str | None, expected: Owner | None) -> None:
    assert owner_from_basic_auth(header) == expected


# --- ownerReference / injection -----------------------------------------------------------


def test_owner_reference_has_no_controller_flags() -> None:
    assert owner_reference(OWNER) == REF
    assert owner_reference(CLUSTER_OWNER) == CLUSTER_REF


def configmap(namespace: str | None = "ns", **metadata: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "cm", **metadata}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


ROLE_CONTROLLER_REF = {**REF, "controller": True, "blockOwnerDeletion": True}
FOREIGN_REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": OTHER_UID}
ANNOTATIONS = {
    PRIMARY_RESOURCE_ANNOTATION: "ns/memcached-sample",
    PRIMARY_RESOURCE_TYPE_ANNOTATION: "Memcached.cache.example.com",
}

INJECTIONS = [
    pytest.param(
        configmap(),
        OWNER,
        "ns",
        configmap(ownerReferences=[REF]),
        Injection.REFERENCE,
        id="same-namespace",
    ),
    pytest.param(
        configmap(ownerReferences=[FOREIGN_REF]),
        OWNER,
        "ns",
        configmap(ownerReferences=[FOREIGN_REF, REF]),
        Injection.REFERENCE,
        id="same-namespace-appends-after-existing",
    ),
    pytest.param(
        configmap(ownerReferences=[ROLE_CONTROLLER_REF]),
        OWNER,
        "ns",
        configmap(ownerReferences=[ROLE_CONTROLLER_REF]),
        Injection.REFERENCE,
        id="role-set-controller-ref-kept-not-duplicated",
    ),
    pytest.param(
        configmap(ownerReferences=[REF]),
        OWNER,
        "ns",
        configmap(ownerReferences=[REF]),
        Injection.REFERENCE,
        id="existing-ref-not-duplicated",
    ),
    pytest.param(
        configmap(ownerReferences=[{**REF, "name": "renamed"}]),
        OWNER,
        "ns",
        configmap(ownerReferences=[{**REF, "name": "renamed"}]),
        Injection.REFERENCE,
        id="same-uid-decides",
    ),
    pytest.param(
        configmap(ownerReferences=None),
        OWNER,
        "ns",
        configmap(ownerReferences=[REF]),
        Injection.REFERENCE,
        id="null-owner-references",
    ),
    pytest.param(
        configmap(namespace=None),
        OWNER,
        "ns",
        configmap(namespace=None, ownerReferences=[REF]),
        Injection.REFERENCE,
        id="namespace-from-url-not-body",
    ),
    pytest.param(
        {"apiVersion": "v1", "kind": "ConfigMap"},
        OWNER,
        "ns",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"ownerReferences": [REF]}},
        Injection.REFERENCE,
        id="no-metadata",
    ),
    pytest.param(
        {"kind": "ConfigMap", "metadata": None},
        OWNER,
        "ns",
        {"kind": "ConfigMap", "metadata": {"ownerReferences": [REF]}},
        Injection.REFERENCE,
        id="null-metadata",
    ),
    pytest.param(
        configmap(namespace="elsewhere"),
        CLUSTER_OWNER,
        "elsewhere",
        configmap(namespace="elsewhere", ownerReferences=[CLUSTER_REF]),
        Injection.REFERENCE,
        id="cluster-owner-namespaced-object",
    ),
    pytest.param(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        CLUSTER_OWNER,
        "",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team", "ownerReferences": [CLUSTER_REF]},
        },
        Injection.REFERENCE,
        id="cluster-owner-cluster-scoped-object",
    ),
    pytest.param(
        configmap(namespace="other"),
        OWNER,
        "other",
        configmap(namespace="other", annotations=ANNOTATIONS),
        Injection.ANNOTATIONS,
        id="cross-namespace",
    ),
    pytest.param(
        configmap(namespace="other", annotations={"keep": "me"}),
        OWNER,
        "other",
        configmap(namespace="other", annotations={"keep": "me", **ANNOTATIONS}),
        Injection.ANNOTATIONS,
        id="cross-namespace-keeps-other-annotations",
    ),
    pytest.param(
        configmap(
            namespace="other",
            annotations={
                PRIMARY_RESOURCE_ANNOTATION: "x/y",
                PRIMARY_RESOURCE_TYPE_ANNOTATION: "Other.example.com",
            },
        ),
        OWNER,
        "other",
        configmap(namespace="other", annotations=ANNOTATIONS),
        Injection.ANNOTATIONS,
        id="cross-namespace-overwrites-annotations",
    ),
    pytest.param(
        configmap(namespace="other", annotations=None),
        OWNER,
        "other",
        configmap(namespace="other", annotations=ANNOTATIONS),
        Injection.ANNOTATIONS,
        id="null-annotations",
    ),
    pytest.param(
        configmap(namespace="other", ownerReferences=[FOREIGN_REF]),
        OWNER,
        "other",
        configmap(namespace="other", ownerReferences=[FOREIGN_REF], annotations=ANNOTATIONS),
        Injection.ANNOTATIONS,
        id="cross-namespace-leaves-owner-references",
    ),
    pytest.param(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {}},
        OWNER,
        "",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"annotations": ANNOTATIONS},
        },
        Injection.ANNOTATIONS,
        id="namespaced-owner-cluster-scoped-object",
    ),
    pytest.param(
        configmap(namespace="other"),
        CORE_OWNER,
        "other",
        configmap(
            namespace="other",
            annotations={
                PRIMARY_RESOURCE_ANNOTATION: "ns/cm",
                PRIMARY_RESOURCE_TYPE_ANNOTATION: "ConfigMap",
            },
        ),
        Injection.ANNOTATIONS,
        id="core-group-owner-type",
    ),
]


@pytest.mark.parametrize(("obj", "owner", "namespace", "expected", "how"), INJECTIONS)
def test_inject_owner(
    obj: dict[str, Any], owner: Owner, namespace: str, expected: dict[str, Any], how: Injection
) -> None:
    assert inject_owner(obj, owner, namespace=namespace) == (expected, how)


@pytest.mark.parametrize(("obj", "owner", "namespace", "expected", "how"), INJECTIONS)
def test_inject_owner_never_mutates_input(
    obj: dict[str, Any], owner: Owner, namespace: str, expected: dict[str, Any], how: Injection
) -> None:
    before = copy.deepcopy(obj)
    result, _ = inject_owner(obj, owner, namespace=namespace)
    assert obj == before
    assert result is not obj
    # Changing the result anywhere leaves the input alone: nothing is shared.
    result["metadata"].setdefault("ownerReferences", []).append({"uid": "x"})
    result["metadata"].setdefault("annotations", {})["x"] = "y"
    for ref in result["metadata"]["ownerReferences"]:
        ref["name"] = "changed"
    if "data" in result:
        result["data"]["k"] = "changed"
    assert obj == before


def test_inject_owner_twice_is_idempotent() -> None:
    for obj, namespace in ((configmap(), "ns"), (configmap(namespace="other"), "other")):
        once, _ = inject_owner(obj, OWNER, namespace=namespace)
        assert inject_owner(once, OWNER, namespace=namespace)[0] == once


# --- owners of a dependent ----------------------------------------------------------------

GROUP = "cache.example.com"
KIND = "Memcached"


def dependent(namespace: str | None = "ns", **metadata: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "dep", **metadata}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta}


def ref(
    name: str, *, api_version: str = "cache.example.com/v1alpha1", kind: str = KIND
) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}"}


def annotated(primary: str, kind_text: str = "Memcached.cache.example.com") -> dict[str, str]:
    return {PRIMARY_RESOURCE_ANNOTATION: primary, PRIMARY_RESOURCE_TYPE_ANNOTATION: kind_text}


@pytest.mark.parametrize(
    ("obj", "group", "kind", "expected"),
    [
        pytest.param(dependent(), GROUP, KIND, [], id="no-owners"),
        pytest.param({}, GROUP, KIND, [], id="no-metadata"),
        pytest.param({"metadata": None}, GROUP, KIND, [], id="null-metadata"),
        pytest.param(
            dependent(ownerReferences=[ref("a")]),
            GROUP,
            KIND,
            [NamespacedName("ns", "a")],
            id="reference",
        ),
        pytest.param(
            dependent(ownerReferences=[ref("a", api_version="cache.example.com/v1beta2")]),
            GROUP,
            KIND,
            [NamespacedName("ns", "a")],
            id="reference-any-version",
        ),
        pytest.param(
            dependent(ownerReferences=[ref("a"), ref("b"), ref("a")]),
            GROUP,
            KIND,
            [NamespacedName("ns", "a"), NamespacedName("ns", "b")],
            id="several-references-deduplicated-in-order",
        ),
        pytest.param(
            dependent(
                ownerReferences=[
                    ref("other-kind", kind="Redis"),
                    ref("other-group", api_version="other.example.com/v1alpha1"),
                    ref("core", api_version="v1"),
                    ref("a"),
                ]
            ),
            GROUP,
            KIND,
            [NamespacedName("ns", "a")],
            id="other-kinds-and-groups-ignored",
        ),
        pytest.param(
            dependent(ownerReferences=[ref("a", api_version="a/b/c"), ref("b")]),
            GROUP,
            KIND,
            [NamespacedName("ns", "b")],
            id="malformed-api-version-skipped",
        ),
        pytest.param(
            dependent(
                ownerReferences=[
                    "junk",
                    {"kind": KIND, "name": "no-api-version"},
                    {"apiVersion": "cache.example.com/v1alpha1", "kind": KIND},
                    {**ref("x"), "name": ""},
                    {**ref("y"), "name": 7},
                ]
            ),
            GROUP,
            KIND,
            [],
            id="malformed-references-skipped",
        ),
        pytest.param(
            dependent(ownerReferences="junk"), GROUP, KIND, [], id="references-not-a-list"
        ),
        pytest.param(
            dependent(ownerReferences=[ref("cm", api_version="v1", kind="ConfigMap")]),
            "",
            "ConfigMap",
            [NamespacedName("ns", "cm")],
            id="core-group-reference",
        ),
        pytest.param(
            dependent(namespace=None, ownerReferences=[ref("a")]),
            GROUP,
            KIND,
            [NamespacedName("", "a")],
            id="cluster-scoped-dependent-reference",
        ),
        pytest.param(
            dependent(namespace="other", annotations=annotated("ns/a")),
            GROUP,
            KIND,
            [NamespacedName("ns", "a")],
            id="annotations",
        ),
        pytest.param(
            dependent(namespace=None, annotations=annotated("ns/a")),
            GROUP,
            KIND,
            [NamespacedName("ns", "a")],
            id="annotations-on-cluster-scoped-dependent",
        ),
        pytest.param(
            dependent(annotations=annotated("everywhere")),
            GROUP,
            KIND,
            [NamespacedName("", "everywhere")],
            id="annotation-without-slash-is-cluster-scoped-owner",
        ),
        pytest.param(
            dependent(annotations=annotated("/a")),
            GROUP,
            KIND,
            [NamespacedName("", "a")],
            id="annotation-empty-namespace",
        ),
        pytest.param(
            dependent(annotations=annotated("ns/a/b")),
            GROUP,
            KIND,
            [NamespacedName("ns", "a/b")],
            id="annotation-split-once",
        ),
        pytest.param(
            dependent(annotations=annotated("ns/")), GROUP, KIND, [], id="annotation-empty-name"
        ),
        pytest.param(dependent(annotations=annotated("")), GROUP, KIND, [], id="annotation-empty"),
        pytest.param(
            dependent(
                annotations={PRIMARY_RESOURCE_TYPE_ANNOTATION: "Memcached.cache.example.com"}
            ),
            GROUP,
            KIND,
            [],
            id="type-annotation-alone",
        ),
        pytest.param(
            dependent(annotations={PRIMARY_RESOURCE_ANNOTATION: "ns/a"}),
            GROUP,
            KIND,
            [],
            id="primary-annotation-alone",
        ),
        pytest.param(
            dependent(annotations=annotated("ns/a", "Redis.cache.example.com")),
            GROUP,
            KIND,
            [],
            id="annotation-other-kind",
        ),
        pytest.param(
            dependent(annotations=annotated("ns/a", "Memcached.other.example.com")),
            GROUP,
            KIND,
            [],
            id="annotation-other-group",
        ),
        pytest.param(
            dependent(annotations=annotated("ns/a", "memcached.cache.example.com")),
            GROUP,
            KIND,
            [],
            id="annotation-type-case-sensitive",
        ),
        pytest.param(
            dependent(annotations=annotated("ns/a", "Memcached")),
            GROUP,
            KIND,
            [],
            id="annotation-type-without-group",
        ),
        pytest.param(
            dependent(annotations=annotated("ns/cm", "ConfigMap")),
            "",
            "ConfigMap",
            [NamespacedName("ns", "cm")],
            id="annotation-core-group",
        ),
        pytest.param(
            dependent(annotations=annotated("ns/cm", "ConfigMap.")),
            "",
            "ConfigMap",
            [NamespacedName("ns", "cm")],
            id="annotation-core-group-trailing-dot",
        ),
        pytest.param(
            dependent(annotations="junk"), GROUP, KIND, [], id="annotations-not-a-mapping"
        ),
        pytest.param(
            dependent(ownerReferences=[ref("a")], annotations=annotated("other/b")),
            GROUP,
            KIND,
            [NamespacedName("ns", "a"), NamespacedName("other", "b")],
            id="references-then-annotations",
        ),
        pytest.param(
            dependent(ownerReferences=[ref("a")], annotations=annotated("ns/a")),
            GROUP,
            KIND,
            [NamespacedName("ns", "a")],
            id="reference-and-annotation-deduplicated",
        ),
        pytest.param(
            inject_owner(dependent(), OWNER, namespace="ns")[0],
            GROUP,
            KIND,
            [NamespacedName("ns", "memcached-sample")],
            id="after-injection-reference",
        ),
        pytest.param(
            inject_owner(dependent(namespace="other"), OWNER, namespace="other")[0],
            GROUP,
            KIND,
            [NamespacedName("ns", "memcached-sample")],
            id="after-injection-annotations",
        ),
    ],
)
def test_owners_of(
    obj: dict[str, Any], group: str, kind: str, expected: list[NamespacedName]
) -> None:
    assert owners_of(obj, group=group, kind=kind) == expected


# --- kubeconfig ---------------------------------------------------------------------------


def test_proxy_kubeconfig_namespaced_owner() -> None:
    username = encode_owner(OWNER)
    assert proxy_kubeconfig(OWNER, port=8888, password="s3cret") == {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "proxy-server",
                "cluster": {
                    "insecure-skip-tls-verify": True,
                    "server": f"http://{username}:s3cret@localhost:8888",
                },
            }
        ],
        "contexts": [
            {
                "name": "ns/proxy-server",
                "context": {"cluster": "proxy-server", "user": "admin/proxy-server"},
            }
        ],
        "current-context": "ns/proxy-server",
        "preferences": {},
        "users": [
            {"name": "admin/proxy-server", "user": {"username": username, "password": "s3cret"}}
        ],
    }


@pytest.mark.parametrize(
    ("owner", "port", "host", "server", "context"),
    [
        pytest.param(OWNER, 43210, "localhost", "localhost:43210", "ns/proxy-server", id="port"),
        pytest.param(OWNER, 8888, "127.0.0.1", "127.0.0.1:8888", "ns/proxy-server", id="host"),
        pytest.param(OWNER, 8888, "::1", "[::1]:8888", "ns/proxy-server", id="ipv6-host"),
        pytest.param(OWNER, 8888, "[::1]", "[::1]:8888", "ns/proxy-server", id="ipv6-bracketed"),
        pytest.param(
            CLUSTER_OWNER, 8888, "localhost", "localhost:8888", "/proxy-server", id="cluster-owner"
        ),
    ],
)
def test_proxy_kubeconfig_follows_port_and_host(
    owner: Owner, port: int, host: str, server: str, context: str
) -> None:
    config = proxy_kubeconfig(owner, port=port, host=host, password="s3cret")
    expected = f"http://{encode_owner(owner)}:s3cret@{server}"
    assert config["clusters"][0]["cluster"]["server"] == expected
    assert config["current-context"] == context
    assert config["contexts"][0]["name"] == context


@pytest.mark.parametrize(
    ("host", "user", "url"),
    [
        pytest.param("localhost", None, "http://localhost:8888", id="no-owner"),
        pytest.param("::1", None, "http://[::1]:8888", id="ipv6"),
        pytest.param("localhost", "b3duZXI", "http://b3duZXI@localhost:8888", id="owner"),
    ],
)
def test_proxy_server(host: str, user: str | None, url: str) -> None:
    assert proxy_server(port=8888, host=host, user=user) == url


def test_proxy_server_with_a_password_quotes_it() -> None:
    url = proxy_server(port=1, user="b3duZXI=", password="a/b:c@d")
    assert url == "http://b3duZXI=:a%2Fb%3Ac%40d@localhost:1"


@pytest.mark.parametrize(
    "owner",
    [pytest.param(OWNER, id="namespaced"), pytest.param(CLUSTER_OWNER, id="cluster-scoped")],
)
def test_python_kubernetes_client_sends_owner_as_basic_auth(owner: Owner, tmp_path: Path) -> None:
    """The client kubernetes.core uses reads the file and authenticates as the owner."""
    kubernetes = pytest.importorskip("kubernetes")
    path = tmp_path / "kubeconfig"
    sent: dict[str, Any] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            sent.update(path=self.path, headers=dict(self.headers.items()))
            body = b'{"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    # A loopback server in place of the proxy: it sees what the client sends.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    port = server.server_address[1]
    path.write_text(yaml.safe_dump(proxy_kubeconfig(owner, port=port, password="s3cret")))

    try:
        api = kubernetes.config.new_client_from_config(config_file=str(path))
        assert api.configuration.host == f"http://{encode_owner(owner)}:s3cret@localhost:{port}"
        assert api.configuration.verify_ssl is False
        kubernetes.client.CoreV1Api(api).list_namespaced_config_map("ns")
    finally:
        server.shutdown()
        server.server_close()
        thread.join()

    assert sent["path"] == "/api/v1/namespaces/ns/configmaps"
    headers = {key.lower(): value for key, value in sent["headers"].items()}
    assert owner_from_basic_auth(headers["authorization"]) == owner
    scheme, credentials = headers["authorization"].split()
    assert scheme == "Basic"
    assert base64.b64decode(credentials).decode() == f"{encode_owner(owner)}:s3cret"


def test_kubeconfig_survives_yaml_round_trip() -> None:
    config = proxy_kubeconfig(CLUSTER_OWNER, port=1, password="s3cret")
    assert yaml.safe_load(yaml.safe_dump(config)) == config
