"""Single-layer OCI image archives written without a container tool or a registry.

The real node's pause image is `FROM scratch` plus one static binary; tests build images
the same way from static host binaries. An archive in the OCI image layout
(`oci-layout`, `index.json`, `blobs/sha256/...`) is what `ctr images import` reads; the
`io.containerd.image.name` annotation names the image it creates. Pure: the caller reads
the files and writes the archive.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_LAYER = "application/vnd.oci.image.layer.v1.tar"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_INDEX = "application/vnd.oci.image.index.v1+json"
# Fixed timestamps keep the archive (and the image's digest) a function of its inputs.
_EPOCH = 0
_CREATED = "1970-01-01T00:00:00Z"


@dataclass(frozen=True)
class ImageFile:
    """One regular file of the image: its content and mode."""

    content: bytes
    mode: int = 0o755


@dataclass(frozen=True)
class ImageSpec:
    """What the image holds and how it runs."""

    name: str
    files: Mapping[str, ImageFile]
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    user: str = ""
    env: Sequence[str] = ("PATH=/",)
    labels: Mapping[str, str] = field(default_factory=dict)
    architecture: str = "amd64"


def _layer(files: Mapping[str, ImageFile]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directories: set[str] = set()
        for path in sorted(files):
            parts = path.strip("/").split("/")
            for depth in range(1, len(parts)):
                directory = "/".join(parts[:depth])
                if directory not in directories:
                    directories.add(directory)
                    info = tarfile.TarInfo(directory)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    info.mtime = _EPOCH
                    tar.addfile(info)
            entry = files[path]
            info = tarfile.TarInfo("/".join(parts))
            info.size = len(entry.content)
            info.mode = entry.mode
            info.mtime = _EPOCH
            tar.addfile(info, io.BytesIO(entry.content))
    return buffer.getvalue()


def _descriptor(media_type: str, blob: bytes, **extra: object) -> dict[str, object]:
    return {
        "mediaType": media_type,
        "digest": f"sha256:{hashlib.sha256(blob).hexdigest()}",
        "size": len(blob),
        **extra,
    }


def _json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def image_archive(spec: ImageSpec) -> bytes:
    """The OCI image layout of `spec` as an uncompressed tar archive."""
    layer = _layer(spec.files)
    config = _json(
        {
            "architecture": spec.architecture,
            "os": "linux",
            "created": _CREATED,
            "config": {
                "Entrypoint": list(spec.entrypoint) or None,
                "Cmd": list(spec.cmd) or None,
                "User": spec.user,
                "Env": list(spec.env),
                "Labels": dict(spec.labels) or None,
            },
            "rootfs": {
                "type": "layers",
                "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"],
            },
            "history": [{"created": _CREATED, "created_by": "ansible-operator oci.image_archive"}],
        }
    )
    manifest = _json(
        {
            "schemaVersion": 2,
            "mediaType": _MANIFEST,
            "config": _descriptor(_CONFIG, config),
            "layers": [_descriptor(_LAYER, layer)],
        }
    )
    index = _json(
        {
            "schemaVersion": 2,
            "mediaType": _INDEX,
            "manifests": [
                _descriptor(
                    _MANIFEST,
                    manifest,
                    annotations={
                        "io.containerd.image.name": spec.name,
                        "org.opencontainers.image.ref.name": spec.name.rsplit(":", 1)[-1],
                    },
                    platform={"architecture": spec.architecture, "os": "linux"},
                )
            ],
        }
    )
    entries = {
        "oci-layout": _json({"imageLayoutVersion": "1.0.0"}),
        "index.json": index,
        **{
            f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}": blob
            for blob in (layer, config, manifest)
        },
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(directory)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            info.mtime = _EPOCH
            tar.addfile(info)
        for name, blob in entries.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            info.mode = 0o644
            info.mtime = _EPOCH
            tar.addfile(info, io.BytesIO(blob))
    return buffer.getvalue()
