"""After each watch's first list: forget the CRs deleted while no operator ran.

Their data directories came over from a stopped predecessor (`rundir.carry_runs`) and no
delete event will ever remove them. Once a controller's informer has synced, the data
directories of its kind whose CR is not in the list are forgotten through the backend
(`AnsibleBackend.forget`: never one with a run in progress). Not for a sharded replica,
whose informers see only its own share of the CRs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from pathlib import Path

from runner.ansible.backend import AnsibleBackend
from runner.ansible.orphandirs import absent_crs, cr_data_dirs
from runner.engine.controller import Controller
from runner.engine.manager import Manager

__all__ = ["AbsentSweep"]

log = logging.getLogger("ansible-operator.sweep")


class AbsentSweep:
    """Hooks into `manager`'s controller start and stop; `close()` ends what is pending."""

    def __init__(
        self,
        manager: Manager,
        *,
        backend: AnsibleBackend,
        base_dir: Path,
        namespaces: Collection[str] | None,
    ) -> None:
        self._backend = backend
        self._base_dir = base_dir
        self._namespaces = namespaces
        self._tasks: dict[Controller, asyncio.Task[int]] = {}
        self.swept = 0
        """How many CRs' data directories were forgotten so far."""
        started, stopped = manager.on_controller, manager.on_controller_stopped

        def on_controller(controller: Controller) -> None:
            started(controller)
            self._tasks[controller] = asyncio.create_task(
                self._sweep(controller), name=f"{controller.name}-sweep"
            )

        def on_controller_stopped(controller: Controller) -> None:
            stopped(controller)
            task = self._tasks.pop(controller, None)
            if task is not None:
                task.cancel()

        manager.on_controller = on_controller
        manager.on_controller_stopped = on_controller_stopped

    async def _sweep(self, controller: Controller) -> int:
        await controller.wait_synced()
        gvk = controller.gvk
        # Listed before the informer's keys are read: a data directory made meanwhile is
        # a known CR's, and is not in the listing.
        dirs = await asyncio.to_thread(cr_data_dirs, self._base_dir, gvk)
        existing = set(controller.informer.keys())
        gone = absent_crs(dirs, existing=existing, namespaces=self._namespaces)
        for key in gone:
            await self._backend.forget(gvk, key.namespace, key.name)
        if gone:
            log.info(
                "forgot the runs of %d %s deleted while the operator was not running",
                len(gone),
                gvk.kind,
            )
        self.swept += len(gone)
        self._tasks.pop(controller, None)
        return len(gone)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
