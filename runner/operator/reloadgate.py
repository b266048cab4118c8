"""The gate between one watch's runs and live reload (`run --reload`).

A live reload edits the files a watch's runs read while its controller keeps working. The
controller's workers pass the gate before each reconcile; the reloader drives it:

- closed from the first event of an edit until the reloader has checked the files (a
  half-saved role must not start new runs): `note_edit`, then `checked`;
- closed while the files are broken (running them would only turn every CR to Failure):
  `pause`, until `resume`.

A run already going when an edit lands may read a file half-saved and fail to start.
The reconciler takes a `mark` before the run and, when the run could not start, asks
`interrupted`: if the files were edited since, the reloader puts the CR's status back as
the API had it before the run (its `Restore`), and the run is no error.

Without live reload nothing drives the gate: it stays open and no run is interrupted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from runner.structs import NamespacedName

log = logging.getLogger("ansible-operator.controller")

Restore = Callable[[NamespacedName, Mapping[str, Any] | None], Awaitable[None]]
"""Put the status of a CR back as it was before a run (given that status, or None)."""


class ReloadGate:
    """Holds a watch's new runs while live reload checks or waits for the files they read."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._edits = 0  # edits of the watch's files seen so far
        self._checking = False  # an edit waits for the reloader's check
        self._paused: str | None = None  # why runs are held: the files are broken
        self._open = asyncio.Event()
        self._open.set()
        self._restore: Restore | None = None

    # -- the runs' side -------------------------------------------------------------------

    async def wait(self) -> None:
        """Return once new runs may start."""
        await self._open.wait()

    def mark(self) -> int:
        """Taken before a run; `interrupted` compares with it afterwards."""
        return self._edits

    async def interrupted(
        self, key: NamespacedName, *, mark: int, before: Mapping[str, Any] | None
    ) -> bool:
        """A run of `key` that began at `mark` could not start (it produced no stats).

        True when the watch's files were edited since: the reloader has put the CR's
        status back to `before` (as the API had it before the run), and it reconciles the
        CR again once the edit is good. False when nothing was edited: a real failure."""
        if self._edits == mark or self._restore is None:
            return False
        await self._restore(key, before)
        return True

    # -- the reloader's side --------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    @property
    def paused(self) -> str | None:
        """Why runs are held (a broken file), or None."""
        return self._paused

    def attach(self, restore: Restore) -> None:
        """How interrupted runs get their CR's status back (the reloader's writer)."""
        self._restore = restore

    def note_edit(self) -> None:
        """A file the runs read just changed: hold new runs until `checked`, and let runs
        in flight know (`interrupted`)."""
        self._edits += 1
        self._checking = True
        self._open.clear()

    def checked(self) -> None:
        """The edits noted so far are checked (`pause` came first if they are broken)."""
        self._checking = False
        if self._paused is None:
            self._open.set()

    def pause(self, reason: str) -> None:
        """Hold new runs until `resume` (runs in flight finish): the files are broken."""
        if self._paused is None:
            log.warning("%s: reconciles paused: %s", self.name, reason)
        self._paused = reason
        self._open.clear()

    def resume(self) -> None:
        if self._paused is not None:
            log.info("%s: reconciles resumed", self.name)
        self._paused = None
        if not self._checking:
            self._open.set()
