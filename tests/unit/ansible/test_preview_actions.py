"""runner.ansible.hooks.previewactions: which tasks a plan runs, and its mode."""

from __future__ import annotations

import pytest

from runner.ansible.hooks.previewactions import (
    DEFAULT_REASON,
    PREVIEWABLE,
    REASONS,
    WAITING,
    PlanMode,
    canonical,
    not_previewable,
)


@pytest.mark.parametrize(
    ("action", "name"),
    [
        pytest.param("shell", "ansible.builtin.shell", id="short-builtin"),
        pytest.param("ansible.legacy.command", "ansible.builtin.command", id="legacy"),
        pytest.param("k8s", "kubernetes.core.k8s", id="short-kubernetes"),
        pytest.param("k8s_status", "operator_sdk.util.k8s_status", id="short-operator-sdk"),
        pytest.param(
            "community.kubernetes.k8s_info", "kubernetes.core.k8s_info", id="old-collection"
        ),
        pytest.param("my.own.module", "my.own.module", id="fqcn"),
    ],
)
def test_canonical(action: str, name: str) -> None:
    assert canonical(action) == name


@pytest.mark.parametrize(
    "action",
    [
        "kubernetes.core.k8s",
        "k8s_info",
        "operator_sdk.util.k8s_status",
        "ansible.builtin.set_fact",
        "include_tasks",
        "template",
    ],
)
def test_previewable(action: str) -> None:
    assert not_previewable(action) is None


@pytest.mark.parametrize(
    ("action", "words"),
    [
        pytest.param("command", "runs a program", id="command"),
        pytest.param("ansible.builtin.shell", "runs a program", id="shell"),
        pytest.param("uri", "HTTP request", id="uri"),
        pytest.param("kubernetes.core.k8s_exec", "exec", id="exec"),
        pytest.param("kubernetes.core.helm", "helm", id="helm"),
        pytest.param("community.general.slack", DEFAULT_REASON, id="unknown"),
    ],
)
def test_not_previewable(action: str, words: str) -> None:
    reason = not_previewable(action)
    assert reason is not None and words in reason


def test_tables_do_not_overlap() -> None:
    assert not PREVIEWABLE & set(REASONS)
    assert WAITING <= PREVIEWABLE


@pytest.mark.parametrize("mode", [PlanMode(), PlanMode(allow_side_effects=True, record="/x")])
def test_mode_round_trip(mode: PlanMode) -> None:
    assert PlanMode.decode(mode.encode()) == mode


@pytest.mark.parametrize("text", ['{"allow_side_effects": "yes"}', "[]", '{"record": 1}'])
def test_mode_refuses_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="ANSIBLE_OPERATOR_PLAN"):
        PlanMode.decode(text)
