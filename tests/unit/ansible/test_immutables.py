"""runner.ansible.hooks.immutables: deepcopy returns ansible-core's immutable values as they are."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from runner.ansible.hooks import immutables


@pytest.fixture
def installed() -> Iterator[None]:
    dispatch: dict[type, Any] = copy._deepcopy_dispatch  # type: ignore[attr-defined]
    before = dict(dispatch)
    immutables.install()
    try:
        yield
    finally:
        dispatch.clear()
        dispatch.update(before)


def _loaded() -> Any:
    """Variables as ansible-core has them after reading YAML (tagged on 2.19)."""
    from ansible.parsing.dataloader import DataLoader

    text = "name: demo\nsize: 3\nitems: [a, b]\nnested: {key: value, list: [1, 2]}\n"
    return DataLoader().load(text, file_name="/roles/demo/vars/main.yml")


def test_every_registered_type_is_immutable() -> None:
    kinds = immutables.immutable_types()
    assert kinds
    for kind in kinds:
        assert immutables._immutable(kind), kind


def test_copies_share_immutable_values_and_copy_containers(installed: None) -> None:
    data = _loaded()
    copied = copy.deepcopy(data)
    assert copied == data
    assert copied is not data and copied["nested"] is not data["nested"]
    assert copied["items"] is not data["items"]
    assert copied["name"] is data["name"]  # a str (subclass): shared, as a str is
    copied["nested"]["list"].append(3)
    copied["items"][0] = "changed"
    assert data["nested"]["list"] == [1, 2] and data["items"] == ["a", "b"]


def _tags(value: Any) -> Any:
    try:
        from ansible.module_utils._internal._datatag import AnsibleTagHelper
    except ImportError:  # 2.18: no tags
        return None
    return AnsibleTagHelper.tags(value)


def test_the_same_as_a_copy_without_it() -> None:
    data = _loaded()
    dispatch: dict[type, Any] = copy._deepcopy_dispatch  # type: ignore[attr-defined]
    before = dict(dispatch)
    plain = copy.deepcopy(data)
    immutables.install()
    try:
        fast = copy.deepcopy(data)
    finally:
        dispatch.clear()
        dispatch.update(before)
    assert fast == plain
    for key in data:
        assert type(fast[key]) is type(plain[key])
        assert _tags(fast[key]) == _tags(plain[key])
    assert _tags(fast["name"]) == _tags(data["name"])
