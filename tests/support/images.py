"""Images for tests, built once and reused while their inputs stay the same.

The runtime image (top-level Dockerfile on the Debian base made here) and the memcached
sample's image are built with podman and tagged by a digest of everything they are built
from; a later session with the same inputs finds the tag and builds nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from runner.devtools import images
from runner.devtools.cluster import build
from support.operator import REPO

TOOL = "podman"
RUNTIME_INPUTS = ("Dockerfile", ".dockerignore", "image", "pyproject.toml", "README.md", "runner")
SAMPLE_INPUTS = ("sample.Dockerfile", "requirements.yml", "watches.yaml", "roles", "playbooks")
# The runtime image's ansible-core line (the Dockerfile's default).
RUNTIME_ARGS = {"BASE_IMAGE": images.LOCAL_BASE}


def cache() -> Path:
    return build.cache_root()


def env() -> dict[str, str]:
    return images.tool_environ(TOOL, cache())


def podman(*args: str, check: bool = True, timeout: float = 600) -> str:
    result = subprocess.run(
        [TOOL, *args], capture_output=True, text=True, env=env(), timeout=timeout, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def digest(paths: Iterable[str], extra: Mapping[str, str]) -> str:
    """Of the files' relative paths and contents (compiled files left out) and `extra`."""
    hasher = hashlib.sha256(json.dumps(sorted(extra.items())).encode())
    for name in sorted(paths):
        root = REPO / name
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                hasher.update(str(path.relative_to(REPO)).encode() + b"\0")
                hasher.update(path.read_bytes())
    return hasher.hexdigest()[:12]


def exists(tag: str) -> bool:
    return images.image_exists(TOOL, tag, env())


@contextlib.contextmanager
def _building(name: str) -> Iterator[None]:
    """One build of image `name` at a time on this machine: test processes running side
    by side (pytest-xdist) wait for the first build and then find its tag."""
    lock = cache() / "locks" / f"test-image-{name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def runtime_image() -> str:
    """The runtime image's tag, built unless an image of the same inputs exists."""
    tag = f"localhost/ansible-operator-test:{digest(RUNTIME_INPUTS, RUNTIME_ARGS)}"
    with _building("runtime"):
        if not exists(tag):
            images.build(
                TOOL,
                tag=tag,
                dockerfile=str(REPO / "Dockerfile"),
                context=str(REPO),
                cache=cache(),
                build_args=RUNTIME_ARGS,
            )
    return tag


def sample_image() -> str:
    """The memcached sample's image on top of `runtime_image()`: sample.Dockerfile names
    the runtime by its published name, which `--from` replaces (the shared tag of that
    name is left alone: other sessions may have built another runtime)."""
    runtime = runtime_image()
    tag = f"localhost/memcached-operator-test:{digest(SAMPLE_INPUTS, {'runtime': runtime})}"
    with _building("sample"):
        if not exists(tag):
            dockerfile = str(REPO / "sample.Dockerfile")
            podman(
                "build",
                "--network",
                "host",
                "--from",
                runtime,
                "-f",
                dockerfile,
                "-t",
                tag,
                str(REPO),
            )
    return tag


def layers(tag: str) -> list[tuple[int, str]]:
    """(size in bytes, the instruction that made it) of each layer, oldest first."""
    history = json.loads(podman("history", "--format", "json", tag))
    return [(int(entry.get("size", 0)), str(entry.get("CreatedBy", ""))) for entry in history][::-1]


def size(tag: str) -> int:
    return int(podman("image", "inspect", "--format", "{{.Size}}", tag).strip())
