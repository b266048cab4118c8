"""The bundled operator_sdk.util collection, run by a real ansible-playbook.

Each test writes a small playbook whose tasks call the collection's modules, runs it with
`ANSIBLE_COLLECTIONS_PATH` set to the bundled path and `K8S_AUTH_KUBECONFIG` set to the
test cluster (as the operator does for roles), and reads back every task's registered
result plus what the API server now holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from support.kube import apply, condition

from runner.ansible.bundledcollection import bundled_collections_path

API_VERSION = "cache.example.com/v1alpha1"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


# --- running modules --------------------------------------------------------------------


def run_tasks(
    tmp_path: Path, kubeconfig: Path, tasks: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Run `tasks` in one local play; return each task's registered result, in order.

    Every task runs with `ignore_errors`, so failures come back as results too.
    """
    registered = [f"result_{index}" for index in range(len(tasks))]
    results_file = tmp_path / "results.json"
    play = {
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": {"ansible_python_interpreter": sys.executable},
        "tasks": [
            {**task, "register": name, "ignore_errors": True}
            for task, name in zip(tasks, registered, strict=True)
        ]
        + [
            {
                "name": "save the results",
                "ansible.builtin.copy": {
                    "content": "{{ [" + ", ".join(registered) + "] | to_json }}",
                    "dest": str(results_file),
                    "mode": "0600",
                },
            }
        ],
    }
    playbook = tmp_path / "playbook.yml"
    playbook.write_text(yaml.safe_dump([play], sort_keys=False), encoding="utf-8")
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(bundled_collections_path()),
        "K8S_AUTH_KUBECONFIG": str(kubeconfig),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(playbook)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, f"ansible-playbook failed:\n{proc.stdout}\n{proc.stderr}"
    results: list[dict[str, Any]] = json.loads(results_file.read_text(encoding="utf-8"))
    return results


def status_task(name: str, namespace: str, **params: Any) -> dict[str, Any]:
    return {
        "operator_sdk.util.k8s_status": {
            "api_version": API_VERSION,
            "kind": "Memcached",
            "name": name,
            "namespace": namespace,
            **params,
        }
    }


# --- fixtures ---------------------------------------------------------------------------


@pytest.fixture
def memcached(dyn: Any, memcached_crd: Any, namespace: str) -> Any:
    """A Memcached custom resource named `mc` in the test's namespace."""
    body = {
        "apiVersion": API_VERSION,
        "kind": "Memcached",
        "metadata": {"name": "mc"},
        "spec": {"size": 1},
    }
    apply(dyn, [body], namespace=namespace)
    return memcached_crd


