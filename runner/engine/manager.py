"""The Manager owns the controllers of every watch and stops them gracefully."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from runner.ansible.backend import AnsibleBackend
from runner.engine.controller import Controller
from runner.engine.reconciler import RunSettings
from runner.k8s.client import KubeClient
from runner.structs import GVK, NamespacedName
from runner.watches import Watch

log = logging.getLogger("ansible-operator.manager")


class Manager:
    """Starts one controller per watch; `run()` returns after `stop` is set."""

    def __init__(
        self,
        *,
        client: KubeClient,
        watches: Sequence[Watch],
        backend: AnsibleBackend,
        settings: RunSettings,
        namespaces: Sequence[str] | None,
        max_workers: int = 0,
        graceful_shutdown_timeout: float = 30.0,
    ) -> None:
        self._graceful = graceful_shutdown_timeout
        limit = asyncio.Semaphore(max_workers) if max_workers > 0 else None
        self.controllers = [
            Controller(
                watch=watch,
                client=client,
                backend=backend,
                settings=settings,
                namespaces=namespaces,
                global_limit=limit,
            )
            for watch in watches
        ]

    def enqueue(self, gvk: GVK, key: NamespacedName) -> None:
        """Reconcile `key` of the primary kind `gvk` (a dependent of it changed)."""
        for controller in self.controllers:
            if controller.watch.gvk == gvk:
                controller.queue.add(key)

    async def start(self) -> None:
        for controller in self.controllers:
            await controller.start()

    async def wait_synced(self) -> None:
        await asyncio.gather(*(c.wait_synced() for c in self.controllers))

    async def run(self, stop: asyncio.Event) -> None:
        await self.start()
        await stop.wait()
        await self.shutdown()

    async def shutdown(self) -> None:
        log.info("stopping: waiting up to %.0f s for running reconciles", self._graceful)
        await asyncio.gather(*(c.stop(timeout=self._graceful) for c in self.controllers))
        log.info("stopped")
