"""AnsiballZ payloads shared between runs, each checked against the files it was built from.

Before a Python module task runs, ansible-core packs the module and every module_utils
file it imports into a zip (the AnsiballZ payload): it parses each of those files to find
its imports — about 100 files, 0.4-0.8 s of CPU for `kubernetes.core.k8s`. It caches the
result under `<DEFAULT_LOCAL_TMP>/ansiballz_cache`, which lives as long as one
ansible-playbook process: every run through ansible-runner builds every payload again.

The fast backend's runs share a store (one directory per zygote) so a payload is built
once. ansible-core's own cache is keyed by module name only, which is not enough between
runs: `library/` modules of two roles share the name `ansible.legacy.<name>`, and a
role's `module_utils/` can change what a module imports. So the store's key is the
module's name, path and source, the compression, the AnsiballZ extensions, the
module_utils search path and the collection search path; and each entry records the
path, size, modification time and inode of every file that went into the payload — a
changed file, however small the change, means the entry is not used (and is rebuilt).
Payloads with content that comes from no file (redirect shims built from a collection's
routing metadata) or built for a debugger are not shared.

How it plugs in: `install()` wraps `module_common._find_module_utils` — a valid stored
payload is placed into this run's ansible cache before ansible-core looks there — and
what finds the files of a new payload, to note them, so that it can be stored after
ansible-core wrote it: `module_common.recursive_finder` (2.19: each source carries its
file as a tag) or the module_utils locators (2.18).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import pickle
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from runner.ansible.hooks import builder

__all__ = ["STORE_ENV", "install"]

STORE_ENV = "ANSIBLE_OPERATOR_PAYLOAD_STORE"
"""Names the store for the payload-sharing callback plugin loaded into each run."""

_FORMAT = 1
_ABSENT = -1
_recording = threading.local()


@dataclass(frozen=True)
class _Entry:
    """One stored payload: ansible-core's cache file and the files it depends on."""

    files: tuple[tuple[str, int, int, int], ...]
    """(path, size, mtime_ns, inode) of each source file; size -1: the file must not exist
    (ansible-core adds an empty `__init__.py` for a package directory without one)."""
    cached: bytes
    """The bytes of ansible-core's `ansiballz_cache` file for this module."""

    def valid(self) -> bool:
        for path, size, mtime_ns, inode in self.files:
            try:
                info = os.stat(path)
            except FileNotFoundError:
                if size == _ABSENT:
                    continue
                return False
            except OSError:
                return False
            if (info.st_size, info.st_mtime_ns, info.st_ino) != (size, mtime_ns, inode):
                return False
        return True


def install(store: str) -> None:
    """Share payloads through the directory `store` (created if needed)."""
    from ansible.executor import module_common

    if getattr(module_common, "_runner_payload_store", None):
        return
    real_find = module_common._find_module_utils
    record = _recording_2_19 if builder.modern(module_common) else _recording_2_18
    patches = record(module_common)  # looks everything up before anything is patched
    os.makedirs(store, mode=0o700, exist_ok=True)

    # `builder.arguments` binds a call by the signature this wraps (`__wrapped__`).
    @functools.wraps(real_find)
    def find_module_utils(*args: Any, **kwargs: Any) -> Any:
        called = builder.arguments(real_find, args, kwargs)
        located = _locate(module_common, called)
        if located is None:
            return real_find(*args, **kwargs)
        key, cache_file = located
        entry_path = os.path.join(store, f"{key}.pickle")
        if _use_stored(entry_path, cache_file):
            return real_find(*args, **kwargs)
        # Runs started together wait for one of them to build it, not each build it.
        with _locked(f"{entry_path}.lock"):
            if _use_stored(entry_path, cache_file):
                return real_find(*args, **kwargs)
            with _recorder() as files:
                built = real_find(*args, **kwargs)
            if files.usable and files.paths and os.path.isfile(cache_file):
                module_path = str(called.get("module_path") or "")
                _store(entry_path, files.paths | {module_path}, cache_file)
        return built

    for owner, name, patched in patches:
        setattr(owner, name, patched)
    module_common._find_module_utils = find_module_utils
    module_common._runner_payload_store = store


def _recording_2_19(module_common: Any) -> list[tuple[Any, str, Any]]:
    """2.19: the sources `recursive_finder` writes into the zip carry their file (an
    `Origin` tag); content without one was generated."""
    from ansible._internal._datatag._tags import Origin

    real_recursive = module_common.recursive_finder

    def recursive_finder(
        name: str, module_fqn: str, module_data: Any, zf: Any, *args: Any, **kwargs: Any
    ) -> Any:
        files = getattr(_recording, "files", None)
        if files is None:
            return real_recursive(name, module_fqn, module_data, zf, *args, **kwargs)
        return real_recursive(
            name, module_fqn, module_data, _RecordingZip(zf, files, Origin), *args, **kwargs
        )

    return [(module_common, "recursive_finder", recursive_finder)]


