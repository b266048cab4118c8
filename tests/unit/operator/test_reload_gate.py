"""The gate live reload holds a watch's runs with: checks, pauses, interrupted runs."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from runner.operator.reloadgate import ReloadGate
from runner.structs import NamespacedName

KEY = NamespacedName("ns", "one")


async def passes(gate: ReloadGate) -> bool:
    """Whether a worker waiting on the gate gets through now."""
    waiter = asyncio.create_task(gate.wait())
    await asyncio.sleep(0)
    if waiter.done():
        return True
    waiter.cancel()
    return False


@pytest.mark.parametrize(
    ("steps", "open_after"),
    [
        pytest.param([], True, id="open-without-reload"),
        pytest.param(["note_edit"], False, id="an-edit-holds-runs-until-checked"),
        pytest.param(["note_edit", "checked"], True, id="checked-and-good"),
        pytest.param(["note_edit", "pause", "checked"], False, id="checked-and-broken"),
        pytest.param(["note_edit", "pause", "checked", "resume"], True, id="fixed"),
        pytest.param(["pause", "note_edit", "resume"], False, id="resumed-while-checking"),
        pytest.param(["pause", "note_edit", "resume", "checked"], True, id="then-checked"),
        pytest.param(["note_edit", "note_edit", "checked"], True, id="a-burst-is-one-check"),
    ],
)
async def test_when_runs_pass(steps: list[str], open_after: bool) -> None:
    gate = ReloadGate("c")
    for step in steps:
        if step == "pause":
            gate.pause("roles/r/tasks/main.yml:2: broken")
        else:
            getattr(gate, step)()
    assert gate.is_open is open_after
    assert await passes(gate) is open_after


async def test_a_held_worker_passes_once_the_edit_is_checked() -> None:
    gate = ReloadGate("c")
    gate.note_edit()
    waiter = asyncio.create_task(gate.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    gate.checked()
    await asyncio.wait_for(waiter, 1)


async def test_only_runs_edited_under_are_interrupted_and_the_reloader_restores_them() -> None:
    restored: list[tuple[NamespacedName, Mapping[str, Any] | None]] = []

    async def restore(key: NamespacedName, before: Mapping[str, Any] | None) -> None:
        restored.append((key, before))

    gate = ReloadGate("c")
    gate.attach(restore)
    before = {"conditions": [{"type": "Successful", "status": "True"}]}
    mark = gate.mark()
    assert not await gate.interrupted(KEY, mark=mark, before=before)
    assert restored == []

    gate.note_edit()
    assert await gate.interrupted(KEY, mark=mark, before=before)
    assert restored == [(KEY, before)]
    assert not await gate.interrupted(KEY, mark=gate.mark(), before=before)


async def test_without_a_reloader_no_run_is_interrupted() -> None:
    gate = ReloadGate("c")
    mark = gate.mark()
    gate.note_edit()
    assert not await gate.interrupted(KEY, mark=mark, before=None)
