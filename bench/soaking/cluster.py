"""The soak's own cluster: a private local control plane (a state directory of its own,
so that restarting its API server and etcd never disturbs anyone else's), the soak's CRD
and namespaces, and the admin clients the workload and the checks use.

Restarts of cluster components are serialised: `LocalCluster.outage` reads and rewrites
the cluster's state file, and two at once would lose one's new pid.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from runner.devtools.cluster.local import LocalCluster

from .project import crd

NAMESPACE = "soak"
"""Where the CRs live."""
SYSTEM_NAMESPACE = "soak-system"
"""Where the replicas' Leases live."""


class SoakCluster:
    """The private cluster under `state_dir`: `up()`, then the clients; `down()` always."""

    def __init__(self, state_dir: Path) -> None:
        self.local = LocalCluster(state_dir)
        self._outages = threading.Lock()
        self.api: client.ApiClient | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.local.kubeconfig

    def up(self, progress: Any = print) -> float:
        seconds = self.local.up(progress=progress)
        self.api = self.client()
        return seconds

    def client(self) -> client.ApiClient:
        """A new admin client (one per thread that talks to the API server)."""
        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def prepare(self) -> None:
        """The CRD (established and served) and both namespaces."""
        assert self.api is not None
        extensions = client.ApiextensionsV1Api(self.api)
        body = crd()
        try:
            extensions.create_custom_resource_definition(body)
        except ApiException as err:
            if err.status != 409:
                raise
        core = client.CoreV1Api(self.api)
        for namespace in (NAMESPACE, SYSTEM_NAMESPACE):
            try:
                core.create_namespace({"metadata": {"name": namespace}})
            except ApiException as err:
                if err.status != 409:
                    raise
        deadline = time.monotonic() + 60
        name = str(body["metadata"]["name"])  # type: ignore[index]
        while time.monotonic() < deadline:
            found = extensions.read_custom_resource_definition(name)
            conditions = (found.status.conditions if found.status else None) or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                return
            time.sleep(0.2)
        raise RuntimeError(f"CRD {name} not established after 60 s")

    def outage(self, component: str, seconds: float) -> None:
        """Stop `component` (kube-apiserver or etcd) for `seconds`, start it again and wait
        until it serves; one outage at a time."""
        with self._outages:
            self.local.outage(component, seconds=seconds)

    def down(self) -> None:
        with self._outages:  # never while a component is being started again
            self.local.down(progress=lambda _message: None)
