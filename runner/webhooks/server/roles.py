"""Running a webhook's role for one request, and turning the run into an answer.

Webhook runs have their own Ansible backend and their own slots (`workers`), apart from
the reconciles': an admission never waits for a reconcile to free a worker. A webhook
whose role allows it runs in its warm runner instead (`runner.ansible.warm`: its tasks in
a process that loaded the role once); its job events become an answer the same way. A slot is
also the run's data directory (`<base>/<group>/<version>/<kind>/<type>/slot-<n>`), so
disk use stays bounded and the last runs of each slot can be read afterwards.

How a run ends, per webhook type:

- the run succeeds: validating and mutating allow (with the role's warnings, and a
  mutating role's patch); conversion returns the converted object;
- a task fails: the request is denied with the task's message (conversion: fails);
- the run times out, cannot run, or its output breaks the contract: the webhook's
  `failurePolicy` decides, Fail denies (code 500), Ignore allows with a warning saying
  why (conversion has no policy: it fails).

Every denial and failure is logged (one line, redacted like every log line) and counted
in `ansible_operator_webhook_requests_total{webhook,result}`; failures also in
`ansible_operator_webhook_failures_total{webhook,reason,policy}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram

from runner.ansible.backend import AnsibleBackend
from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import EventCollector, RunResult
from runner.ansible.runlog import LogEvents, RunLog
from runner.ansible.warm.pool import WarmCrashed, WarmError, WarmRunners, WarmTimeout
from runner.errors import AnsibleRunError
from runner.structs.bodies import KubeObject
from runner.util.durations import format_duration
from runner.util.redact import MESSAGE_LIMIT, redact_message
from runner.webhooks import contract
from runner.webhooks.declarations import Webhook
from runner.webhooks.reviews import AdmissionRequest, AdmissionReview, PatchOperation
from runner.webhooks.server.warmtargets import warm_key

__all__ = ["EventLog", "RunOptions", "WebhookFailure", "WebhookMetrics", "WebhookRunner"]

log = logging.getLogger("ansible-operator.webhooks")

_BUCKETS = (0.05, 0.1, 0.15, 0.25, 0.5, 1, 2, 5, 10, 30, float("inf"))
_ARTIFACTS_PER_SLOT = 3
_T = TypeVar("_T")


class WebhookMetrics:
    """The webhook metrics, in the operator's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "ansible_operator_webhook_requests",
            "Webhook requests by webhook and result "
            "(allowed, denied, patched, converted, failed, ignored)",
            ["webhook", "result"],
            registry=registry,
        )
        self.failures = Counter(
            "ansible_operator_webhook_failures",
            "Webhook role runs that timed out, could not run or broke the contract, "
            "with the failure policy applied",
            ["webhook", "reason", "policy"],
            registry=registry,
        )
        self.duration = Histogram(
            "ansible_operator_webhook_duration_seconds",
            "Time to answer one webhook request, in seconds",
            ["webhook"],
            buckets=_BUCKETS,
            registry=registry,
        )


class WebhookFailure(Exception):
    """The role gave no usable answer: `reason` is timeout, error or contract."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class RunOptions:
    """What every webhook run gets: variables and the run's verbosity and arguments."""

    envvars: Mapping[str, str]
    verbosity: int = 0
    ansible_args: str = ""


@dataclass(frozen=True)
class EventLog:
    """How the webhooks' backend logs a run's job events: warm runs log theirs alike."""

    logger: logging.Logger
    log_events: LogEvents = "tasks"
    debug: bool = False


class _Denied(Exception):
    pass


