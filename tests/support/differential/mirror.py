"""A copy of every run's artifacts as they are written, which outlives the operator's own.

Ours removes a CR's data directory when the CR is gone (the Go operator keeps it until it
restarts), so the runs of a deleted CR, its finalizer run included, would be lost before
the suite reads them. Each file of `artifacts/<ident>/` (the job events, `command`,
`status`) is hard-linked into the mirror as soon as inotify reports it (a link shares
the file: what is written later shows too), and a sweep every `SWEEP` seconds catches
what the notifications missed (inotify watches a new directory only once it has been
told about it: files of directories made at once with their parents go unreported). The
mirror has the data directories' layout,
`<group>/<version>/<kind>/[<namespace>/]<name>/artifacts/<ident>/...`, whatever the
operator's own base (ours puts its process directory, `operator-*`, first).
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

_KEPT = ("job_events", "command", "status", "rc", "stdout")
SWEEP = 0.2


class RunMirror(FileSystemEventHandler):
    """Mirrors the artifacts under `watched` into `mirror`; `skip` leading path parts
    (ours: 1, its `operator-*` directory) are dropped."""

    def __init__(self, watched: Path, mirror: Path, *, skip: int) -> None:
        self.watched = watched
        self.mirror = mirror
        self.skip = skip
        self._lock = threading.Lock()
        self._observer: Observer | None = None  # type: ignore[valid-type]
        self._stopping = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._complete: set[str] = set()
        """Run directories whose status is mirrored: the sweep skips them."""

    def start(self) -> None:
        # A directory removed and made again (a CR's data directory) can get its old
        # inotify watch descriptor back: watchdog warns from its thread and goes on.
        warnings.filterwarnings(
            "ignore", message=r"Callback with id .* already exists", category=RuntimeWarning
        )
        self.watched.mkdir(parents=True, exist_ok=True)
        self.mirror.mkdir(parents=True, exist_ok=True)
        observer = Observer()
        observer.schedule(self, str(self.watched), recursive=True)
        observer.start()
        self._observer = observer
        self._sweeper = threading.Thread(target=self._sweep_often, daemon=True)
        self._sweeper.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._sweeper is not None:
            self._sweeper.join(timeout=10)
            self._sweeper = None
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=10)
            self._observer = None
        self.sweep()

    def _sweep_often(self) -> None:
        while not self._stopping.wait(SWEEP):
            self.sweep()

    def on_created(self, event: FileSystemEvent) -> None:
        self._take(str(event.src_path))

    def on_modified(self, event: FileSystemEvent) -> None:
        self._take(str(event.src_path))

    def on_moved(self, event: FileSystemEvent) -> None:
        self._take(str(event.dest_path))

    def sweep(self) -> None:
        """Link whatever is there and not mirrored yet."""
        for root, dirs, files in os.walk(self.watched):
            dirs[:] = [d for d in dirs if os.path.join(root, d) not in self._complete]
            if "artifacts" not in Path(root).parts:
                continue
            for name in files:
                self._take(os.path.join(root, name))
            if "status" in files and Path(root).parent.name == "artifacts":
                self._complete.add(root)

    def _target(self, source: Path) -> Path | None:
        try:
            parts = source.relative_to(self.watched).parts[self.skip :]
        except ValueError:
            return None
        if "artifacts" not in parts:
            return None
        index = parts.index("artifacts")
        rest = parts[index + 1 :]
        # artifacts/<ident>/<file> or artifacts/<ident>/job_events/<event>.json
        if len(rest) < 2 or rest[0] == "latest" or rest[1] not in _KEPT:
            return None
        if rest[1] == "job_events" and (len(rest) != 3 or rest[2].endswith("-partial.json")):
            return None
        return self.mirror.joinpath(*parts)

    def _take(self, path: str) -> None:
        source = Path(path)
        target = self._target(source)
        if target is None or target.exists() or source.is_symlink() or not source.is_file():
            return
        with self._lock, contextlib.suppress(OSError):
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(source, target)
