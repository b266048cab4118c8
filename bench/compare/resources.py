"""The Memcached custom resources of a run: creating them, watching each one become
Successful or converged, and the state (CRs and dependents) the operators leave.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from .base import CRD_FILE, GROUP, KIND, PLURAL, VERSION, log
from .operators import Running


def successful(obj: dict[str, Any]) -> bool:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Successful" and cond.get("status") == "True":
            return True
    return False


def converged_memcached(obj: dict[str, Any]) -> bool:
    size = int((obj.get("spec") or {}).get("size", 1))
    nodes = (obj.get("status") or {}).get("nodes") or []
    return successful(obj) and len(nodes) == size


@dataclass
class Phase:
    """What the watcher records for one measured phase."""

    start: dict[str, float] = field(default_factory=dict)
    # The resourceVersion a patch returned: only later states of the CR count, so that the
    # status of the previous phase (still Successful) is not taken for this one's.
    start_rv: dict[str, int] = field(default_factory=dict)
    successful: dict[str, float] = field(default_factory=dict)
    converged: dict[str, float] = field(default_factory=dict)


def _rv(obj: dict[str, Any]) -> int:
    # etcd revisions: opaque to clients in general, integers on every real API server.
    return int(obj["metadata"].get("resourceVersion") or 0)


class CRWatcher:
    """Watches the namespace's Memcached CRs; notes when each gets Successful/converged."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        converged: Callable[[dict[str, Any]], bool],
        *,
        label_selector: str = "",
    ) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.label_selector = label_selector
        self.namespace = namespace
        self.is_converged = converged
        self.latest: dict[str, dict[str, Any]] = {}
        self.phase = Phase()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._synced.wait(30)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=70)

    def new_phase(self) -> Phase:
        with self._lock:
            self.phase = Phase()
            return self.phase

    def mark_start(self, name: str, when: float, written: dict[str, Any] | None = None) -> None:
        """The phase of `name` began at `when`; `written` is what the create/patch returned.

        The watch event may arrive before the write returns: the newer of the two objects
        is checked, so an object seen before the write never counts for this phase.
        """
        with self._lock:
            self.phase.start[name] = when
            obj = self.latest.get(name)
            if written is not None and (obj is None or _rv(written) >= _rv(obj)):
                obj = self.latest[name] = written
            if written is not None:
                self.phase.start_rv[name] = _rv(written)
            if obj is not None:
                self._check(name, obj, when)

    def _check(self, name: str, obj: dict[str, Any], now: float) -> None:
        phase = self.phase
        if name not in phase.start or _rv(obj) <= phase.start_rv.get(name, -1):
            return
        if name not in phase.successful and successful(obj):
            phase.successful[name] = now
        if name not in phase.converged and self.is_converged(obj):
            phase.converged[name] = now

    def _handle(self, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        name = obj["metadata"]["name"]
        with self._lock:
            self.latest[name] = obj
            self._check(name, obj, now)

    def _loop(self) -> None:
        resource_version = ""
        while not self._stop.is_set():
            try:
                if not resource_version:
                    listed = self.custom.list_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, PLURAL, label_selector=self.label_selector
                    )
                    for item in listed["items"]:
                        self._handle(item)
                    resource_version = listed["metadata"]["resourceVersion"]
                    self._synced.set()
                stream = watch.Watch()
                for event in stream.stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    resource_version=resource_version,
                    label_selector=self.label_selector,
                    timeout_seconds=20,
                    allow_watch_bookmarks=True,
                ):
                    obj = event["object"]
                    if event["type"] == "ERROR":  # 410 Gone: list again
                        resource_version = ""
                        break
                    resource_version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._handle(obj)
                    if self._stop.is_set():
                        break
            except ApiException as exc:
                if exc.status == 410:
                    resource_version = ""
                else:
                    time.sleep(0.5)
            except Exception:
                time.sleep(0.5)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return copy.deepcopy(self.latest)


def create_crs(
    api: client.ApiClient, watcher: CRWatcher, namespace: str, count: int, prefix: str = "m"
) -> float:
    """Create `count` CRs at once (8 client threads); return when the burst began."""
    custom = client.CustomObjectsApi(api)
    began = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda index: create_cr(custom, watcher, namespace, f"{prefix}-{index}"),
                range(count),
            )
        )
    return began


