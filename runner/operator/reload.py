"""Live reload (`run --reload`): edit a role or watches.yaml, see the cluster follow.

One watchdog observer watches watches.yaml, every role and playbook the watches use, the
roles path and the user's collections path. Its events (from watchdog's thread) are
moved onto the event loop, filtered (editor swap files, `__pycache__`, `.git`,
artifacts) and debounced, so an editor's burst of writes is one reload. The reloader
works beside the controllers, through their gates (`runner.operator.reloadgate`): from the first
event until the batch is checked, the watches using the file start no new run, and when a
run already in flight fails to start (it read the file half-saved) the reloader puts the
CR's status back as it was. Then:

- a role/playbook file changed: it is checked first (YAML parses; a playbook passes
  `ansible-playbook --syntax-check`). Broken: reported once, with file, line and message,
  and the watches using it are paused, so their CRs keep their last good status instead
  of turning to Failure on every save. Good: those watches resume and every CR of every
  watch whose role or playbook tree contains the file is reconciled again (all role
  watches when the file is somewhere on the roles or collections path);
- watches.yaml changed: it is parsed with the start-up code. Invalid: one clear error,
  the running configuration stays. Valid: new GVKs get controllers, removed ones are
  stopped (their CRs and finalizers are left alone, and the log says so), changed ones are
  restarted, the others keep running untouched. Runs in flight always finish. A
  finalizer no watch handles any more is removed, with a warning, so that no deletion
  hangs for ever (its role does not run): from every CR of a watch whose finalizer was
  removed or renamed, and from the CRs being deleted of a removed watch (its other CRs
  keep it, for the watch to come back). The roles and playbooks of new watches are
  watched from then on.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import ObservedWatch

from runner.engine.manager import Manager
from runner.errors import ConfigError
from runner.k8s.apierrors import Conflict, NotFound
from runner.k8s.client import KubeClient
from runner.operator.builder import ControllerBuilder
from runner.operator.finalizers import release_finalizer
from runner.operator.reloadgate import ReloadGate
from runner.status import conditions
from runner.structs import GVK, NamespacedName
from runner.watches.model import Watch, spec_template_warning

log = logging.getLogger("ansible-operator.reload")

DEBOUNCE_SECONDS = 0.5
_RESTORE_ATTEMPTS = 5
_IGNORED_DIRS = frozenset(("__pycache__", ".git", "artifacts", ".mypy_cache", ".pytest_cache"))
_YAML_SUFFIXES = (".yml", ".yaml")

WatchesLoader = Callable[[], tuple[Watch, ...]]


# -- pure decisions ----------------------------------------------------------------------


def is_ignored(path: Path) -> bool:
    """Editor noise and generated files: swap/backup files, caches, VCS and artifacts."""
    name = path.name
    if any(part in _IGNORED_DIRS for part in path.parts):
        return True
    return (
        name.endswith(("~", ".swp", ".swx", ".swo", ".tmp", ".pyc"))
        or name.startswith((".#", "#"))
        or name == "4913"  # vim's probe file
    )


def watch_trees(watch: Watch) -> list[Path]:
    """The files and directories whose content a watch's runs depend on."""
    finalizer = watch.finalizer
    roles = [watch.role, finalizer.role if finalizer else None]
    playbooks = [watch.playbook, finalizer.playbook if finalizer else None]
    # A playbook's neighbours (its vars files, its roles/ directory) count too.
    return [r for r in roles if r is not None] + [p.parent for p in playbooks if p is not None]


def affected(path: Path, watches: Sequence[Watch], shared: Sequence[Path]) -> set[GVK]:
    """Watches whose runs may change because `path` changed; every role-based watch when
    it lies on a shared search path (roles or collections) and no tree claims it."""
    hit = {w.gvk for w in watches if any(_within(path, tree) for tree in watch_trees(w))}
    if hit:
        return hit
    if any(_within(path, root) for root in shared):
        return {w.gvk for w in watches}
    return set()


def watched_roots(watches_dir: Path, trees: Iterable[Path]) -> list[tuple[Path, bool]]:
    """(path, recursive) to watch: `trees` (the watches' roles and playbook directories,
    the shared paths) with all below them, and the watches file's directory for its own
    entries only (a project keeps much there that no run reads: a virtualenv, a local
    cluster's state, whose constant writes would flood the watch)."""
    roots = {watches_dir: False}
    roots.update((tree, True) for tree in trees)
    # A root inside a recursive one would report each event twice.
    below = [root for root, recursive in roots.items() if recursive]
    return sorted(
        (root, recursive)
        for root, recursive in roots.items()
        if not any(other != root and other in root.parents for other in below)
    )


def diff(old: Sequence[Watch], new: Sequence[Watch]) -> tuple[list[Watch], list[GVK], list[Watch]]:
    """(added, removed, changed) between two watch lists, by GVK."""
    before = {w.gvk: w for w in old}
    after = {w.gvk: w for w in new}
    added = [w for gvk, w in after.items() if gvk not in before]
    removed = [gvk for gvk in before if gvk not in after]
    changed = [w for gvk, w in after.items() if gvk in before and before[gvk] != w]
    return added, removed, changed


