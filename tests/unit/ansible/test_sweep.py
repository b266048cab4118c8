"""Which data directories go once a watch has synced: those of CRs no longer listed."""

from __future__ import annotations

from pathlib import Path

from runner.ansible.artifacts import ARTIFACTS
from runner.ansible.orphandirs import absent_crs, cr_data_dirs
from runner.structs.gvk import GVK, NamespacedName

GVK_ = GVK(group="cache.example.com", version="v1alpha1", kind="Memcached")


def test_only_unlisted_crs_in_watched_namespaces_go() -> None:
    dirs = [("a", "kept"), ("a", "deleted"), ("b", "deleted"), ("other", "x"), ("a", "x", "y")]
    existing = {NamespacedName(namespace="a", name="kept")}
    gone = absent_crs(dirs, existing=existing, namespaces=("a", "b"))
    assert gone == [
        NamespacedName(namespace="a", name="deleted"),
        NamespacedName(namespace="b", name="deleted"),
    ]


def test_cluster_scoped_only_when_every_namespace_is_watched() -> None:
    existing = {NamespacedName(namespace="", name="kept")}
    assert absent_crs([("kept",), ("gone",)], existing=existing, namespaces=None) == [
        NamespacedName(namespace="", name="gone")
    ]
    assert absent_crs([("gone",)], existing=set(), namespaces=("a",)) == []


def test_nothing_goes_when_every_cr_exists() -> None:
    existing = {NamespacedName("a", "one"), NamespacedName("b", "two")}
    assert absent_crs([("a", "one"), ("b", "two")], existing=existing, namespaces=None) == []


def _data_dir(path: Path) -> None:
    (path / ARTIFACTS).mkdir(parents=True)
    (path / "env").mkdir()
    (path / "env" / "extravars").write_text("{}")


def test_data_dirs_are_read_below_the_kind_without_following_links(tmp_path: Path) -> None:
    kind_dir = tmp_path / "cache.example.com" / "v1alpha1" / "Memcached"
    _data_dir(kind_dir / "a" / "one")
    elsewhere = tmp_path / "elsewhere"
    _data_dir(elsewhere / "b" / "two")
    (kind_dir / "b").symlink_to(elsewhere / "b")
    assert cr_data_dirs(tmp_path, GVK_) == [("a", "one")]

    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "v1alpha1").symlink_to(kind_dir.parent)
    assert cr_data_dirs(tmp_path, GVK(group="linked", version="v1alpha1", kind="Memcached")) == []
