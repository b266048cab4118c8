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
`module_common.recursive_finder` — to note which files a new payload was built from, so
it can be stored after ansible-core wrote it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import pickle
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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
    os.makedirs(store, mode=0o700, exist_ok=True)
    real_find = module_common._find_module_utils
    real_recursive = module_common.recursive_finder

    def find_module_utils(**kwargs: Any) -> Any:
        located = _locate(module_common, kwargs)
        if located is None:
            return real_find(**kwargs)
        key, cache_file = located
        entry_path = os.path.join(store, f"{key}.pickle")
        if _use_stored(entry_path, cache_file):
            return real_find(**kwargs)
        # Runs started together wait for one of them to build it, not each build it.
        with _locked(f"{entry_path}.lock"):
            if _use_stored(entry_path, cache_file):
                return real_find(**kwargs)
            with _recorder() as files:
                built = real_find(**kwargs)
            if files.usable and files.paths and os.path.isfile(cache_file):
                module_path = str(kwargs.get("module_path") or "")
                _store(entry_path, files.paths | {module_path}, cache_file)
        return built

    def recursive_finder(
        name: str, module_fqn: str, module_data: Any, zf: Any, *args: Any, **kwargs: Any
    ) -> Any:
        files = getattr(_recording, "files", None)
        if files is None:
            return real_recursive(name, module_fqn, module_data, zf, *args, **kwargs)
        return real_recursive(
            name, module_fqn, module_data, _RecordingZip(zf, files), *args, **kwargs
        )

    module_common._find_module_utils = find_module_utils
    module_common.recursive_finder = recursive_finder
    module_common._runner_payload_store = store


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
        fqn = f"ansible.legacy.{kwargs.get('module_name')}"
    try:
        from ansible import constants
        from ansible._internal._ansiballz import _builder
        from ansible.plugins.loader import module_utils_loader
        from ansible.release import __version__
        from ansible.utils.collection_loader import AnsibleCollectionConfig

        extensions = _builder.ExtensionManager.create(task_vars=kwargs.get("task_vars") or {})
    except Exception:
        return None
    if extensions.debugger_enabled:
        return None
    extension_key = "~".join(extensions.extension_names) if extensions.extension_names else "none"
    compression = str(kwargs.get("module_compression"))
    digest = hashlib.sha256()
    for part in (
        str(_FORMAT),
        __version__,
        fqn,
        module_path,
        compression,
        extension_key,
        repr(module_utils_loader._get_paths(subdirs=False)),
        # A run's playbook directory is a collection path even without `collections/`.
        repr([path for path in AnsibleCollectionConfig.collection_paths if os.path.isdir(path)]),
    ):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(data)
    cache_file = os.path.join(
        constants.DEFAULT_LOCAL_TMP, "ansiballz_cache", f"{fqn}-{compression}-{extension_key}"
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

    def __init__(self, zf: Any, files: _Files) -> None:
        self._zf = zf
        self._files = files

    def __getattr__(self, name: str) -> Any:
        return getattr(self._zf, name)

    def writestr(self, zinfo: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        from ansible._internal._datatag._tags import Origin

        origin = Origin.get_tag(data)
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
