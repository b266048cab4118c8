"""How a role's run becomes an answer: denials, patches, failure policies, conversions,
slots, and the server's conversion cache and certificate reload — with a stand-in
backend, no Ansible and no cluster (tests/integration/test_webhooks.py runs the real
thing)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession, TCPConnector
from prometheus_client import CollectorRegistry

from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import FailedTask, RunResult
from runner.errors import AnsibleRunError
from runner.structs import GVK
from runner.webhooks.declarations import Webhook
from runner.webhooks.server.devsetup import write_dev_certificates
from runner.webhooks.server.https import CertificateReloader, WebhookServer
from runner.webhooks.server.roles import RunOptions, WebhookMetrics, WebhookRunner

GVK_ = GVK("cache.example.com", "v1alpha1", "Memcached")
Behaviour = Callable[[RunRequest], Any]


class FakeBackend:
    """Runs nothing: `behaviour(request)` says which facts the "role" set, or raises, or
    returns a RunResult, or sleeps."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests: list[RunRequest] = []
        self.running = 0
        self.most = 0

    async def run(self, request: RunRequest, *, on_event: Any = None) -> RunResult:
        self.requests.append(request)
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            outcome = self.behaviour(request)
            if asyncio.iscoroutine(outcome):
                outcome = await outcome
            if isinstance(outcome, RunResult):
                return outcome
            facts = outcome or {}
            if on_event is not None:
                on_event({"event": "runner_on_ok", "event_data": {"res": {"ansible_facts": facts}}})
            return RunResult(ok=1, has_stats=True)
        finally:
            self.running -= 1

    async def forget(self, gvk: GVK, namespace: str, name: str) -> None:
        pass

    async def close(self) -> None:
        pass


def _webhook(type_: str, **kwargs: Any) -> Webhook:
    return Webhook(type=type_, gvk=GVK_, role=Path("/roles/r"), timeout=1.0, **kwargs)  # type: ignore[arg-type]


def _runner(
    behaviour: Behaviour, workers: int = 2
) -> tuple[WebhookRunner, FakeBackend, CollectorRegistry]:
    backend = FakeBackend(behaviour)
    registry = CollectorRegistry()
    runner = WebhookRunner(
        backend,  # type: ignore[arg-type]
        workers=workers,
        options=RunOptions(envvars={}),
        metrics=WebhookMetrics(registry),
    )
    return runner, backend, registry


def _request(**spec: Any) -> dict[str, Any]:
    return {
        "uid": "u1",
        "operation": "CREATE",
        "namespace": "ns",
        "object": {
            "apiVersion": "cache.example.com/v1alpha1",
            "kind": "Memcached",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": spec,
        },
    }


