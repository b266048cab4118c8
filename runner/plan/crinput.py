"""The custom resource a plan starts from, as the reconcile would find it.

From a file: the cluster's CR with the file's top-level fields, labels and annotations
(a dry-run update), or, when the cluster does not have it, a dry-run create of the file
(the CRD's schema and defaults apply; the answer's uid is what the run's owner
references point to). From the cluster (`--cr KIND/NAME`): its CR. Then `--set` and
`--patch`, applied here and sent as a dry run too; `--delete`: a `deletionTimestamp` and
the watch's finalizer. The result is the first entry of the plan's overlay. The
namespace is the file's, else `--namespace`, else the kubeconfig context's, else
`default`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import yaml

from runner.errors import ConfigError
from runner.k8s.apierrors import APIError, NotFound
from runner.k8s.client import KubeClient
from runner.k8s.discovery import APIResource
from runner.k8s.kubeconfig import locate
from runner.plan import patches
from runner.plan.overlay import ObjectKey, Overlay
from runner.plan.upstream import Upstream
from runner.structs import GVK, bodies
from runner.watches.model import Watch

__all__ = ["CRInput", "PlannedCR", "prepare"]


@dataclass(frozen=True, kw_only=True)
class CRInput:
    """The custom resource to plan for: `obj` (from a file) or `target` (`KIND/NAME` in
    the cluster), then `assignments` (`--set`) and `patch` (`--patch`: a merge patch, or
    a JSON patch when a list) applied to it; `delete`: plan its deletion."""

    obj: Mapping[str, Any] | None = None
    source: str = "CR"
    target: str | None = None
    namespace: str | None = None
    assignments: tuple[str, ...] = ()
    patch: Any = None
    delete: bool = False


@dataclass
class PlannedCR:
    """The CR as the reconcile starts from it (`planned`, also in the overlay), the
    cluster's (`live`, None: it has none) and its watch."""

    watch: Watch
    resource: APIResource
    key: ObjectKey
    live: dict[str, Any] | None
    planned: dict[str, Any]
    deleting: bool


async def prepare(
    client: KubeClient,
    upstream: Upstream,
    overlay: Overlay,
    *,
    watches: Sequence[Watch],
    kubeconfig: str | None,
    cr_input: CRInput,
) -> PlannedCR:
    """Find the CR's watch, read the cluster's CR and put the planned one into `overlay`
    (ConfigError naming what is wrong)."""
    if (cr_input.obj is None) == (cr_input.target is None):
        raise ConfigError("plan: give either a CR file or --cr KIND/NAME")
    if cr_input.obj is not None:
        watch = _watch_for_object(watches, cr_input.obj, source=cr_input.source)
    else:
        assert cr_input.target is not None
        watch = _watch_for_target(watches, cr_input.target)
    resource = await _resource(client, watch.gvk)
    namespace = _namespace(cr_input, resource, kubeconfig)
    name = (
        bodies.name(cr_input.obj)
        if cr_input.obj is not None
        else str(cr_input.target).partition("/")[2]
    )
    key = ObjectKey(resource.group, resource.plural, namespace, name)
    where = f"{watch.gvk.kind} {namespace}/{name}" if namespace else f"{watch.gvk.kind} {name}"
    live = await _read(client, watch.gvk, namespace, name)
    if cr_input.obj is None and live is None:
        raise ConfigError(f"--cr {cr_input.target}: there is no {where} in the cluster")
    wanted = _wanted(cr_input, live, namespace=namespace, source=cr_input.source)
    if live is None:
        planned = await upstream.dry_run(resource, "POST", wanted, what=f"creating {where}")
    elif wanted != live:
        planned = await upstream.dry_run(resource, "PUT", wanted, what=f"changing {where}")
    else:
        planned = copy.deepcopy(live)
    deleting = cr_input.delete or bool(bodies.deletion_timestamp(planned))
    if deleting:
        planned = _deleting(planned, watch)
    overlay.begin(key, live)
    overlay.write(key, planned, live=live)
    return PlannedCR(
        watch=watch, resource=resource, key=key, live=live, planned=planned, deleting=deleting
    )


def _wanted(
    cr_input: CRInput, live: Mapping[str, Any] | None, *, namespace: str, source: str
) -> dict[str, Any]:
    """The CR the plan starts from: the file's (over the cluster's, if it has one) or the
    cluster's, with --set and --patch applied."""
    if cr_input.obj is not None:
        obj = copy.deepcopy(dict(cr_input.obj))
        meta = dict(bodies.metadata(obj))
        if namespace:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        if live is None:
            for name in ("resourceVersion", "uid", "creationTimestamp", "generation"):
                meta.pop(name, None)
            obj["metadata"] = meta
            obj.pop("status", None)
            wanted = obj
        else:
            wanted = copy.deepcopy(dict(live))
            for field_name, value in obj.items():
                if field_name not in ("apiVersion", "kind", "metadata", "status"):
                    wanted[field_name] = value
            for field_name in set(live) - set(obj) - {"apiVersion", "kind", "metadata", "status"}:
                wanted.pop(field_name, None)
            merged = dict(bodies.metadata(live))
            for field_name in ("labels", "annotations"):
                if field_name in meta:
                    merged[field_name] = meta[field_name]
            wanted["metadata"] = merged
    else:
        assert live is not None
        wanted = copy.deepcopy(dict(live))
    for text in cr_input.assignments:
        try:
            path, value = patches.parse_assignment(text)
            wanted = patches.assign(wanted, path, value)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    if cr_input.patch is not None:
        try:
            if isinstance(cr_input.patch, list):
                patched = patches.json_patch(wanted, cr_input.patch)
            else:
                patched = patches.merge_patch(wanted, cr_input.patch)
        except patches.PatchError as err:
            raise ConfigError(f"--patch: {err}") from None
        if not isinstance(patched, dict):
            raise ConfigError("--patch: the patched CR is not an object")
        wanted = patched
    for name in ("apiVersion", "kind"):
        if live is not None and wanted.get(name) != live.get(name):
            raise ConfigError(f"{source}: the plan cannot change the CR's {name}")
    return wanted


