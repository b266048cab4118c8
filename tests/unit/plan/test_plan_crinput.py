"""runner.plan.crinput: the CR a plan starts from (file, --cr, --set, --patch, --delete),
the parts that need no API server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.errors import ConfigError
from runner.plan.crinput import CRInput, _deleting, _wanted, _watch_for_object, _watch_for_target
from runner.structs.gvk import GVK
from runner.watches.model import Finalizer, Watch

MEMCACHED = Watch(
    gvk=GVK("cache.example.com", "v1alpha1", "Memcached"),
    role=Path("/roles/memcached"),
    finalizer=Finalizer(name="cache.example.com/finalizer", vars={"state": "absent"}),
)
POLICY = Watch(gvk=GVK("cache.example.com", "v1alpha1", "Policy"), role=Path("/roles/policy"))
OTHER_POLICY = Watch(gvk=GVK("other.example.com", "v1", "Policy"), role=Path("/roles/other"))
WATCHES = (MEMCACHED, POLICY, OTHER_POLICY)

LIVE: dict[str, Any] = {
    "apiVersion": "cache.example.com/v1alpha1",
    "kind": "Memcached",
    "metadata": {
        "name": "sample",
        "namespace": "team-a",
        "uid": "u-1",
        "resourceVersion": "41",
        "labels": {"tier": "cache"},
        "finalizers": ["cache.example.com/finalizer"],
    },
    "spec": {"size": 1, "image": "memcached:1.6"},
    "status": {"nodes": []},
}


def test_the_cluster_cr_with_set_and_a_merge_patch() -> None:
    result = _wanted(
        CRInput(
            target="memcached/sample",
            assignments=("spec.size=3", "spec.extra.enabled=true"),
            patch={"spec": {"image": "memcached:1.7"}, "metadata": {"labels": {"new": "yes"}}},
        ),
        LIVE,
        namespace="team-a",
        source="CR",
    )
    assert result["spec"] == {"size": 3, "image": "memcached:1.7", "extra": {"enabled": True}}
    assert result["metadata"]["labels"] == {"tier": "cache", "new": "yes"}
    assert result["metadata"]["uid"] == "u-1"  # still the cluster's object
    assert LIVE["spec"]["size"] == 1  # the cluster's copy is left alone


def test_a_json_patch_list() -> None:
    result = _wanted(
        CRInput(
            target="memcached/sample",
            patch=[
                {"op": "replace", "path": "/spec/size", "value": 5},
                {"op": "remove", "path": "/spec/image"},
            ],
        ),
        LIVE,
        namespace="team-a",
        source="CR",
    )
    assert result["spec"] == {"size": 5}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"assignments": ("spec.size",)}, "spec.size"),
        ({"patch": [{"op": "remove", "path": "/spec/none"}]}, "--patch: "),
        ({"patch": [{"op": "replace", "path": "", "value": 3}]}, "not an object"),
        ({"patch": {"kind": "Other"}}, "cannot change the CR's kind"),
    ],
)
def test_bad_changes_are_config_errors(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        _wanted(CRInput(target="memcached/sample", **fields), LIVE, namespace="team-a", source="CR")


def test_a_file_over_the_cluster_cr_takes_its_fields_labels_and_annotations() -> None:
    file_cr = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "sample", "labels": {"tier": "db"}, "uid": "ignored"},
        "spec": {"size": 2},
    }
    result = _wanted(CRInput(obj=file_cr), LIVE, namespace="team-a", source="cr.yaml")
    assert result["spec"] == {"size": 2}  # image: gone, as `kubectl replace` would
    assert result["metadata"]["labels"] == {"tier": "db"}
    assert result["metadata"]["uid"] == "u-1"
    assert result["metadata"]["finalizers"] == ["cache.example.com/finalizer"]
    assert result["status"] == {"nodes": []}


def test_a_new_file_cr_loses_what_the_server_sets() -> None:
    file_cr = {
        "apiVersion": "cache.example.com/v1alpha1",
        "kind": "Memcached",
        "metadata": {"name": "sample", "resourceVersion": "9", "uid": "x"},
        "spec": {"size": 2},
        "status": {"nodes": ["a"]},
    }
    result = _wanted(CRInput(obj=file_cr), None, namespace="team-a", source="cr.yaml")
    assert result["metadata"] == {"name": "sample", "namespace": "team-a"}
    assert "status" not in result


def test_deleting_adds_a_deletion_timestamp_and_the_watchs_finalizer() -> None:
    bare = {**LIVE, "metadata": {**LIVE["metadata"], "finalizers": ["other/one"]}}
    result = _deleting(bare, MEMCACHED)
    meta = result["metadata"]
    assert meta["deletionTimestamp"] and meta["deletionGracePeriodSeconds"] == 0
    assert meta["finalizers"] == ["other/one", "cache.example.com/finalizer"]
    assert _deleting(LIVE, MEMCACHED)["metadata"]["finalizers"] == ["cache.example.com/finalizer"]
    assert "finalizers" not in _deleting({"metadata": {"name": "p"}}, POLICY)["metadata"]


@pytest.mark.parametrize(
    ("target", "watch"),
    [
        ("memcached/sample", MEMCACHED),
        ("Memcached/sample", MEMCACHED),
        ("memcacheds/sample", MEMCACHED),
        ("memcached.cache.example.com/sample", MEMCACHED),
        ("policies/p", None),
        ("policy.other.example.com/p", OTHER_POLICY),
        ("policy.v1alpha1.cache.example.com/p", POLICY),
    ],
)
def test_kind_slash_name(target: str, watch: Watch | None) -> None:
    if watch is None:
        with pytest.raises(ConfigError, match="matches several kinds"):
            _watch_for_target(WATCHES, target)
    else:
        assert _watch_for_target(WATCHES, target) == watch


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("memcached", "expected KIND/NAME"),
        ("memcached/a/b", "expected KIND/NAME"),
        ("/sample", "expected KIND/NAME"),
        ("redis/sample", "no watch for kind redis"),
    ],
)
def test_kind_slash_name_errors(target: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _watch_for_target(WATCHES, target)


def test_a_file_of_a_kind_not_watched_names_the_file_and_the_watched_kinds() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    with pytest.raises(ConfigError, match=r"cr\.yaml: no watch for .*ConfigMap.*Memcached"):
        _watch_for_object(WATCHES, obj, source="cr.yaml")
