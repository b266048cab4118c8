"""The images OLM's catalog operator starts pods from, built here and pushed to the
cluster's loopback registry.

- `--opmImage`: opm (from operator-registry, built here) with `grpc_health_probe`; bundle
  unpack Jobs run `opm alpha bundle extract` from it, and our catalog images are built
  on it (`images.ensure_opm_image`).
- `--util-image`: OLM's `cpb` and `copy-content` (from the OLM module the operators are
  built from) on the Debian base made here: the unpack Job's init container runs
  `/bin/cp -Rv /bin/cpb /util/cpb`, so the image needs a `cp`.

Each local tag names a digest of its inputs, so an image is built once per change of
its programs or Dockerfile; pushing an image the registry already holds only checks
its blobs.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner.devtools import images
from runner.devtools.cluster import build
from runner.devtools.cluster.components import olm_utilities
from runner.errors import ClusterError

Progress = Callable[[str], None]

UTIL_REPOSITORY = "localhost/ansible-operator-olm-util"
# Names in the registry (below its host:port).
OPM_NAME = "ansible-operator/opm"
UTIL_NAME = "ansible-operator/olm-util"


def util_dockerfile(base: str) -> str:
    return "\n".join(
        [
            "# OLM's helpers for bundle unpack Jobs and extract-content catalogs; the base",
            "# gives the `cp` the unpack Job's init container runs.",
            f"FROM {base}",
            "COPY cpb copy-content /bin/",
            "USER 1001",
            "",
        ]
    )


@dataclass(frozen=True)
class OLMImages:
    """The image names the catalog operator is started with."""

    opm: str
    util: str

    def catalog_flags(self) -> list[str]:
        return [f"--opmImage={self.opm}", f"--util-image={self.util}"]


def container_tool() -> str:
    """`$CONTAINER_TOOL` as the Makefile uses it; podman (Debian's) by default here."""
    return os.environ.get("CONTAINER_TOOL") or "podman"


def ensure_util_image(tool: str, cache: Path, *, progress: Progress = print) -> str:
    programs = build.ensure_built(
        [olm_utilities()[name] for name in ("cpb", "copy-content")], root=cache, progress=progress
    )
    base = images.ensure_base(tool, cache, progress=progress)
    dockerfile = util_dockerfile(base)
    version = olm_utilities()["cpb"].version
    tag = f"{UTIL_REPOSITORY}:{version}-{images.inputs_digest(dockerfile, programs)}"
    images.build_context_image(
        tool, tag=tag, dockerfile=dockerfile, files=programs, cache=cache, progress=progress
    )
    return tag


def tag_argv(tool: str, source: str, target: str) -> list[str]:
    return [tool, "tag", source, target]


def publish(tool: str, local: str, remote: str, *, cache: Path, progress: Progress) -> str:
    """Tag `local` as `remote` and push it; return `remote`."""
    env = images.tool_environ(tool, cache)
    tagged = subprocess.run(
        tag_argv(tool, local, remote), capture_output=True, text=True, env=env, check=False
    )
    if tagged.returncode != 0:
        raise ClusterError(f"{tool} tag {local} {remote} failed: {tagged.stderr.strip()}")
    images.push(tool, remote, cache=cache, progress=progress)
    return remote


def registry_name(registry: str, name: str, local_tag: str) -> str:
    """`<registry>/<name>:<the local tag's tag>` (the tag carries the inputs' digest)."""
    return f"{registry}/{name}:{local_tag.rpartition(':')[2]}"


def ensure_olm_images(
    registry: str, *, cache: Path, tool: str | None = None, progress: Progress = print
) -> OLMImages:
    """Build (when their inputs changed) and push the opm and util images to `registry`
    (`host:port`); return their names there."""
    chosen = tool or container_tool()
    images.check_tool(chosen)
    opm = images.ensure_opm_image(chosen, cache, progress=progress)
    util = ensure_util_image(chosen, cache, progress=progress)
    return OLMImages(
        opm=publish(
            chosen, opm, registry_name(registry, OPM_NAME, opm), cache=cache, progress=progress
        ),
        util=publish(
            chosen, util, registry_name(registry, UTIL_NAME, util), cache=cache, progress=progress
        ),
    )