def create_cr(
    custom: client.CustomObjectsApi, watcher: CRWatcher, namespace: str, name: str
) -> float:
    """Create one CR (size 1) and tell the watcher when; return when it was sent."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"size": 1},
    }
    sent = time.monotonic()
    written = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    watcher.mark_start(name, sent, written)
    return sent


def wait_converged(
    op: Running | None, watcher: CRWatcher, count: int, timeout: float, what: str
) -> bool:
    deadline = time.monotonic() + timeout
    last_report = time.monotonic()
    while time.monotonic() < deadline:
        done = len(watcher.phase.converged)
        if done >= count:
            return True
        if op is not None and not op.alive():
            raise RuntimeError(f"{op.spec.label} exited:\n{op.log()[-3000:]}")
        if time.monotonic() - last_report > 30:
            log(f"  {what}: {done}/{count} converged")
            last_report = time.monotonic()
        time.sleep(0.1)
    return False


def wait_settled(op: Running, quiet: float = 5, limit: float = 900) -> int:
    """Wait until every started Ansible run has finished and none has started for `quiet`
    seconds (at most `limit` s); return the runs started by then."""
    if quiet <= 0:
        return op.runs()
    deadline = time.monotonic() + limit
    runs, since = op.runs(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now_runs = op.runs()
        if now_runs != runs or op.finished() < now_runs:
            runs, since = now_runs, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return runs


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index], 3)


def latencies(phase: Phase, ends: dict[str, float]) -> list[float]:
    return [ends[name] - phase.start[name] for name in ends if name in phase.start]


# -- dependents ---------------------------------------------------------------------------

_NOISE_META = {
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "namespace",
}
_NOISE_ANNOTATIONS = {"deployment.kubernetes.io/revision"}


def _clean_meta(meta: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in meta.items() if k not in _NOISE_META}
    annotations = {
        k: v for k, v in (out.pop("annotations", None) or {}).items() if k not in _NOISE_ANNOTATIONS
    }
    if annotations:
        out["annotations"] = annotations
    if "ownerReferences" in out:
        out["ownerReferences"] = [
            {k: v for k, v in ref.items() if k != "uid"} for ref in out["ownerReferences"]
        ]
    return out


def _raw_list(call: Callable[..., Any], namespace: str) -> list[dict[str, Any]]:
    return list(json.loads(call(namespace, _preload_content=False).data)["items"])


def dependents(api: client.ApiClient, namespace: str) -> dict[str, Any]:
    """Deployments, Services and ConfigMaps of the namespace without metadata noise."""
    state: dict[str, Any] = {}
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    for item in _raw_list(apps.list_namespaced_deployment, namespace):
        spec = item["spec"]
        (spec.get("template") or {}).get("metadata", {}).pop("creationTimestamp", None)
        state[f"Deployment/{item['metadata']['name']}"] = {
            "metadata": _clean_meta(item["metadata"]),
            "spec": spec,
        }
    for item in _raw_list(core.list_namespaced_service, namespace):
        spec = {k: v for k, v in item["spec"].items() if k not in ("clusterIP", "clusterIPs")}
        state[f"Service/{item['metadata']['name']}"] = {
            "metadata": _clean_meta(item["metadata"]),
            "spec": spec,
        }
    for item in _raw_list(core.list_namespaced_config_map, namespace):
        if item["metadata"]["name"] == "kube-root-ca.crt":
            continue
        state[f"ConfigMap/{item['metadata']['name']}"] = {
            "metadata": _clean_meta(item["metadata"]),
            "data": item.get("data"),
        }
    return state


def cr_state(crs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What of each CR should not depend on the operator's timing."""
    out = {}
    for name, obj in crs.items():
        status = obj.get("status") or {}
        out[f"{KIND}/{name}"] = {
            "finalizers": obj["metadata"].get("finalizers"),
            "status.nodes": len(status.get("nodes") or []),
            "status keys": sorted(status),
            "conditions": sorted(
                [c.get("type"), c.get("status"), c.get("reason")]
                for c in status.get("conditions") or []
            ),
        }
    return out


def diff_states(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    diffs = []
    for key in sorted(set(a) | set(b)):
        if key not in a:
            diffs.append(f"{key}: only in the second")
        elif key not in b:
            diffs.append(f"{key}: only in the first")
        elif a[key] != b[key]:
            diffs.append(f"{key}: {_first_difference(a[key], b[key])}")
    return diffs


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{index}]")
    return f"{path or '.'}: {json.dumps(a, default=str)} != {json.dumps(b, default=str)}"


def install_crd(api: client.ApiClient, crd_file: Path = CRD_FILE) -> None:
    """Create the CRD (the Memcached one unless `crd_file` names another) and wait until
    it is Established."""
    ext = client.ApiextensionsV1Api(api)
    body = yaml.safe_load(crd_file.read_text())
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as exc:
        if exc.status != 409:
            raise
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        crd = ext.read_custom_resource_definition(body["metadata"]["name"])
        conds = (crd.status and crd.status.conditions) or []
        if any(c.type == "Established" and c.status == "True" for c in conds):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the CRD {body['metadata']['name']} is not Established")
