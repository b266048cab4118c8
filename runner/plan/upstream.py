"""The API server as a plan reaches it: reads as they are, everything else as a dry run.

The one place the dry-run layer (`dryrun.py`) and the CR's preparation (`crinput.py`)
send requests to the API server. Every method but GET and HEAD goes with `dryRun=All`
(any `dryRun` the request had is replaced): that is what keeps the cluster unchanged, so
it is done here and nowhere else. Answers are read whole (`answers.Answer`); an API
server that cannot be reached or does not answer in time is a 503 or 504 `Status`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from runner.errors import ConfigError
from runner.k8s.apierrors import APIError
from runner.k8s.client import KubeClient
from runner.k8s.discovery import APIResource
from runner.plan.answers import Answer, status_answer
from runner.plan.overlay import ObjectKey
from runner.proxy.forward import REQUEST_TIMEOUT_SECONDS, upstream_timeout
from runner.structs import bodies

__all__ = ["READS", "Upstream"]

READS: Final = frozenset({"GET", "HEAD"})


class Upstream:
    """Requests of a plan to the API server; `dry_runs` counts the writes sent."""

    def __init__(
        self, client: KubeClient, *, request_timeout: float = REQUEST_TIMEOUT_SECONDS
    ) -> None:
        self._client = client
        self._timeout = request_timeout
        self.dry_runs = 0

    async def send(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]],
        *,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> Answer:
        """One request; every method but GET and HEAD as a dry run."""
        if method not in READS:
            query = [(k, v) for k, v in query if k != "dryRun"] + [("dryRun", "All")]
            self.dry_runs += 1
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        try:
            response = await self._client.forward(
                method,
                path,
                query=query,
                headers=headers,
                data=body,
                timeout=upstream_timeout("get", {}, total=self._timeout),
            )
        except APIError as err:
            return status_answer(503, "ServiceUnavailable", str(err), None)
        try:
            content = await response.read()
        except (OSError, TimeoutError) as err:
            return status_answer(504, "Timeout", f"no complete answer: {err}", None)
        finally:
            response.release()
        return Answer(response.status, content, response.content_type or "application/json")

    async def live(self, resource: APIResource, key: ObjectKey) -> dict[str, Any] | None:
        """The cluster's object of `key`, None when there is none."""
        path = resource.path(namespace=key.namespace or None, name=key.name)
        reply = await self.send("GET", path, [])
        obj = reply.json()
        return obj if reply.ok and isinstance(obj, dict) else None

    async def dry_run(
        self, resource: APIResource, method: str, obj: Mapping[str, Any], *, what: str
    ) -> dict[str, Any]:
        """The server's answer to a dry-run create (POST) or update (PUT) of `obj`;
        ConfigError with the server's message when it refuses (`what` says what it was)."""
        namespace = bodies.namespace(obj) or None
        name = bodies.name(obj) if method == "PUT" else None
        path = resource.path(namespace=namespace, name=name)
        reply = await self.send(method, path, [], body=json.dumps(obj).encode())
        result = reply.json()
        if not reply.ok or not isinstance(result, dict):
            message = result.get("message") if isinstance(result, dict) else None
            shown = message or reply.body.decode(errors="replace")
            raise ConfigError(f"the API server refuses {what}: {shown}")
        meta = result.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        return result
