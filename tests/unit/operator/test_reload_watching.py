"""Which files a running live reload watches: those of the watches it has now, also the
ones a reload of watches.yaml added."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from runner.engine.manager import Manager
from runner.operator.builder import ControllerBuilder
from runner.operator.reconciler import RunSettings
from runner.operator.reload import Reloader
from runner.structs import GVK
from runner.watches.model import Watch

FIRST = GVK("reload.example.com", "v1alpha1", "First")
ADDED = GVK("reload.example.com", "v1alpha1", "Added")


class Project:
    """watches.yaml and two roles; `watches` is what loading watches.yaml gives now."""

    def __init__(self, root: Path) -> None:
        self.watches_file = root / "watches.yaml"
        self.watches_file.write_text("# read through `watches`\n")
        self.roles = root / "roles"
        for name in ("first", "added"):
            (self.roles / name / "tasks").mkdir(parents=True)
            self.tasks(name).write_text("- ansible.builtin.debug:\n    msg: v1\n")
        self.watches = (Watch(gvk=FIRST, role=self.roles / "first"),)

    def tasks(self, role: str) -> Path:
        return self.roles / role / "tasks" / "main.yml"


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[tuple[Project, Manager, Reloader]]:
    project = Project(tmp_path)
    builder = ControllerBuilder(
        client=object(),  # type: ignore[arg-type]  # no controller is started
        backend=object(),  # type: ignore[arg-type]
        settings=RunSettings(),
        namespaces=None,
    )
    manager = Manager(controllers=[builder.build(watch) for watch in project.watches])
    reloader = Reloader(
        manager,
        builder=builder,
        watches=project.watches,
        namespaces=None,
        client=object(),  # type: ignore[arg-type]
        watches_file=project.watches_file,
        load_watches=lambda: project.watches,
        shared_paths=[],
    )
    reloader.start()
    try:
        yield project, manager, reloader
    finally:
        await reloader.stop()


async def logged(caplog: pytest.LogCaptureFixture, message: str, *, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not any(message in record.getMessage() for record in caplog.records):
        if loop.time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_the_role_of_a_watch_added_by_a_reload_is_watched_for_edits(
    running: tuple[Project, Manager, Reloader], caplog: pytest.LogCaptureFixture
) -> None:
    project, manager, reloader = running
    caplog.set_level(logging.INFO, logger="ansible-operator.reload")
    project.tasks("first").write_text("- ansible.builtin.debug:\n    msg: v2\n")
    await logged(caplog, "reconciling every First again", what="the first role's edit")

    project.watches = (*project.watches, Watch(gvk=ADDED, role=project.roles / "added"))
    await reloader.apply({project.watches_file})  # what an edit of watches.yaml brings
    assert manager.controller(ADDED) is not None

    project.tasks("added").write_text("- ansible.builtin.debug:\n    msg: v2\n")
    await logged(caplog, "reconciling every Added again", what="the added role's edit")