class WebhookRunner:
    """Answers admission and conversion requests by running the webhooks' roles."""

    def __init__(
        self,
        backend: AnsibleBackend,
        *,
        workers: int,
        options: RunOptions,
        metrics: WebhookMetrics,
        warm: WarmRunners | None = None,
        warm_log: EventLog | None = None,
    ) -> None:
        self._backend = backend
        self._warm = warm
        self._warm_log = warm_log
        self._options = options
        self._metrics = metrics
        self._slots: asyncio.Queue[int] = asyncio.Queue()
        for slot in range(max(1, workers)):
            self._slots.put_nowait(slot)
        self._abandoned: set[asyncio.Task[Any]] = set()

    def warming(self) -> bool:
        if self._warm is not None and self._warm.warming():
            return True
        warming = getattr(self._backend, "warming", None)
        return bool(warming()) if callable(warming) else False

    async def close(self) -> None:
        if self._warm is not None:
            await self._warm.close()
        for task in list(self._abandoned):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._abandoned, return_exceptions=True)

    # -- admission ----------------------------------------------------------------------

    async def admit(self, webhook: Webhook, request: AdmissionRequest) -> AdmissionReview:
        """The AdmissionReview answering `request` (the review's `request` field)."""
        started = time.monotonic()
        uid = str(request.get("uid") or "")
        what = _describe_request(request)
        try:
            output = await self._run(webhook, contract.admission_vars(webhook, request))
            warnings = output.warnings()
            patch: list[PatchOperation] = []
            if webhook.type == "mutating":
                subject = request.get("object")
                if isinstance(subject, Mapping):
                    patch = _checked(webhook, lambda: contract.mutation_patch(subject, output))
            result = "patched" if patch else "allowed"
            log.debug("%s: %s %s", webhook.describe(), result, what)
            answer = contract.admission_response(uid, allowed=True, warnings=warnings, patch=patch)
        except _Denied as denied:
            message = redact_message(str(denied), MESSAGE_LIMIT)
            result = "denied"
            log.info(
                "%s: denied %s: %s",
                webhook.describe(),
                what,
                message,
                extra={"webhook": webhook.name, "result": result},
            )
            answer = contract.admission_response(uid, allowed=False, message=message, code=403)
        except WebhookFailure as failure:
            answer, result = self._apply_policy(webhook, uid, what, failure)
        self._metrics.requests.labels(webhook.name, result).inc()
        self._metrics.duration.labels(webhook.name).observe(time.monotonic() - started)
        return answer

    def _apply_policy(
        self, webhook: Webhook, uid: str, what: str, failure: WebhookFailure
    ) -> tuple[AdmissionReview, str]:
        policy = webhook.failure_policy
        message = redact_message(f"{webhook.describe()}: {failure}", MESSAGE_LIMIT)
        self._metrics.failures.labels(webhook.name, failure.reason, policy).inc()
        if policy == "Ignore":
            log.error(
                "%s (failurePolicy Ignore: %s allowed)",
                message,
                what,
                extra={"webhook": webhook.name, "reason": failure.reason, "policy": policy},
            )
            warning = f"{message}; allowed by failurePolicy Ignore"
            return contract.admission_response(uid, allowed=True, warnings=[warning]), "ignored"
        log.error(
            "%s (failurePolicy Fail: %s denied)",
            message,
            what,
            extra={"webhook": webhook.name, "reason": failure.reason, "policy": policy},
        )
        answer = contract.admission_response(
            uid, allowed=False, message=f"{message} (failurePolicy Fail)", code=500
        )
        return answer, "failed"

    # -- conversion ---------------------------------------------------------------------

    async def convert(
        self, webhook: Webhook, obj: Mapping[str, Any], desired_api_version: str
    ) -> KubeObject:
        """`obj` converted by the role; `WebhookFailure` when it cannot be (the API server
        then fails the request that needed it)."""
        started = time.monotonic()
        try:
            output = await self._run(
                webhook, contract.conversion_vars(webhook, obj, desired_api_version)
            )
            converted = _checked(
                webhook, lambda: contract.conversion_result(obj, output, desired_api_version)
            )
        except _Denied as denied:
            failure = WebhookFailure("denied", str(denied))
            self._conversion_failed(webhook, obj, desired_api_version, failure)
            raise failure from None
        except WebhookFailure as failure:
            self._metrics.failures.labels(webhook.name, failure.reason, "Fail").inc()
            self._conversion_failed(webhook, obj, desired_api_version, failure)
            raise
        finally:
            self._metrics.duration.labels(webhook.name).observe(time.monotonic() - started)
        self._metrics.requests.labels(webhook.name, "converted").inc()
        return converted

    def _conversion_failed(
        self,
        webhook: Webhook,
        obj: Mapping[str, Any],
        desired: str,
        failure: WebhookFailure,
    ) -> None:
        self._metrics.requests.labels(webhook.name, "failed").inc()
        meta = _mapping(obj.get("metadata"))
        log.error(
            "%s: converting %s %s to %s failed: %s",
            webhook.describe(),
            obj.get("apiVersion"),
            _name(meta),
            desired,
            redact_message(str(failure), MESSAGE_LIMIT),
            extra={"webhook": webhook.name, "reason": failure.reason},
        )

    # -- the run ------------------------------------------------------------------------

    def _run_log(self, webhook: Webhook) -> RunLog | None:
        """The log lines of a warm run, as a full run of the same slot's would be."""
        if self._warm_log is None:
            return None
        request = RunRequest(
            gvk=webhook.gvk,
            namespace=webhook.type,
            name="warm",
            role=webhook.role,
            playbook=webhook.playbook,
        )
        log = self._warm_log
        return RunLog(log.logger, request, log_events=log.log_events, debug=log.debug)

    async def _run_warm(
        self, webhook: Webhook, extravars: dict[str, Any], deadline: float, limit: str
    ) -> contract.RoleOutput | None:
        """The run in the webhook's warm runner; None when it needs a full run."""
        assert self._warm is not None
        try:
            events = await self._warm.run(warm_key(webhook), extravars, deadline=deadline)
        except WarmTimeout:
            raise WebhookFailure(
                "timeout",
                f"role {_target(webhook)} did not finish within {limit} and was stopped",
            ) from None
        except (WarmCrashed, WarmError) as err:
            raise WebhookFailure("error", f"role {_target(webhook)} could not run: {err}") from None
        if events is None:
            return None
        output = contract.RoleOutput()
        collector = EventCollector()
        run_log = self._run_log(webhook)
        for event in events:
            output.add(event)
            collector.add(event)
            if run_log is not None:
                run_log.event(event)
        result = collector.result()
        if not result.has_stats:
            raise WebhookFailure("error", f"role {_target(webhook)} could not run: {result.error}")
        return _outcome(webhook, result, output)

    async def _run(self, webhook: Webhook, extravars: dict[str, Any]) -> contract.RoleOutput:
        """Run the role within the webhook's timeout (waiting for a slot included): in
        its warm runner when it has one, else (or when the warm runner says the role
        needs it) as a full run."""
        deadline = time.monotonic() + webhook.timeout
        limit = format_duration(webhook.timeout)
        if self._warm is not None:
            output = await self._run_warm(webhook, extravars, deadline, limit)
            if output is not None:
                return output
        try:
            slot = await asyncio.wait_for(self._slots.get(), timeout=webhook.timeout)
        except TimeoutError:
            raise WebhookFailure(
                "timeout", f"no free webhook worker within {limit} (--webhook-workers)"
            ) from None
        output = contract.RoleOutput()
        request = RunRequest(
            gvk=webhook.gvk,
            namespace=webhook.type,
            name=f"slot-{slot}",
            extravars=extravars,
            role=webhook.role,
            playbook=webhook.playbook,
            verbosity=self._options.verbosity,
            cmdline=self._options.ansible_args,
            envvars=dict(self._options.envvars),
            max_artifacts=_ARTIFACTS_PER_SLOT,
        )
        task = asyncio.create_task(self._backend.run(request, on_event=output.add))
        task.add_done_callback(lambda _task: self._slots.put_nowait(slot))
        done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
        if not done:
            # Answer now; the run is stopped in the background and frees its slot then.
            task.cancel()
            self._abandoned.add(task)
            task.add_done_callback(self._abandoned.discard)
            raise WebhookFailure(
                "timeout", f"role {_target(webhook)} did not finish within {limit} and was stopped"
            )
        try:
            result = task.result()
        except AnsibleRunError as err:
            raise WebhookFailure("error", f"role {_target(webhook)} could not run: {err}") from None
        await asyncio.sleep(0)  # events are delivered on the loop, before the result
        return _outcome(webhook, result, output)