class MetricsSink:
    """A tiny metrics endpoint: records JSON bodies; `/metrics` says 200, others 400."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                sink.bodies.append(
                    {
                        "path": self.path,
                        "content_type": self.headers.get("Content-Type"),
                        "body": json.loads(raw),
                    }
                )
                ok = self.path == "/metrics"
                answer = b"ok" if ok else b"metric type mismatch: not_a_gauge"
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def metrics_sink() -> Iterator[MetricsSink]:
    sink = MetricsSink()
    sink.thread.start()
    try:
        yield sink
    finally:
        sink.server.shutdown()
        sink.server.server_close()
        sink.thread.join(timeout=5)


# --- k8s_status -------------------------------------------------------------------------


def test_k8s_status_sets_keys_and_conditions_idempotently(
    tmp_path: Path, kubeconfig: Path, dyn: Any, memcached: Any, namespace: str
) -> None:
    wanted = {
        "status": {"phase": "Ready", "nodes": ["a", "b"], "deep": {"x": 1}},
        "conditions": [
            {"type": "Available", "status": "True", "reason": "PodsReady", "message": "up"}
        ],
    }
    first, again = run_tasks(
        tmp_path,
        kubeconfig,
        [status_task("mc", namespace, **wanted), status_task("mc", namespace, **wanted)],
    )
    assert first["changed"] is True, first
    assert not first.get("failed"), first
    assert again["changed"] is False, again
    # the result is the object, as the API server holds it after the write
    assert first["result"]["metadata"]["name"] == "mc"
    assert (
        again["result"]["metadata"]["resourceVersion"]
        == (first["result"]["metadata"]["resourceVersion"])
    ), "an unchanged status must not be written"

    stored = memcached.get(name="mc", namespace=namespace)
    status = stored.to_dict()["status"]
    assert status["phase"] == "Ready"
    assert status["nodes"] == ["a", "b"]
    assert status["deep"] == {"x": 1}
    available = condition(stored, "Available")
    assert available is not None
    assert available["status"] == "True"
    assert available["reason"] == "PodsReady"
    assert available["lastTransitionTime"].endswith("Z")
    transition = available["lastTransitionTime"]

    # Same status, another message: the condition is rewritten, its transition time kept.
    # A deep key merges into the stored map; a subset of a stored list is no change.
    message, subset, flipped = run_tasks(
        tmp_path,
        kubeconfig,
        [
            status_task(
                "mc",
                namespace,
                conditions=[
                    {
                        "type": "Available",
                        "status": "True",
                        "reason": "PodsReady",
                        "message": "still up",
                    }
                ],
                status={"deep": {"y": 2}},
            ),
            status_task("mc", namespace, status={"nodes": ["a"]}),
            status_task(
                "mc",
                namespace,
                conditions=[
                    {
                        "type": "Available",
                        "status": "False",
                        "reason": "PodsGone",
                        "lastTransitionTime": "2030-01-02T03:04:05Z",
                    }
                ],
            ),
        ],
    )
    assert message["changed"] is True, message
    assert message["result"]["status"]["deep"] == {"x": 1, "y": 2}
    assert subset["changed"] is False, subset
    assert flipped["changed"] is True, flipped

    stored = memcached.get(name="mc", namespace=namespace)
    final = condition(stored, "Available")
    assert final == {
        "type": "Available",
        "status": "False",
        "reason": "PodsGone",
        "lastTransitionTime": "2030-01-02T03:04:05Z",
    }
    message_condition = next(
        c for c in message["result"]["status"]["conditions"] if c["type"] == "Available"
    )
    assert message_condition["message"] == "still up"
    assert message_condition["lastTransitionTime"] == transition
    assert stored.to_dict()["status"]["nodes"] == ["a", "b"]


def test_k8s_status_replace_lists_and_replace(
    tmp_path: Path, kubeconfig: Path, dyn: Any, memcached: Any, namespace: str
) -> None:
    seeded, subset_exact, replaced, replaced_again = run_tasks(
        tmp_path,
        kubeconfig,
        [
            status_task("mc", namespace, status={"nodes": ["a", "b"], "phase": "Ready"}),
            status_task("mc", namespace, status={"nodes": ["a"]}, replace_lists=True),
            status_task("mc", namespace, status={"only": "this"}, force=True),
            status_task("mc", namespace, status={"only": "this"}, replace=True),
        ],
    )
    assert seeded["changed"] is True, seeded
    assert subset_exact["changed"] is True, subset_exact
    assert subset_exact["result"]["status"]["nodes"] == ["a"]
    assert replaced["changed"] is True, replaced
    assert replaced_again["changed"] is False, replaced_again
    assert memcached.get(name="mc", namespace=namespace).to_dict()["status"] == {"only": "this"}


def test_k8s_status_rejects_invalid_input(
    tmp_path: Path, kubeconfig: Path, memcached: Any, namespace: str
) -> None:
    results = run_tasks(
        tmp_path,
        kubeconfig,
        [
            status_task(
                "mc",
                namespace,
                conditions=[{"type": "Ready", "status": "True", "reason": "not one word"}],
            ),
            status_task(
                "mc",
                namespace,
                conditions=[{"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"}],
            ),
            status_task(
                "mc",
                namespace,
                status={"conditions": [{"type": "A", "status": "True"}]},
                conditions=[{"type": "B", "status": "True"}],
            ),
            status_task("mc", namespace, conditions=[{"type": "Ready", "status": "Maybe"}]),
            status_task("missing", namespace, status={"phase": "Ready"}),
        ],
    )
    assert all(r.get("failed") for r in results), results
    reason, time, both, choice, missing = (r["msg"] for r in results)
    assert "CamelCase" in reason
    assert "RFC 3339" in time
    assert "both" in both
    assert "True, False, Unknown" in choice
    assert "missing" in missing and "404" in missing


# --- k8s_event --------------------------------------------------------------------------


def test_k8s_event_creates_then_counts_repeats(
    tmp_path: Path, kubeconfig: Path, api_client: Any, memcached: Any, namespace: str
) -> None:
    event = {
        "operator_sdk.util.k8s_event": {
            "name": "mc-scaled",
            "namespace": namespace,
            "reason": "Scaled",
            "message": "scaled to 1",
            "type": "Normal",
            "reportingComponent": "memcached-operator",
            "source": {"component": "memcached-operator"},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": "Memcached",
                "name": "mc",
                "namespace": namespace,
            },
        }
    }
    stamped = {
        "operator_sdk.util.k8s_event": {
            "name": "mc-backup",
            "namespace": namespace,
            "reason": "BackupTaken",
            "message": "a backup",
            "appendTimestamp": True,
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": "Memcached",
                "name": "mc",
                "namespace": namespace,
            },
        }
    }
    created, repeated, unique = run_tasks(tmp_path, kubeconfig, [event, event, stamped])
    assert created["changed"] is True, created
    assert created["result"]["count"] == 1
    assert repeated["changed"] is True, repeated
    assert repeated["result"]["count"] == 2
    assert repeated["result"]["firstTimestamp"] == created["result"]["firstTimestamp"]
    assert unique["changed"] is True, unique
    assert unique["result"]["metadata"]["name"].startswith("mc-backup.")

    cr = memcached.get(name="mc", namespace=namespace)
    stored = client.CoreV1Api(api_client).read_namespaced_event("mc-scaled", namespace)
    assert stored.count == 2
    assert stored.reason == "Scaled"
    assert stored.type == "Normal"
    assert stored.source is not None
    assert stored.source.component == "memcached-operator"
    assert stored.reporting_component == "memcached-operator"
    assert stored.involved_object.uid == cr.metadata.uid
    assert stored.involved_object.resource_version
    assert stored.involved_object.kind == "Memcached"


# --- requeue_after ----------------------------------------------------------------------


def test_requeue_after_returns_the_period(tmp_path: Path, kubeconfig: Path) -> None:
    good, bad, empty = run_tasks(
        tmp_path,
        kubeconfig,
        [
            {"operator_sdk.util.requeue_after": {"time": "1m30s"}},
            {"operator_sdk.util.requeue_after": {"time": "soon"}},
            {"operator_sdk.util.requeue_after": {"time": ""}},
        ],
    )
    assert good["period"] == "1m30s"
    assert good["changed"] is False
    assert not good.get("failed")
    assert bad["failed"] is True
    assert "invalid time input" in bad["msg"]
    assert empty["failed"] is True


# --- osdk_metric ------------------------------------------------------------------------


def test_osdk_metric_posts_the_upstream_json(
    tmp_path: Path, kubeconfig: Path, metrics_sink: MetricsSink
) -> None:
    address = metrics_sink.url("/metrics")

    def metric(**kind: Any) -> dict[str, Any]:
        return {
            "operator_sdk.util.osdk_metric": {
                "name": "things_total",
                "description": "Things seen",
                "address": address,
                **kind,
            }
        }

    results = run_tasks(
        tmp_path,
        kubeconfig,
        [
            metric(counter={"increment": True}),
            metric(counter={}),
            metric(gauge={"set": 2}),
            metric(histogram={"observe": 1.5}),
            metric(summary={"observe": 2}),
            {
                "operator_sdk.util.osdk_metric": {
                    "name": "not_a_gauge",
                    "description": "Wrong type",
                    "address": metrics_sink.url("/rejects"),
                    "gauge": {"increment": True},
                }
            },
            metric(counter={"increment": True}, gauge={"set": 1}),
            metric(),
        ],
    )
    counter, empty_counter, gauge, histogram, summary, rejected, two, none = results
    for ok in (counter, empty_counter, gauge, histogram, summary):
        assert ok["changed"] is True, ok
        assert not ok.get("failed"), ok
    assert rejected["failed"] is True
    assert rejected["msg"] == "metric type mismatch: not_a_gauge"
    assert rejected["status_code"] == 400
    assert two["failed"] is True and "mutually exclusive" in two["msg"]
    assert none["failed"] is True and "one of the following" in none["msg"]

    head = {"name": "things_total", "description": "Things seen"}
    gauge_ops = ("set", "increment", "decrement", "add", "subtract", "set_to_current_time")
    assert [b["path"] for b in metrics_sink.bodies] == ["/metrics"] * 5 + ["/rejects"]
    assert {b["content_type"] for b in metrics_sink.bodies} == {"application/json"}
    assert [b["body"] for b in metrics_sink.bodies] == [
        {**head, "counter": {"increment": True, "add": None}},
        {**head, "counter": {"increment": None, "add": None}},
        {**head, "gauge": {op: 2.0 if op == "set" else None for op in gauge_ops}},
        {**head, "histogram": {"observe": 1.5}},
        {**head, "summary": {"observe": 2.0}},
        {
            "name": "not_a_gauge",
            "description": "Wrong type",
            "gauge": {op: True if op == "increment" else None for op in gauge_ops},
        },
    ]
