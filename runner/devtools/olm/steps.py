"""Small synchronous-looking steps over `runner.k8s.KubeClient`: apply, get, delete, wait."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from runner.devtools.olm import olmobjects as model
from runner.errors import AnsibleOperatorError
from runner.k8s import APIError, Conflict, KubeClient, NotFound
from runner.structs import GVK, bodies

Obj = dict[str, Any]
T = TypeVar("T")


class OLMError(AnsibleOperatorError):
    """OLM did not install, upgrade or remove what it was asked to (with OLM's reason)."""


def gvk_of(obj: Obj) -> GVK:
    return GVK.from_api_version(str(obj["apiVersion"]), str(obj["kind"]))


async def get(client: KubeClient, gvk: GVK, name: str, namespace: str | None) -> Obj | None:
    try:
        return cast(Obj, await client.get(gvk, name=name, namespace=namespace))
    except NotFound:
        return None


async def apply(client: KubeClient, obj: Obj) -> Obj:
    """Create `obj`, or replace the existing object of that name with it."""
    gvk = gvk_of(obj)
    meta = bodies.metadata(obj)
    for _ in range(5):
        try:
            return cast(Obj, await client.create(gvk, obj))
        except Conflict:
            pass
        current = await get(client, gvk, str(meta["name"]), meta.get("namespace"))
        if current is None:
            continue
        body = copy.deepcopy(obj)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        try:
            return cast(Obj, await client.replace(gvk, obj=body))
        except Conflict:
            continue
    raise OLMError(f"could not apply {obj['kind']} {meta.get('name')}: it keeps changing")


async def delete(client: KubeClient, gvk: GVK, name: str, namespace: str | None) -> bool:
    """Delete (in the background); False when it was not there."""
    try:
        await client.delete(gvk, name=name, namespace=namespace, propagation_policy="Background")
    except NotFound:
        return False
    return True


async def listed(
    client: KubeClient, gvk: GVK, namespace: str | None, *, label_selector: str | None = None
) -> list[Obj]:
    try:
        items, _ = await client.list(gvk, namespace=namespace, label_selector=label_selector)
    except NotFound:  # the kind is not served (OLM not installed)
        return []
    return cast(list[Obj], items)


async def wait_for(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float,
    what: str,
    interval: float = 0.5,
) -> T:
    """Await `probe()` until it returns something truthy; OLMError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        found = await probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise OLMError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(interval)


async def wait_gone(
    client: KubeClient, gvk: GVK, name: str, namespace: str | None, *, timeout: float
) -> bool:
    """Wait until the object no longer exists; False on timeout."""
    deadline = time.monotonic() + timeout
    while await get(client, gvk, name, namespace) is not None:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.5)
    return True


async def service_account_token(
    client: KubeClient, namespace: str, service_account: str, *, seconds: int
) -> str:
    """A token for the service account, from the TokenRequest API."""
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token"
    body = json.dumps(model.token_request(seconds)).encode()
    response = await client.forward(
        "POST",
        path,
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        data=body,
    )
    try:
        data = await response.read()
    finally:
        response.release()
    if response.status >= 400:
        raise APIError(
            response.status,
            "TokenRequest",
            f"{namespace}/{service_account}: {data[:300].decode(errors='replace')}",
            {},
        )
    token = (json.loads(data).get("status") or {}).get("token")
    if not token:
        raise OLMError(f"the TokenRequest for {namespace}/{service_account} returned no token")
    return str(token)
