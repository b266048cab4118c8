"""File-based catalogs (FBC): one package's `olm.package`, `olm.channel` and `olm.bundle`
documents, built from bundle directories (pure, apart from `load_documents`).

Layout, as opm documents it: `catalog/<package>/index.yaml`, documents separated by
`---`, package first, then channels by name, then bundles by version. Each `olm.bundle`
carries `olm.package` and `olm.gvk` properties (`olm.gvk.required` for required CRDs)
and one `olm.bundle.object` per manifest (base64 of its JSON) so that `opm serve` hands
the CSV and CRDs to OLM without pulling the bundle image. Adding a version to an existing
catalog appends a channel entry that `replaces` the channel head (or the CSV's own
`spec.replaces`, then also `skips` the head, so the channel keeps a single head), which
is the upgrade edge OLM follows.
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging import versions, yamlio
from runner.devtools.packaging.csv import operator_image
from runner.devtools.packaging.kustomize import image_name
from runner.devtools.packaging.loader import LoadedBundle
from runner.errors import ConfigError
from runner.structs import bodies
from runner.util import yamlwriter
from runner.util.yamlwriter import CANONICAL

Obj = dict[str, Any]
OPM_IMAGE = "quay.io/operator-framework/opm:v1.73.0"
CONFIGS_LABEL = "operators.operatorframework.io.index.configs.v1"


@dataclass(frozen=True)
class CatalogOptions:
    package: str
    channel: str | None = None  # default: the bundle's channels
    # default: <operator image name>-bundle:v<version>; "" leaves the image empty, so OLM
    # installs from the olm.bundle.object properties without unpacking an image
    bundle_image: str | None = None


def _property(kind: str, value: Any) -> Obj:
    return {"type": kind, "value": value}


def default_bundle_image(csv: Obj) -> str:
    spec = csv.get("spec") or {}
    deployments = ((spec.get("install") or {}).get("spec") or {}).get("deployments") or []
    image = bodies.annotations(csv).get(olm.CONTAINER_IMAGE) or operator_image(deployments)
    if not image:
        raise ConfigError("the CSV names no operator image; pass --bundle-image")
    return f"{image_name(str(image))}-bundle:v{spec.get('version')}"


def bundle_document(bundle: LoadedBundle, *, package: str, image: str) -> Obj:
    """The `olm.bundle` document of a loaded bundle directory."""
    csv = bundle.csv
    if csv is None:
        raise ConfigError(f"{bundle.directory}: needs exactly one ClusterServiceVersion")
    spec = csv.get("spec") or {}
    gvks = set()
    for _, crd in bundle.crds:
        crd_spec = crd.get("spec") or {}
        kind = (crd_spec.get("names") or {}).get("kind")
        for version in crd_spec.get("versions") or []:
            gvks.add((str(crd_spec.get("group")), str(kind), str(version.get("name"))))
    required = set()
    for entry in (spec.get("customresourcedefinitions") or {}).get("required") or []:
        group = str(entry.get("name", "")).partition(".")[2]
        required.add((group, str(entry.get("kind")), str(entry.get("version"))))
    properties = [_property("olm.gvk", {"group": g, "kind": k, "version": v}) for g, k, v in gvks]
    properties += [
        _property("olm.gvk.required", {"group": g, "kind": k, "version": v}) for g, k, v in required
    ]
    properties.append(
        _property("olm.package", {"packageName": package, "version": str(spec.get("version"))})
    )
    properties.sort(key=lambda p: (p["type"], yamlio.to_json(p["value"])))
    for _, obj in bundle.objects():
        data = base64.b64encode(yamlio.to_json(obj).encode("utf-8")).decode("ascii")
        properties.append(_property("olm.bundle.object", {"data": data}))
    related = [
        {"image": str(r.get("image")), "name": str(r.get("name", ""))}
        for r in spec.get("relatedImages") or []
    ]
    seen = {r["image"] for r in related}
    deployments = ((spec.get("install") or {}).get("spec") or {}).get("deployments") or []
    extra = {image}
    for deployment in deployments:
        pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
            extra.add(str(container.get("image", "")))
    related += [{"image": i, "name": ""} for i in sorted(extra - seen) if i]
    return {
        "schema": "olm.bundle",
        "name": str(bodies.metadata(csv).get("name")),
        "package": package,
        "image": image,
        "properties": properties,
        "relatedImages": related,
    }


def _version(document: Obj) -> versions.Version:
    for prop in document.get("properties") or []:
        if prop.get("type") == "olm.package":
            return versions.Version(str(prop["value"]["version"]))
    raise ConfigError(f"bundle {document.get('name')!r} has no olm.package property")


def channel_head(channel: Obj) -> str | None:
    """The entry nothing else replaces or skips (the newest of several, by name order)."""
    entries = channel.get("entries") or []
    replaced = {e.get("replaces") for e in entries} | {
        s for e in entries for s in e.get("skips") or []
    }
    heads = [str(e["name"]) for e in entries if e["name"] not in replaced]
    return heads[-1] if heads else None


def add_bundle(documents: list[Obj], bundle: LoadedBundle, options: CatalogOptions) -> list[Obj]:
    """`documents` (one catalog, maybe empty) with the bundle added as the new head."""
    csv = bundle.csv
    if csv is None:
        raise ConfigError(f"{bundle.directory}: needs exactly one ClusterServiceVersion")
    annotations = bundle.annotations or {}
    result = copy.deepcopy(documents)
    package, name = options.package, str(csv["metadata"]["name"])
    # An empty image (not None) is kept: OLM then installs from the embedded objects.
    image = default_bundle_image(csv) if options.bundle_image is None else options.bundle_image
    new_bundle = bundle_document(bundle, package=package, image=image)
    channels = (
        [options.channel]
        if options.channel
        else [c.strip() for c in annotations.get(olm.CHANNELS, "").split(",") if c.strip()]
    )
    if not channels:
        raise ConfigError("the bundle names no channel; pass --channel")
    mine = [d for d in result if d.get("package", d.get("name")) == package]
    if not any(d.get("schema") == "olm.package" for d in mine):
        default = annotations.get(olm.DEFAULT_CHANNEL) or channels[0]
        if default not in channels:
            default = channels[0]
        result.insert(0, {"schema": "olm.package", "name": package, "defaultChannel": default})
    result = [
        d
        for d in result
        if not (
            d.get("schema") == "olm.bundle"
            and d.get("package") == package
            and d.get("name") == name
        )
    ]
    result.append(new_bundle)
    meta_annotations = bodies.annotations(csv)
    for channel_name in channels:
        channel = next(
            (
                d
                for d in result
                if d.get("schema") == "olm.channel"
                and d.get("package") == package
                and d.get("name") == channel_name
            ),
            None,
        )
        if channel is None:
            channel = {
                "schema": "olm.channel",
                "name": channel_name,
                "package": package,
                "entries": [],
            }
            result.append(channel)
        channel["entries"] = [e for e in channel["entries"] if e.get("name") != name]
        entry: Obj = {"name": name}
        head = channel_head(channel)
        replaces = (csv.get("spec") or {}).get("replaces") or head
        if replaces:
            entry["replaces"] = replaces
        skips = list((csv.get("spec") or {}).get("skips") or [])
        if head and head != replaces and head not in skips:
            skips.append(head)  # else the channel would have two heads, which OLM refuses
        if skips:
            entry["skips"] = skips
        if meta_annotations.get(olm.SKIP_RANGE):
            entry["skipRange"] = meta_annotations[olm.SKIP_RANGE]
        channel["entries"].append(entry)
    return sort_documents(result)


def sort_documents(documents: list[Obj]) -> list[Obj]:
    """Packages, then channels by name, then bundles by version, then anything else."""

    def key(document: Obj) -> tuple[Any, ...]:
        schema = document.get("schema")
        package = str(document.get("package", document.get("name", "")))
        if schema == "olm.package":
            return (package, 0, "")
        if schema == "olm.channel":
            return (package, 1, str(document.get("name")))
        if schema == "olm.bundle":
            return (package, 2, _version(document))
        return (package, 3, yamlio.to_json(document))

    packages = sorted({key(d)[0] for d in documents})
    ordered: list[Obj] = []
    for package in packages:
        group = [d for d in documents if key(d)[0] == package]
        for rank in (0, 1, 2, 3):
            ordered += sorted((d for d in group if key(d)[1] == rank), key=lambda d: key(d)[2])
    return ordered


def render(documents: list[Obj], *, fmt: str = "yaml") -> str:
    if fmt == "json":
        return "".join(json.dumps(d, indent=4, sort_keys=True) + "\n" for d in documents)
    return yamlwriter.dump_all(documents, style=CANONICAL)


def catalog_dockerfile(catalog_dir: str) -> str:
    """A catalog image: opm serves /configs; the cache is built at image build time."""
    return "\n".join(
        [
            "# The opm image carries /bin/opm and /bin/grpc_health_probe; OPM_IMAGE may name",
            "# another image with /bin/opm (e.g. one built locally, see docs/images.md).",
            f"ARG OPM_IMAGE={OPM_IMAGE}",
            "FROM ${OPM_IMAGE} AS builder",
            f"ADD {catalog_dir} /configs",
            'RUN ["/bin/opm", "serve", "/configs", "--cache-dir=/tmp/cache", "--cache-only"]',
            "",
            "FROM ${OPM_IMAGE}",
            'ENTRYPOINT ["/bin/opm"]',
            'CMD ["serve", "/configs", "--cache-dir=/tmp/cache"]',
            "COPY --from=builder /configs /configs",
            "COPY --from=builder /tmp/cache /tmp/cache",
            f"LABEL {CONFIGS_LABEL}=/configs",
            "",
        ]
    )


def load_documents(directory: Path, *, package: str) -> list[Obj]:
    """The documents of `package` in an existing catalog directory (YAML or JSON files)."""
    documents: list[Obj] = []
    for path in sorted(directory.rglob("*")):
        if path.suffix in (".yaml", ".yml"):
            documents += [d for d in yamlio.load_all(path) if isinstance(d, dict)]
        elif path.suffix == ".json":
            text, decoder, index = path.read_text(encoding="utf-8"), json.JSONDecoder(), 0
            while index < len(text):
                if text[index].isspace():
                    index += 1
                    continue
                try:
                    document, index = decoder.raw_decode(text, index)
                except json.JSONDecodeError as exc:
                    raise ConfigError(f"{path}: not valid JSON: {exc}") from exc
                documents.append(document)
    return [d for d in documents if d.get("package", d.get("name")) == package]