def _recording_2_18(module_common: Any) -> list[tuple[Any, str, Any]]:
    """2.18: the module_utils locators find each file (a legacy one by its import spec, a
    collection's through `pkgutil.get_data`); a redirect makes a generated shim."""
    legacy = module_common.LegacyModuleUtilLocator
    collection = module_common.CollectionModuleUtilLocator
    base = module_common.ModuleUtilLocatorBase
    real_legacy, real_collection = legacy._find_module, collection._find_module
    real_redirect = base._handle_redirect

    def legacy_find(self: Any, name_parts: Any) -> bool:
        found = bool(real_legacy(self, name_parts))
        files = getattr(_recording, "files", None)
        if found and files is not None:
            origin = getattr(getattr(self, "_info", None), "origin", None)
            if origin:
                files.paths.add(str(origin))
            else:
                files.usable = False
        return found

    def collection_find(self: Any, name_parts: Any) -> bool:
        found = bool(real_collection(self, name_parts))
        files = getattr(_recording, "files", None)
        if found and files is not None and len(name_parts) >= 6:
            # Both places `_find_module` reads, as `pkgutil.get_data` resolves them: the
            # one that is not there must stay absent.
            package = sys.modules.get(".".join(name_parts[0:3]))
            where = getattr(package, "__file__", None)
            if not where:
                files.usable = False
                return found
            resource = os.path.join(os.path.dirname(where), *name_parts[3:])
            files.paths.update({os.path.join(resource, "__init__.py"), f"{resource}.py"})
        return found

    def handle_redirect(self: Any, name_parts: Any) -> bool:
        redirected = bool(real_redirect(self, name_parts))
        files = getattr(_recording, "files", None)
        if redirected and files is not None:
            files.usable = False  # a shim made from routing metadata, not a file
        return redirected

    return [
        (legacy, "_find_module", legacy_find),
        (collection, "_find_module", collection_find),
        (base, "_handle_redirect", handle_redirect),
    ]


# -- the key ----------------------------------------------------------------------------


def _locate(module_common: Any, kwargs: dict[str, Any]) -> tuple[str, str] | None:
    """(store key, ansible-core's cache file) for a module, or None: not shareable."""
    module_path = kwargs.get("module_path")
    data = kwargs.get("b_module_data")
    if not isinstance(module_path, str) or not isinstance(data, bytes):
        return None
    try:
        fqn = module_common._get_ansible_module_fqn(module_path)
    except ValueError:
        # What ansible-core names a module outside a collection or ansible.modules.
        prefix = "ansible.legacy" if builder.modern(module_common) else "ansible.modules"
        fqn = f"{prefix}.{kwargs.get('module_name')}"
    try:
        from ansible.plugins.loader import module_utils_loader
        from ansible.release import __version__
        from ansible.utils.collection_loader import AnsibleCollectionConfig

        extensions = builder.extensions(module_common, kwargs.get("task_vars") or {})
    except Exception:
        return None
    if extensions.debugger:
        return None
    compression = str(kwargs.get("module_compression"))
    digest = hashlib.sha256()
    for part in (
        str(_FORMAT),
        __version__,
        fqn,
        module_path,
        compression,
        extensions.key,
        repr(module_utils_loader._get_paths(subdirs=False)),
        # A run's playbook directory is a collection path even without `collections/`.
        repr([path for path in AnsibleCollectionConfig.collection_paths if os.path.isdir(path)]),
    ):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(data)
    cache_file = builder.cache_file(
        module_common, fqn=fqn, compression=compression, found=extensions
    )
    return digest.hexdigest(), cache_file


# -- recording what a payload was built from --------------------------------------------


class _Files:
    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.usable = True


@contextlib.contextmanager
def _recorder() -> Iterator[_Files]:
    files = _Files()
    _recording.files = files
    try:
        yield files
    finally:
        _recording.files = None


class _RecordingZip:
    """The payload zip as `recursive_finder` sees it, noting each file's origin."""

    def __init__(self, zf: Any, files: _Files, origin: Any) -> None:
        self._zf = zf
        self._files = files
        self._origin = origin

    def __getattr__(self, name: str) -> Any:
        return getattr(self._zf, name)

    def writestr(self, zinfo: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        origin = self._origin.get_tag(data)
        path = getattr(origin, "path", None)
        if path:
            self._files.paths.add(str(path))
        elif data and not str(getattr(zinfo, "filename", "")).startswith("ansible/"):
            # Generated content (a redirect shim): nothing to check it against.
            self._files.usable = False
        return self._zf.writestr(zinfo, data, *args, **kwargs)


# -- the store --------------------------------------------------------------------------


def _use_stored(entry_path: str, cache_file: str) -> bool:
    """Put a valid stored payload where ansible-core looks for it; False if there is none."""
    entry = _load(entry_path)
    if entry is None or not entry.valid():
        return False
    _place(cache_file, entry.cached)
    return True


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """An exclusive lock between processes (`flock` on `path`)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _load(path: str) -> _Entry | None:
    try:
        with open(path, "rb") as handle:
            entry = pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
        return None
    return entry if isinstance(entry, _Entry) else None


def _store(path: str, sources: set[str], cache_file: str) -> None:
    files = []
    try:
        for source in sorted(sources):
            try:
                info = os.stat(source)
            except FileNotFoundError:
                files.append((source, _ABSENT, 0, 0))
                continue
            files.append((source, info.st_size, info.st_mtime_ns, info.st_ino))
        with open(cache_file, "rb") as handle:
            cached = handle.read()
    except OSError:
        return
    _write_atomically(path, pickle.dumps(_Entry(files=tuple(files), cached=cached)))


def _place(cache_file: str, cached: bytes) -> None:
    if not os.path.exists(cache_file):
        os.makedirs(os.path.dirname(cache_file), exist_ok=True)
        _write_atomically(cache_file, cached)


def _write_atomically(path: str, data: bytes) -> None:
    directory = os.path.dirname(path)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
