"""Small helpers over the Kubernetes Python client for tests: apply YAML, wait."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    message: str,
    interval: float = 0.1,
) -> T:
    """Call `probe` until it returns something truthy; fail with `message` and the last
    value seen after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s: {message}; last: {last!r}")
        time.sleep(interval)


def wait_steady(
    probe: Callable[[], T | None],
    *,
    quiet: float,
    timeout: float,
    message: str,
    interval: float = 0.2,
) -> T:
    """Call `probe` until it has returned the same value (not None) for `quiet` seconds,
    and return that value; fail with `message` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    value, since = probe(), time.monotonic()
    while value is None or time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s: {message}; last: {value!r}")
        time.sleep(interval)
        current = probe()
        if current is None or current != value:
            value, since = current, time.monotonic()
    return value


def documents(source: str | Path) -> list[dict[str, Any]]:
    text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    return [doc for doc in yaml.safe_load_all(text) if doc]


def apply(
    dyn: DynamicClient, source: str | Path | Iterable[dict[str, Any]], *, namespace: str = ""
) -> list[Any]:
    """Create each object (or replace it if it exists); namespaced ones go to `namespace`
    unless they name their own."""
    objects = documents(source) if isinstance(source, str | Path) else list(source)
    return [_apply_one(dyn, obj, namespace) for obj in objects]


def _apply_one(dyn: DynamicClient, obj: dict[str, Any], namespace: str, tries: int = 5) -> Any:
    """Create or replace `obj`; a conflict (another test process created or changed the
    same object meanwhile, e.g. a shared CRD) means read it again and retry."""
    resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    ns = obj.get("metadata", {}).get("namespace") or (namespace if resource.namespaced else None)
    for attempt in range(tries):
        try:
            try:
                current = resource.get(name=obj["metadata"]["name"], namespace=ns)
            except NotFoundError:
                return resource.create(body=obj, namespace=ns)
            obj.setdefault("metadata", {})["resourceVersion"] = current.metadata.resourceVersion
            return resource.replace(body=obj, namespace=ns)
        except ConflictError:
            if attempt == tries - 1:
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def get_or_none(resource: Any, name: str, namespace: str) -> Any:
    """The object, or None when it does not exist."""
    try:
        return resource.get(name=name, namespace=namespace)
    except NotFoundError:
        return None


def condition(obj: Any, kind: str) -> dict[str, Any] | None:
    """The status condition of type `kind` of a dynamic-client object, as a dict."""
    status = obj.to_dict().get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def true_condition(obj: Any, *kinds: str) -> dict[str, Any] | None:
    """The first condition of the types `kinds` whose status is True, or None."""
    for kind in kinds:
        found = condition(obj, kind)
        if found and found["status"] == "True":
            return found
    return None


def release_custom_resources(dyn: DynamicClient, namespace: str) -> int:
    """Drop the finalizers of every test custom resource (groups under example.com) in
    `namespace`, so that deleting the namespace cannot hang once no operator runs to
    finalize them. Returns how many objects were released."""
    released = 0
    for resource in dyn.resources.search(namespaced=True):
        group = getattr(resource, "group", "") or ""
        if not group.endswith("example.com") or "/" in resource.name:
            continue
        try:
            items = resource.get(namespace=namespace).to_dict().get("items") or []
        except Exception:
            continue  # a kind removed meanwhile, or not listable
        for item in items:
            if item["metadata"].get("finalizers"):
                resource.patch(
                    name=item["metadata"]["name"],
                    namespace=namespace,
                    body={"metadata": {"finalizers": []}},
                    content_type="application/merge-patch+json",
                )
                released += 1
    return released


def wait_for_default_service_account(core: client.CoreV1Api, namespace: str) -> None:
    """Wait until `namespace` has its `default` service account (pods need it)."""

    def present() -> bool:
        try:
            core.read_namespaced_service_account("default", namespace)
        except client.ApiException:
            return False
        return True

    wait_for(present, timeout=60, message=f"service account default in {namespace}")


def create_cr(
    resource: Any,
    name: str,
    namespace: str | None,
    spec: dict[str, Any] | None = None,
    **metadata: Any,
) -> Any:
    """Create a custom resource of `resource` (a dynamic-client resource) named `name`,
    with `spec` (default empty) and any other `metadata` fields (labels, ...)."""
    body = {
        "apiVersion": resource.group_version,
        "kind": resource.kind,
        "metadata": {"name": name, **metadata},
        "spec": spec or {},
    }
    return resource.create(body=body, namespace=namespace)