def _outcome(
    webhook: Webhook, result: RunResult, output: contract.RoleOutput
) -> contract.RoleOutput:
    """The role's output from a finished run (full or warm): a failed task denies."""
    if result.failed:
        raise _Denied(result.failure_message)
    try:
        # Checked here so that a broken output is a failure, not a crash.
        output.warnings()
        output.object()
        output.patch()
    except contract.ContractError as err:
        raise WebhookFailure("contract", f"role {_target(webhook)}: {err}") from None
    return output


def _checked(webhook: Webhook, compute: Callable[[], _T]) -> _T:
    try:
        return compute()
    except contract.ContractError as err:
        raise WebhookFailure("contract", f"role {_target(webhook)}: {err}") from None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _target(webhook: Webhook) -> str:
    return webhook.target.name


def _name(meta: Mapping[str, Any]) -> str:
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    return f"{namespace}/{name}" if namespace else str(name)


def _describe_request(request: Mapping[str, Any]) -> str:
    kind = _mapping(request.get("kind"))
    user = _mapping(request.get("userInfo"))
    name = _name({"namespace": request.get("namespace"), "name": request.get("name")})
    dry = " (dry run)" if request.get("dryRun") else ""
    return (
        f"{request.get('operation')} {kind.get('kind', '')} {name or '<generated name>'} "
        f"by {user.get('username', '?')}{dry}"
    )


def data_dir_base(run_dir: Path) -> Path:
    """Where webhook runs keep their data directories, beside the reconciles'."""
    return run_dir / "webhooks"