def _count(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_a_failed_task_denies_with_its_message() -> None:
    failed = RunResult(has_stats=True, failures=1, failed_tasks=(FailedTask("t", "too big"),))
    runner, _, registry = _runner(lambda _r: failed)
    answer = await runner.admit(_webhook("validating"), _request(size=9))
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["message"] == "too big"
    assert answer["response"]["status"]["code"] == 403
    name = "vmemcached.cache.example.com"
    assert (
        _count(registry, "ansible_operator_webhook_requests_total", webhook=name, result="denied")
        == 1
    )


async def test_a_mutating_role_gets_the_request_and_its_object_becomes_a_patch() -> None:
    def role(request: RunRequest) -> dict[str, Any]:
        assert request.extravars["operation"] == "CREATE"
        obj = dict(request.extravars["_cache_example_com_memcached"])
        return {"webhook_object": {**obj, "spec": {"size": 3}}, "webhook_warnings": "defaulted"}

    runner, backend, _ = _runner(role)
    answer = await runner.admit(_webhook("mutating"), _request())
    response = answer["response"]
    assert response["allowed"] is True and response["warnings"] == ["defaulted"]
    assert response["patchType"] == "JSONPatch"
    assert backend.requests[0].namespace == "mutating" and backend.requests[0].name.startswith(
        "slot-"
    )


@pytest.mark.parametrize(
    ("policy", "allowed", "result"),
    [
        pytest.param("Fail", False, "failed", id="fail"),
        pytest.param("Ignore", True, "ignored", id="ignore"),
    ],
)
async def test_timeouts_errors_and_broken_outputs_go_to_the_failure_policy(
    policy: str, allowed: bool, result: str
) -> None:
    async def hang(_request: RunRequest) -> None:
        await asyncio.sleep(30)

    def crash(_request: RunRequest) -> None:
        raise AnsibleRunError("did not receive playbook_on_stats event: syntax error")

    def broken(_request: RunRequest) -> dict[str, Any]:
        return {"webhook_patch": "not a list"}

    name = "mmemcached.cache.example.com"
    for behaviour, reason, text in (
        (hang, "timeout", "did not finish within 1s"),
        (crash, "error", "could not run: did not receive playbook_on_stats"),
        (broken, "contract", "webhook_patch must be a list"),
    ):
        runner, _, registry = _runner(behaviour)
        answer = await runner.admit(_webhook("mutating", failure_policy=policy), _request())
        response = answer["response"]
        assert response["allowed"] is allowed
        shown = response["warnings"][0] if allowed else response["status"]["message"]
        assert text in shown and f"failurePolicy {policy}" in shown
        labels = {"webhook": name, "reason": reason, "policy": policy}
        assert _count(registry, "ansible_operator_webhook_failures_total", **labels) == 1
        assert (
            _count(registry, "ansible_operator_webhook_requests_total", webhook=name, result=result)
            == 1
        )
        await runner.close()


async def test_runs_never_exceed_the_worker_slots() -> None:
    async def slow(_request: RunRequest) -> None:
        await asyncio.sleep(0.05)

    runner, backend, _ = _runner(slow, workers=2)
    answers = await asyncio.gather(
        *(runner.admit(_webhook("validating"), _request()) for _ in range(6))
    )
    assert all(a["response"]["allowed"] for a in answers)
    assert backend.most == 2
    assert {r.name for r in backend.requests} == {"slot-0", "slot-1"}


def _client_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def test_conversion_passes_same_version_objects_caches_and_reports_failures(
    tmp_path: Path,
) -> None:
    def convert(request: RunRequest) -> dict[str, Any]:
        obj = request.extravars["_cache_example_com_memcached"]
        if obj["spec"].get("size") == -1:
            raise AnsibleRunError("boom")
        return {"webhook_object": {**obj, "apiVersion": request.extravars["desired_api_version"]}}

    runner, backend, _ = _runner(convert)
    write_dev_certificates(tmp_path)
    server = WebhookServer(
        [_webhook("conversion")],
        runner,
        host="127.0.0.1",
        port=0,
        certificates=CertificateReloader(tmp_path),
    )
    port = await server.start()
    beta = "cache.example.com/v1beta1"

    def review(*objects: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "c1", "desiredAPIVersion": beta, "objects": list(objects)},
        }

    alpha = _request(size=1)["object"]
    already = {**alpha, "apiVersion": beta}
    try:
        async with ClientSession(connector=TCPConnector(ssl=_client_context())) as session:
            url = f"https://127.0.0.1:{port}/convert"
            for _ in range(2):
                async with session.post(url, json=review(alpha, already)) as resp:
                    body = await resp.json()
                assert body["response"]["result"] == {"status": "Success"}
                assert [o["apiVersion"] for o in body["response"]["convertedObjects"]] == [
                    beta,
                    beta,
                ]
            assert len(backend.requests) == 1  # the second review came from the cache
            async with session.post(url, json=review(_request(size=-1)["object"])) as resp:
                failed = await resp.json()
            assert failed["response"]["result"]["status"] == "Failure"
            assert "could not run: boom" in failed["response"]["result"]["message"]
            async with session.post(url, data=b"not json") as resp:
                assert resp.status == 400
    finally:
        await server.stop()


async def test_a_rotated_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    write_dev_certificates(tmp_path)
    reloader = CertificateReloader(tmp_path, interval=0.05)
    runner, _, _ = _runner(lambda _r: {})
    server = WebhookServer([], runner, host="127.0.0.1", port=0, certificates=reloader)
    port = await server.start()

    async def served() -> bytes:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=_client_context())
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.close()
        return bytes(der)

    try:
        first = await served()
        staging = tmp_path / "new"
        write_dev_certificates(staging)
        for name in ("tls.key", "tls.crt"):
            (staging / name).replace(tmp_path / name)
        async with asyncio.timeout(10):
            while reloader.reloads == 0:
                await asyncio.sleep(0.05)
        assert await served() != first
    finally:
        await server.stop()


def test_readiness_follows_the_webhooks_backend_warming_up() -> None:
    runner, backend, _ = _runner(lambda _r: {})
    assert runner.warming() is False  # a backend without a warm-up
    backend.warming = lambda: True  # type: ignore[attr-defined]
    assert runner.warming() is True