def _deleting(obj: Mapping[str, Any], watch: Watch) -> dict[str, Any]:
    """`obj` being deleted: a deletionTimestamp, and the watch's finalizer (a reconcile
    added it long before; without it the operator would not run at all)."""
    meta = dict(bodies.metadata(obj))
    meta.setdefault("deletionTimestamp", datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    meta.setdefault("deletionGracePeriodSeconds", 0)
    if watch.finalizer is not None:
        finalizers = list(meta.get("finalizers") or [])
        if watch.finalizer.name not in finalizers:
            meta["finalizers"] = [*finalizers, watch.finalizer.name]
    return {**obj, "metadata": meta}


def _watch_for_object(watches: Sequence[Watch], obj: Mapping[str, Any], *, source: str) -> Watch:
    gvk = GVK.from_api_version(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    for watch in watches:
        if watch.gvk == gvk:
            return watch
    known = "; ".join(str(w.gvk) for w in watches) or "none"
    raise ConfigError(f"{source}: no watch for {gvk} (the watches file has: {known})")


def _watch_for_target(watches: Sequence[Watch], target: str) -> Watch:
    kind_part, slash, name = target.partition("/")
    if not slash or not kind_part or not name or "/" in name:
        raise ConfigError(f"--cr {target!r}: expected KIND/NAME (e.g. memcached/example)")
    kind, dot, group = kind_part.partition(".")
    found = [
        watch
        for watch in watches
        if kind.lower() in _spellings(watch.gvk.kind)
        and (not dot or group.lower() in (watch.gvk.group.lower(), _version_group(watch.gvk)))
    ]
    if len(found) == 1:
        return found[0]
    known = ", ".join(sorted({w.gvk.kind for w in watches})) or "none"
    if not found:
        raise ConfigError(f"--cr {target!r}: no watch for kind {kind_part} (watched: {known})")
    kinds = ", ".join(f"{w.gvk.kind}.{w.gvk.group}" for w in found)
    raise ConfigError(
        f"--cr {target!r}: {kind_part} matches several kinds ({kinds}): give KIND.GROUP"
    )


def _spellings(kind: str) -> set[str]:
    lowered = kind.lower()
    found = {lowered, f"{lowered}s", f"{lowered}es"}
    if lowered.endswith("y"):
        found.add(f"{lowered[:-1]}ies")
    return found


def _version_group(gvk: GVK) -> str:
    return f"{gvk.version}.{gvk.group}".lower()


async def _resource(client: KubeClient, gvk: GVK) -> APIResource:
    try:
        return await client.resource(gvk)
    except NotFound:
        raise ConfigError(
            f"the cluster does not serve {gvk}: is its CRD installed (`make install`)?"
        ) from None


def _namespace(cr_input: CRInput, resource: APIResource, kubeconfig: str | None) -> str:
    if not resource.namespaced:
        return ""
    own = bodies.namespace(cr_input.obj) if cr_input.obj is not None else ""
    if own and cr_input.namespace and own != cr_input.namespace:
        raise ConfigError(
            f"{cr_input.source}: {bodies.name(cr_input.obj)} is in namespace {own}, "
            f"not {cr_input.namespace}"
        )
    return own or cr_input.namespace or _context_namespace(kubeconfig) or "default"


def _context_namespace(kubeconfig: str | None) -> str:
    """The namespace of the kubeconfig's current context ("" when it sets none)."""
    try:
        source = locate(kubeconfig, os.environ)
        if source is None:
            return ""
        data = yaml.safe_load(Path(source.path).read_text(encoding="utf-8"))
    except (ConfigError, OSError, yaml.YAMLError):
        return ""
    if not isinstance(data, Mapping):
        return ""
    current = data.get("current-context")
    for context in data.get("contexts") or ():
        if isinstance(context, Mapping) and context.get("name") == current:
            inner = context.get("context")
            if isinstance(inner, Mapping):
                return str(inner.get("namespace") or "")
    return ""


async def _read(client: KubeClient, gvk: GVK, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        obj = await client.get(gvk, name=name, namespace=namespace or None)
    except NotFound:
        return None
    except APIError as err:
        raise ConfigError(f"cannot read {gvk.kind} {name}: {err}") from None
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return cast(dict[str, Any], obj)
