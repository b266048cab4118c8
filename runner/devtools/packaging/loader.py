"""Read a bundle directory (and its bundle.Dockerfile) for the validator and the catalog.

Reading never fails on bad content: parse problems are recorded next to the file they
come from, so the validator can report all of them at once.
"""

from __future__ import annotations

import gzip
import io
import shlex
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runner.devtools.packaging import olmnames as olm
from runner.util.yamlerror import describe_yaml_error

Obj = dict[str, Any]


@dataclass
class Manifest:
    file: str  # relative to the bundle directory, e.g. manifests/foo.yaml
    obj: Obj | None = None
    error: str | None = None


@dataclass
class LoadedBundle:
    directory: Path
    manifests: list[Manifest] = field(default_factory=list)
    layout_errors: list[tuple[str, str]] = field(default_factory=list)  # (file, problem)
    annotations: dict[str, str] | None = None
    annotations_error: str | None = None
    dockerfile: Path | None = None
    labels: dict[str, str] | None = None
    dockerfile_error: str | None = None
    compressed_size: int = 0

    def objects(self, kind: str | None = None) -> list[tuple[str, Obj]]:
        return [
            (m.file, m.obj)
            for m in self.manifests
            if m.obj is not None and (kind is None or m.obj.get("kind") == kind)
        ]

    @property
    def csvs(self) -> list[tuple[str, Obj]]:
        return self.objects(olm.CSV_KIND)

    @property
    def csv(self) -> Obj | None:
        found = self.csvs
        return found[0][1] if len(found) == 1 else None

    @property
    def crds(self) -> list[tuple[str, Obj]]:
        return self.objects("CustomResourceDefinition")


def parse_dockerfile_labels(text: str) -> dict[str, str]:
    """LABEL key=value pairs of a Dockerfile, in order (continuations joined)."""
    labels: dict[str, str] = {}
    logical = text.replace("\\\n", " ")
    for line in logical.splitlines():
        stripped = line.strip()
        if not stripped.upper().startswith("LABEL "):
            continue
        tokens = shlex.split(stripped[len("LABEL ") :])
        if len(tokens) == 2 and "=" not in tokens[0]:  # legacy `LABEL key value`
            labels[tokens[0]] = tokens[1]
            continue
        for token in tokens:
            key, sep, value = token.partition("=")
            if not sep:
                raise ValueError(f"LABEL {token!r} is not key=value")
            labels[key] = value
    return labels


def _read_manifests(bundle: LoadedBundle, manifests_dir: Path) -> None:
    for path in sorted(manifests_dir.iterdir()):
        relative = f"{manifests_dir.name}/{path.name}"
        if path.is_dir():
            bundle.layout_errors.append((relative, "the manifests directory has a subdirectory"))
            continue
        if path.name.startswith("."):
            bundle.layout_errors.append((relative, "the manifests directory has a hidden file"))
            continue
        try:
            documents = [d for d in yaml.safe_load_all(path.read_text("utf-8")) if d is not None]
        except (OSError, yaml.YAMLError) as exc:
            bundle.manifests.append(Manifest(relative, error=_not_yaml(exc)))
            continue
        if len(documents) != 1 or not isinstance(documents[0], dict):
            bundle.manifests.append(
                Manifest(relative, error=f"expected one object, found {len(documents)} documents")
            )
            continue
        bundle.manifests.append(Manifest(relative, obj=documents[0]))


def _read_annotations(bundle: LoadedBundle, path: Path) -> None:
    if not path.is_file():
        bundle.annotations_error = "metadata/annotations.yaml is missing"
        return
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        bundle.annotations_error = f"metadata/annotations.yaml: {_not_yaml(exc)}"
        return
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), dict):
        bundle.annotations_error = "metadata/annotations.yaml: no `annotations` mapping"
        return
    bundle.annotations = {str(k): str(v) for k, v in data["annotations"].items()}


def _compressed_size(directory: Path) -> int:
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w") as tar,
    ):
        for part in ("manifests", "metadata"):
            if (directory / part).is_dir():
                tar.add(directory / part, arcname=part)
    return len(buffer.getvalue())


def find_dockerfile(directory: Path) -> Path | None:
    for candidate in (directory.parent / "bundle.Dockerfile", directory / "bundle.Dockerfile"):
        if candidate.is_file():
            return candidate
    return None


def load_bundle(directory: Path, *, dockerfile: Path | None = None) -> LoadedBundle:
    bundle = LoadedBundle(directory)
    manifests_dir = directory / olm.MANIFESTS_DIR.rstrip("/")
    if manifests_dir.is_dir():
        _read_manifests(bundle, manifests_dir)
    else:
        bundle.layout_errors.append(("manifests/", "the directory is missing"))
    if not (directory / "metadata").is_dir():
        bundle.layout_errors.append(("metadata/", "the directory is missing"))
    _read_annotations(bundle, directory / "metadata" / "annotations.yaml")
    bundle.dockerfile = dockerfile or find_dockerfile(directory)
    if bundle.dockerfile is not None:
        try:
            bundle.labels = parse_dockerfile_labels(bundle.dockerfile.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            bundle.dockerfile_error = f"{bundle.dockerfile.name}: {exc}"
    bundle.compressed_size = _compressed_size(directory)
    return bundle


def _not_yaml(exc: OSError | yaml.YAMLError) -> str:
    if isinstance(exc, yaml.YAMLError):
        return f"not valid YAML {describe_yaml_error(exc)}"
    return f"cannot read it: {exc}"