def dropped_finalizers(old: Sequence[Watch], new: Sequence[Watch]) -> list[tuple[GVK, str]]:
    """(GVK, finalizer name) of every finalizer the new watches no longer handle: its
    watch was removed, or its finalizer removed or renamed."""
    after = {w.gvk: w for w in new}
    dropped = []
    for watch in old:
        if watch.finalizer is None:
            continue
        now = after.get(watch.gvk)
        if now is None or now.finalizer is None or now.finalizer.name != watch.finalizer.name:
            dropped.append((watch.gvk, watch.finalizer.name))
    return dropped


def check_yaml(path: Path) -> str | None:
    """None when `path` is not YAML or parses; else `file:line: message`."""
    if path.suffix not in _YAML_SUFFIXES or not path.is_file():
        return None
    try:
        yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        return f"{path}{line}: {err.problem or err}"
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as err:
        return f"{path}: {err}"
    return None


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


# -- the watcher -------------------------------------------------------------------------


class _Forwarder(FileSystemEventHandler):
    """Hands watchdog's events (its thread) to the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sink: Callable[[Path], None]) -> None:
        self._loop = loop
        self._sink = sink

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if raw:
                path = Path(os.fsdecode(raw))
                if not is_ignored(path):
                    self._loop.call_soon_threadsafe(self._sink, path)


class Reloader:
    """Applies file changes to a running `Manager` (see the module docstring)."""

    def __init__(
        self,
        manager: Manager,
        *,
        builder: ControllerBuilder,
        watches: Sequence[Watch],
        namespaces: Sequence[str] | None,
        client: KubeClient,
        watches_file: Path,
        load_watches: WatchesLoader,
        shared_paths: Iterable[Path],
        on_watches: Callable[[tuple[Watch, ...]], None] = lambda _watches: None,
        environ: dict[str, str] | None = None,
    ) -> None:
        self._manager = manager
        self._builder = builder
        self._namespaces = namespaces
        self._client = client
        self._watches_file = watches_file.resolve()
        self._load = load_watches
        self._shared = [p.resolve() for p in shared_paths if p.exists()]
        self._on_watches = on_watches
        self._environ = environ
        self._watches = tuple(watches)
        self._pending: set[Path] = set()
        self._held: set[GVK] = set()  # watches holding runs until the pending batch is checked
        self._timer: asyncio.TimerHandle | None = None
        self._broken: dict[Path, str] = {}  # file -> the error reported for it
        self._observer: Observer | None = None  # type: ignore[valid-type]
        self._handler: _Forwarder | None = None
        self._scheduled: dict[tuple[Path, bool], ObservedWatch] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    def start(self) -> None:
        observer = Observer()
        observer.daemon = True
        observer.start()
        self._observer = observer
        self._handler = _Forwarder(asyncio.get_running_loop(), self._changed)
        roots = self._watch_roots()
        shown = (f"{root}{os.sep}**" if recursive else str(root) for root, recursive in roots)
        log.info("live reload on: watching %s", ", ".join(shown))

    def _watch_roots(self) -> list[tuple[Path, bool]]:
        """Watch the roots the current watches need (and no others); return them."""
        roots = self._roots()
        if self._observer is None or self._handler is None:
            return roots
        for root in set(self._scheduled) - set(roots):
            self._observer.unschedule(self._scheduled.pop(root))
        for path, recursive in roots:
            if (path, recursive) not in self._scheduled:
                self._scheduled[path, recursive] = self._observer.schedule(
                    self._handler, str(path), recursive=recursive and path.is_dir()
                )
        return roots

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._observer is not None:
            self._observer.stop()
            await asyncio.to_thread(self._observer.join, 5)
            self._observer = None
            self._scheduled.clear()
        for task in list(self._tasks):
            task.cancel()

    def _roots(self) -> list[tuple[Path, bool]]:
        trees = [tree for watch in self._watches for tree in watch_trees(watch) if tree.exists()]
        return watched_roots(self._watches_file.parent, [*trees, *self._shared])

    def _changed(self, path: Path) -> None:
        # The file may be half-saved: hold new runs of the watches using it until the
        # batch is checked, and tell runs in flight now, not after the debounce, so that
        # such a run keeps the CR's status (see the reconciler).
        for gvk in affected(path, self._watches, self._shared):
            gate = self._gate(gvk)
            if gate is not None:
                gate.note_edit()
                self._held.add(gvk)
        self._pending.add(path)
        if self._timer is not None:
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(DEBOUNCE_SECONDS, self._flush)

    def _flush(self) -> None:
        self._timer = None
        batch, self._pending = self._pending, set()
        held, self._held = self._held, set()
        task = asyncio.create_task(self._apply_and_release(batch, held))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _apply_and_release(self, paths: set[Path], held: set[GVK]) -> None:
        try:
            await self.apply(paths)
        finally:
            for gvk in held - self._held:  # not edited again meanwhile
                gate = self._gate(gvk)
                if gate is not None:
                    gate.checked()

    def _gate(self, gvk: GVK) -> ReloadGate | None:
        """The gate of the controller of `gvk` (None: no such watch), whose interrupted
        runs this reloader restores."""
        gate, watch = self._builder.gate(gvk), self._builder.watch(gvk)
        if gate is None or watch is None or self._manager.controller(gvk) is None:
            return None
        gate.attach(partial(restore_status, self._client, watch))
        return gate

    async def apply(self, paths: set[Path]) -> None:
        """Handle one debounced batch of changed paths."""
        async with self._lock:
            if any(p.resolve() == self._watches_file for p in paths if p.exists()) or (
                self._watches_file in paths
            ):
                await self._reload_watches()
            files = {p for p in paths if p.resolve() != self._watches_file}
            if files:
                await self._files_changed(files)

    async def _reload_watches(self) -> None:
        try:
            new = self._load()
        except ConfigError as err:
            log.error("watches.yaml not reloaded, the running configuration stays: %s", err)
            return
        added, removed, changed = diff(self._watches, new)
        if not (added or removed or changed):
            log.info("watches.yaml reloaded: no change")
            return
        dropped = dropped_finalizers(self._watches, new)
        self._watches = new
        self._on_watches(new)
        for gvk in removed:
            log.info("stopped watching %s; its CRs and finalizers are left as they are", gvk)
            await self._manager.remove(gvk)
        for watch in changed:
            log.info("restarting the controller of %s with its new settings", watch.gvk)
            await self._manager.replace(self._builder.build(watch))
        for watch in added:
            log.info("started watching %s", watch.gvk)
            await self._manager.add(self._builder.build(watch))
        for gvk, finalizer in dropped:
            # Nothing would ever remove it: CRs being deleted would hang for ever. A watch
            # that stays says it wants no such finalizer; a removed one may come back and
            # find its other CRs as they were.
            await release_finalizer(
                self._client,
                gvk,
                finalizer,
                namespaces=self._namespaces,
                only_deleting=gvk in removed,
            )
        for watch in (*changed, *added):
            if (warning := spec_template_warning(watch)) is not None:
                log.warning("%s", warning)
        self._watch_roots()

    async def _files_changed(self, files: set[Path]) -> None:
        targets: set[GVK] = set()
        for path in sorted(files):
            targets |= affected(path, self._watches, self._shared)
        if not targets:
            return
        problems = [p for p in (check_yaml(path) for path in files) if p is not None]
        problems += await self._syntax_problems(targets)
        for path in files:
            self._broken.pop(path, None)
        if problems:
            for problem in problems:
                if problem not in self._broken.values():
                    log.error("not reloading, fix this first: %s", problem)
            for path in files:
                self._broken[path] = problems[0]
            for gvk in targets:
                if (gate := self._gate(gvk)) is not None:
                    gate.pause(problems[0])
            return
        if self._broken:
            return  # another file is still broken
        for gvk in sorted(targets):
            controller, gate = self._manager.controller(gvk), self._builder.gate(gvk)
            if controller is None or gate is None:
                continue
            gate.resume()
            controller.enqueue_all()
            log.info("reloaded: reconciling every %s again", gvk.kind)

    async def _syntax_problems(self, targets: set[GVK]) -> list[str]:
        problems = []
        for watch in self._watches:
            if watch.gvk in targets and watch.playbook is not None:
                problem = await syntax_check(watch.playbook, self._environ)
                if problem:
                    problems.append(problem)
        return problems


async def restore_status(
    client: KubeClient, watch: Watch, key: NamespacedName, before: Mapping[str, Any] | None
) -> None:
    """Give the CR `key` of `watch` the conditions its status had in `before` again (what
    the role wrote into the status stays): its run read a file being edited."""
    if not watch.manage_status:
        return
    for _ in range(_RESTORE_ATTEMPTS):
        try:
            obj = await client.get(watch.gvk, name=key.name, namespace=key.namespace or None)
            status = obj.get("status") if isinstance(obj.get("status"), Mapping) else None
            restored = conditions.restored(status, before)
            if restored == status:
                return
            await client.replace_status(watch.gvk, obj={**obj, "status": restored})
            return
        except NotFound:
            return
        except Conflict:
            continue
    log.warning("%s %s: status not put back, it kept changing", watch.gvk.kind, key)


async def syntax_check(playbook: Path, environ: dict[str, str] | None) -> str | None:
    """`ansible-playbook --syntax-check`; None when it passes, else its message."""
    command = Path(sys.executable).with_name("ansible-playbook")
    process = await asyncio.create_subprocess_exec(
        str(command) if command.exists() else "ansible-playbook",
        "--syntax-check",
        "-i",
        "localhost,",
        str(playbook),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=environ,
    )
    output, _ = await process.communicate()
    if process.returncode == 0:
        return None
    text = output.decode(errors="replace").strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return f"{playbook}: " + " ".join(lines[:6])
