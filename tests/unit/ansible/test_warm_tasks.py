"""runner.ansible.hooks.warmtasks: which plays the warm runner runs, and why not others."""

from __future__ import annotations

from typing import Any

import pytest

from runner.ansible.hooks.warmtasks import Shape, lookup_in, why_not_warm

PLAY = Shape(where="the play", kind="play", keys=frozenset({"hosts", "roles", "gather_facts"}))


def task(action: str = "ansible.builtin.set_fact", **data: Any) -> Shape:
    args = data.pop("args", {})
    return Shape(
        where="main.yml:1",
        kind="task",
        keys=frozenset(data),
        action=action,
        args=args,
        data=data,
    )


def block(**data: Any) -> Shape:
    return Shape(where="main.yml:1", kind="block", keys=frozenset({"block", *data}), data=data)


@pytest.mark.parametrize(
    "shapes",
    [
        pytest.param([PLAY, task(when="size > 5", name="n")], id="set_fact-with-when"),
        pytest.param(
            [
                PLAY,
                task("ansible.builtin.assert", register="r", ignore_errors=True, no_log=True),
                task("ansible.builtin.fail", failed_when="x", changed_when=False, vars={"a": 1}),
                task("ansible.builtin.debug", tags=["a", "b"]),
            ],
            id="every-allowed-action-and-keyword",
        ),
        pytest.param([PLAY, block(when="x", vars={"a": "b"}), task()], id="plain-block"),
        pytest.param(
            [
                PLAY,
                task(loop="{{ items }}", loop_control={"label": "{{ item }}", "extended": True}),
            ],
            id="loop",
        ),
        pytest.param(
            [
                PLAY,
                Shape(
                    where="x",
                    kind="task",
                    keys=frozenset(),
                    action="ansible.builtin.meta",
                    implicit=True,
                ),
                task(),
            ],
            id="implicit-meta",
        ),
    ],
)
def test_controller_side_tasks_run_warm(shapes: list[Shape]) -> None:
    assert why_not_warm(shapes) is None


@pytest.mark.parametrize(
    ("shapes", "reason"),
    [
        pytest.param(
            [PLAY, task("kubernetes.core.k8s_info")],
            "main.yml:1: the action kubernetes.core.k8s_info runs only in a full run",
            id="module",
        ),
        pytest.param(
            [PLAY, task("ansible.builtin.command")],
            "main.yml:1: the action ansible.builtin.command runs only in a full run",
            id="command",
        ),
        pytest.param(
            [PLAY, task("ansible.builtin.meta", args={"_raw_params": "end_play"})],
            "main.yml:1: the action ansible.builtin.meta runs only in a full run",
            id="explicit-meta",
        ),
        pytest.param(
            [PLAY, task(loop=[1, 2], loop_control={"label": "x", "pause": 1})],
            "main.yml:1: the loop_control keyword pause runs only in a full run",
            id="loop-pause",
        ),
        pytest.param(
            [PLAY, task(with_items=[1])],
            "main.yml:1: the task keyword with_items runs only in a full run",
            id="with_items",
        ),
        pytest.param(
            [PLAY, task(delegate_to="other")],
            "main.yml:1: the task keyword delegate_to runs only in a full run",
            id="delegate_to",
        ),
        pytest.param(
            [PLAY, task(notify="restart")],
            "main.yml:1: the task keyword notify runs only in a full run",
            id="notify",
        ),
        pytest.param(
            [PLAY, task(until="x", retries=3)],
            "main.yml:1: the task keyword retries runs only in a full run",
            id="retries",
        ),
        pytest.param(
            [PLAY, task(args={"cacheable": True, "x": 1})],
            "main.yml:1: set_fact with cacheable (the fact cache outlives a request)",
            id="cacheable",
        ),
        pytest.param(
            [PLAY, block(rescue=[]), task()],
            "main.yml:1: the block keyword rescue runs only in a full run",
            id="rescue",
        ),
        pytest.param(
            [PLAY, task(args={"x": "{{ lookup('kubernetes.core.k8s', kind='Pod') }}"})],
            "main.yml:1: calls a lookup ({{ lookup('kubernetes.core.k8s', kind='Pod') }})",
            id="lookup",
        ),
        pytest.param(
            [PLAY, task(when="query('env', 'HOME')")],
            "main.yml:1: calls a lookup (query('env', 'HOME'))",
            id="query-in-when",
        ),
        pytest.param(
            [PLAY, task(tags=["never", "debug"])],
            "main.yml:1: the tag never runs only in a full run",
            id="never-tag",
        ),
        pytest.param(
            [Shape(where="the play", kind="play", keys=frozenset({"hosts", "vars_files"})), task()],
            "the play: the play keyword vars_files runs only in a full run",
            id="vars_files",
        ),
        pytest.param([PLAY], "no tasks", id="no-tasks"),
    ],
)
def test_anything_else_keeps_full_runs_and_says_why(shapes: list[Shape], reason: str) -> None:
    assert why_not_warm(shapes) == reason


def test_variables_that_call_lookups_keep_full_runs() -> None:
    variables = [("role check defaults", {"token": "{{ lookup('file', '/etc/token') }}"})]
    assert why_not_warm([PLAY, task()], variables=variables) == (
        "role check defaults calls a lookup ({{ lookup('file', '/etc/token') }})"
    )


def test_lookup_in_finds_calls_not_words() -> None:
    assert lookup_in({"a": ["x", {"b": "{{ q('env', 'X') }}"}]}) == "{{ q('env', 'X') }}"
    assert lookup_in({"lookup": "a lookup of names", "query": "frequency(3)"}) is None
