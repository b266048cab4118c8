"""One reconcile of one custom resource: the Go operator's reconcile loop, step by step.

read CR -> skip deletions we do not own -> add our finalizer -> per-CR annotations ->
Running condition -> extra-vars (from the CR as that write returned it, as the Go
operator hands it over) -> Ansible run -> finalizer removal -> final conditions
-> what to do next: an `Outcome` value (`outcome.py`) the controller applies to its work
queue. A reconcile returns one whatever happens; the project's errors it meets on the way
become one in `reconcile` (`outcome_of`), so only bugs and cancellation escape it. Its
writes to the CR (status, finalizer), with their conflict retries, are `crwriter.py`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.ansible.backend import AnsibleBackend
from runner.ansible.inputs import RunRequest
from runner.ansible.jobevents import RunResult
from runner.engine.outcome import Done, Outcome, RequeueAfter, Retry, Terminal, outcome_of
from runner.errors import AnsibleOperatorError, AnsibleRunError, ReconcileError
from runner.k8s.apierrors import NotFound
from runner.k8s.client import KubeClient
from runner.k8s.informer import strip
from runner.observability.kubeevents import EventRecorder
from runner.operator.crwriter import CRWriter
from runner.operator.reloadgate import ReloadGate
from runner.status import conditions
from runner.structs import NamespacedName, bodies
from runner.structs.bodies import KubeObject
from runner.util.durations import format_duration, parse_duration
from runner.util.redact import redact_message
from runner.watches.extravars import build_extra_vars
from runner.watches.model import Watch
from runner.watches.watchfields import env_suffix

log = logging.getLogger("ansible-operator.reconciler")

ANNOTATION_PREFIX = "ansible.sdk.operatorframework.io/"
PERIOD_ANNOTATION = ANNOTATION_PREFIX + "reconcile-period"
VERBOSITY_ANNOTATION = ANNOTATION_PREFIX + "verbosity"
ARTIFACTS_ANNOTATION = ANNOTATION_PREFIX + "max-runner-artifacts"
# A CR deleted while its normal run was going is looked at again this soon (as the
# original does) so that its finalizer runs.
DELETED_DURING_RUN_DELAY = 5.0
_FINALIZED_KEPT = 10_000
"""CRs whose finalizer's role completed and whose finalizer removal is pending, at most."""

Reader = Callable[[NamespacedName], KubeObject | None]


class _RunTimedOut(Exception):
    """The Ansible run took longer than the watch's reconcile timeout and was stopped."""


KubeconfigFor = Callable[[Mapping[str, Any]], Mapping[str, Any]]
"""The kubeconfig a run of this CR gets (the API proxy's, naming the CR as the owner)."""


@dataclass(frozen=True)
class RunSettings:
    """Operator-wide settings every reconcile needs.

    With `run_kubeconfig` (the normal case: the API proxy runs) each run gets its own
    kubeconfig; without it, runs use the operator's `kubeconfig` file directly. `environ`
    holds variables every run gets (where the osdk_metric endpoint listens)."""

    kubeconfig: str | None = None
    run_kubeconfig: KubeconfigFor | None = None
    ansible_args: str = ""
    environ: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _PerCR:
    """Watch settings after the CR's own annotations are applied."""

    period: float
    verbosity: int
    max_artifacts: int


def per_cr_settings(watch: Watch, obj: Mapping[str, Any]) -> _PerCR:
    """Apply the per-CR annotations; raise ValueError naming the bad annotation."""
    annotations = bodies.annotations(obj)
    period = watch.reconcile_period
    verbosity = watch.ansible_verbosity
    max_artifacts = watch.max_runner_artifacts
    if PERIOD_ANNOTATION in annotations:
        try:
            period = parse_duration(str(annotations[PERIOD_ANNOTATION]))
        except ValueError as err:
            raise ValueError(f"Unable to parse reconcile period annotation: {err}") from None
    if VERBOSITY_ANNOTATION in annotations:
        try:
            verbosity = max(0, min(7, int(str(annotations[VERBOSITY_ANNOTATION]))))
        except ValueError:
            log.warning("ignoring invalid %s annotation", VERBOSITY_ANNOTATION)
    if ARTIFACTS_ANNOTATION in annotations:
        try:
            # 0 or less keeps every run's artifacts, as ansible-runner's
            # `--rotate-artifacts 0` did for the Go operator.
            max_artifacts = int(str(annotations[ARTIFACTS_ANNOTATION]))
        except ValueError:
            log.warning("ignoring invalid %s annotation", ARTIFACTS_ANNOTATION)
    return _PerCR(period=period, verbosity=verbosity, max_artifacts=max_artifacts)


def extra_vars(watch: Watch, obj: Mapping[str, Any], *, deleting: bool) -> dict[str, Any]:
    """The extra-vars of a run on `obj`; a deletion adds the finalizer's.

    `obj` is the CR as the run hands it over: with `manageStatus`, the API server's answer
    to the Running write (the Go operator's object after `markRunning`), else as read.

    The one place the watch's settings become extra-vars: reconciles use it, and so does
    `ansible-operator vars`, which prints them for a CR file."""
    finalizer = watch.finalizer if deleting else None
    return build_extra_vars(
        obj=obj,
        group=watch.gvk.group,
        kind=watch.gvk.kind,
        snake_case=watch.snake_case_parameters,
        mark_unsafe=watch.mark_unsafe,
        watch_vars=watch.vars,
        finalizer_vars=finalizer.vars if finalizer is not None else None,
    )


class Reconciler:
    """Reconciles the CRs of one watch."""

    def __init__(
        self,
        *,
        watch: Watch,
        client: KubeClient,
        backend: AnsibleBackend,
        settings: RunSettings,
        read: Reader,
        events: EventRecorder | None = None,
        gate: ReloadGate | None = None,
    ) -> None:
        self.watch = watch
        # Live reload's: tells whether a run that could not start had its files edited.
        self._gate = gate or ReloadGate(f"{watch.gvk.kind}-reconciler")
        self._writes = CRWriter(client, watch.gvk, manage_status=watch.manage_status)
        self._backend = backend
        self._settings = settings
        self._read = read
        self._events = events
        # CRs (by uid) whose finalizer's role completed but whose finalizer is not known
        # to be removed yet: a retry removes it without running the role again.
        self._finalized: OrderedDict[str, None] = OrderedDict()

    async def reconcile(self, key: NamespacedName) -> Outcome:
        """Reconcile the CR `key`; what to do with the key next."""
        try:
            return await self._reconcile(key)
        except AnsibleOperatorError as err:
            outcome = outcome_of(err)
        kind = self.watch.gvk.kind
        match outcome:
            case Retry(reason=reason, routine=True):
                log.info("reconcile %s %s: %s; retried", kind, key, reason)
            case Retry(reason=reason):
                log.warning("reconcile %s %s: %s", kind, key, reason)
            case Terminal(reason=reason):
                log.error("reconcile %s %s: %s; not retried until it changes", kind, key, reason)
                obj = self._read(key)
                if obj is not None:
                    await self._event(obj, "Warning", "ReconcileFailed", reason)
        return outcome

    async def _reconcile(self, key: NamespacedName) -> Outcome:
        started = time.monotonic()
        log.debug("reconcile %s %s: started", self.watch.gvk.kind, key)
        obj = self._read(key)
        if obj is None:
            log.debug("%s %s is gone; nothing to do", self.watch.gvk.kind, key)
            await self._backend.forget(self.watch.gvk, key.namespace, key.name)
            return Done()
        finalizer = self.watch.finalizer
        finalizers = bodies.finalizers(obj)
        deleting = bool(bodies.deletion_timestamp(obj))
        if deleting and (finalizer is None or finalizer.name not in finalizers):
            log.debug("%s %s is being deleted without our finalizer", self.watch.gvk.kind, key)
            return Done()
        if deleting:
            live = await self._still_ours(key)
            if live is None:
                return Done()
            obj = live
            if bodies.uid(obj) in self._finalized:
                # Its role completed in an earlier reconcile whose removal of the
                # finalizer failed (the API server away): only the removal is left.
                assert finalizer is not None
                log.info(
                    "reconcile %s %s: the finalizer's role already completed; removing "
                    "the finalizer",
                    self.watch.gvk.kind,
                    key,
                )
                await self._writes.remove_finalizer(key, finalizer.name)
                self._finalized.pop(bodies.uid(obj), None)
                return Done()
        if finalizer is not None and not deleting and finalizer.name not in finalizers:
            try:
                obj = await self._writes.set_finalizers(obj, [*finalizers, finalizer.name])
            except NotFound:
                return Done()
            log.debug("reconcile %s %s: finalizer added", self.watch.gvk.kind, key)

        try:
            per_cr = per_cr_settings(self.watch, obj)
        except ValueError as err:
            reason = str(err)
            await self._writes.write_status(key, lambda st: self._failed(st, reason, None))
            self._log_end(key, started, "error", reason)
            return Retry(reason)

        mark = self._gate.mark()
        # The status before this run: as the API had it (the cache may be a write behind)
        # once the Running condition is written.
        status = obj.get("status")
        before: Mapping[str, Any] | None = status if isinstance(status, Mapping) else None
        if self.watch.manage_status:
            try:
                before, written = await self._writes.update_status(
                    key, lambda st: conditions.running(st, now=_now()), known=obj
                )
            except ReconcileError as err:  # the run matters more than the Running condition
                log.warning("reconcile %s %s: %s", self.watch.gvk.kind, key, err)
            else:
                if written is None and not await self._exists(key):
                    log.debug("%s %s is gone; nothing to do", self.watch.gvk.kind, key)
                    return Done()
                if written is not None:
                    # The role sees its CR as the Go operator hands it over: the API
                    # server's answer to the Running write (status and resourceVersion
                    # included), without managedFields as the informer keeps it.
                    obj = strip(written)
                    if not deleting and bodies.deletion_timestamp(obj):
                        if finalizer is None or finalizer.name not in bodies.finalizers(obj):
                            return Done()
                        deleting = True  # deleted meanwhile: this run is the finalizer's

        log.info(
            "reconcile %s %s: running Ansible",
            self.watch.gvk.kind,
            key,
            extra=self._fields(key, deleting=deleting),
        )
        try:
            result = await self._run(self._request(obj, per_cr, deleting=deleting))
        except _RunTimedOut:
            message = self._timed_out_message()
            await self._writes.write_status(key, lambda st: self._failed(st, message, None))
            await self._event(obj, "Warning", "ReconcileFailed", message)
            self._log_end(key, started, "timed out", message)
            return Retry(message)
        except AnsibleRunError as err:
            message = f"Unable to run reconciliation: {err}"
            if await self._interrupted(key, mark, before, message):
                return Done()
            await self._writes.write_status(key, lambda st: self._failed(st, message, None))
            await self._event(obj, "Warning", "ReconcileFailed", message)
            self._log_end(key, started, "error", message)
            return Retry(message)

        log.debug("reconcile %s %s: run ended", self.watch.gvk.kind, key)
        if result.error is not None and await self._interrupted(key, mark, before, result.error):
            return Done()
        outcome = await self._finish(key, obj, result, per_cr, deleting=deleting)
        failed = isinstance(outcome, Retry)
        if isinstance(outcome, Retry):
            await self._event(obj, "Warning", "ReconcileFailed", outcome.reason)
        elif result.changed or _was_failing(obj):
            await self._event(
                obj,
                "Normal",
                "ReconcileSucceeded",
                f"Reconciliation succeeded ({result.changed} changed)"
                if result.changed
                else "Reconciliation succeeded after a failure",
            )
        seconds = time.monotonic() - started
        log.info(
            "reconcile %s %s: %s in %.2f s (ok=%d changed=%d skipped=%d failed=%d)",
            self.watch.gvk.kind,
            key,
            "failed" if failed else "succeeded",
            seconds,
            result.ok,
            result.changed,
            result.skipped,
            result.failures,
            extra={
                **self._fields(key, deleting=deleting),
                "result": "failed" if failed else "succeeded",
                "duration_s": round(seconds, 3),
                "ok": result.ok,
                "changed": result.changed,
                "skipped": result.skipped,
                "failures": result.failures,
            },
        )
        return outcome

    async def _still_ours(self, key: NamespacedName) -> KubeObject | None:
        """The CR being deleted as the API server has it now, when it still carries our
        finalizer; None when it does not (or is gone).

        The cache can be a write behind our own finalizer removal: a reconcile of this
        key that an event queued during the finalizer's run (the Running condition's own
        write is one) would find the copy from before the removal and run the finalizer's
        role a second time. A finalizer run is rare and not idempotent in general, so it
        starts only on the API server's word."""
        assert self.watch.finalizer is not None
        try:
            live = await self._writes.get(key)
        except NotFound:
            live = None
        if live is None or self.watch.finalizer.name not in bodies.finalizers(live):
            log.debug(
                "%s %s: our finalizer is already gone (the cache is behind)",
                self.watch.gvk.kind,
                key,
            )
            if live is None:
                await self._backend.forget(self.watch.gvk, key.namespace, key.name)
            return None
        return live

    async def _run(self, request: RunRequest) -> RunResult:
        """The Ansible run, stopped through the backend's cancel path (ansible-playbook
        killed, artifacts kept) once it has taken the watch's reconcile timeout."""
        limit = self.watch.reconcile_timeout
        if limit <= 0:
            return await self._backend.run(request)
        try:
            async with asyncio.timeout(limit) as deadline:
                return await self._backend.run(request)
        except TimeoutError:
            if deadline.expired():
                raise _RunTimedOut from None
            raise

    def _timed_out_message(self) -> str:
        limit = format_duration(self.watch.reconcile_timeout)
        return (
            f"Reconciliation timed out after {limit}: the Ansible run was stopped "
            f"(--reconcile-timeout, or RECONCILE_TIMEOUT_{env_suffix(self.watch.gvk)} "
            "for this watch)"
        )

    def _fields(self, key: NamespacedName, *, deleting: bool) -> dict[str, Any]:
        """Structured fields of the reconcile log lines (`--zap-encoder json`)."""
        return {
            "gvk": str(self.watch.gvk),
            "cr_namespace": key.namespace,
            "cr_name": key.name,
            "finalizing": deleting,
        }

    def _log_end(self, key: NamespacedName, started: float, result: str, message: str) -> None:
        seconds = time.monotonic() - started
        log.error(
            "reconcile %s %s: %s in %.2f s: %s",
            self.watch.gvk.kind,
            key,
            result,
            seconds,
            redact_message(message),
            extra={
                **self._fields(key, deleting=False),
                "result": result,
                "duration_s": round(seconds, 3),
            },
        )

    async def _finish(
        self,
        key: NamespacedName,
        obj: Mapping[str, Any],
        result: RunResult,
        per_cr: _PerCR,
        *,
        deleting: bool,
    ) -> Outcome:
        if result.error is not None:
            # A backend that reports a run without stats this way (both raise
            # AnsibleRunError instead, which `_reconcile` turns into a Failure).
            log.error("reconcile %s %s: %s", self.watch.gvk.kind, key, result.error)
            return Retry(result.error)
        ansible_result = conditions.AnsibleResult(
            ok=result.ok,
            changed=result.changed,
            skipped=result.skipped,
            failures=result.failures,
            completion=result.completion or _now(),
        )
        if result.failed:
            for task in result.failed_tasks:
                log.error("task failed: %s: %s", task.task, task.msg)
            message = result.failure_message
            await self._writes.write_status(
                key, lambda st: self._failed(st, message, ansible_result)
            )
            return Retry(message)

        if result.requeue_error is not None:
            # The role asked for a requeue the operator cannot honour: retried with
            # backoff (as the Go operator does), and said so rather than dropped.
            message = result.requeue_error
            await self._writes.write_status(
                key, lambda st: self._failed(st, message, ansible_result)
            )
            return Retry(message)

        def succeeded(status: Mapping[str, Any] | None) -> dict[str, Any]:
            return conditions.succeeded(status, result=ansible_result, now=_now())

        finalizer = self.watch.finalizer
        if deleting and finalizer is not None:
            if result.requeue_after is not None:
                # The finalizer's role asked to run again (its clean-up is not finished):
                # the finalizer stays, as with the Go operator.
                await self._writes.write_status(key, succeeded, known=self._read(key))
                return _requeue(result.requeue_after)
            uid = bodies.uid(obj)
            self._finalized[uid] = None
            while len(self._finalized) > _FINALIZED_KEPT:
                self._finalized.popitem(last=False)
            await self._writes.remove_finalizer(key, finalizer.name)
            self._finalized.pop(uid, None)
            # Other finalizers may keep the CR: it then shows the run's success (a CR
            # already gone makes this a no-op).
            await self._writes.write_status(key, succeeded)
            return Done()

        current = await self._writes.write_status(key, succeeded, known=self._read(key))
        if current is not None and bodies.deletion_timestamp(current):
            return RequeueAfter(DELETED_DURING_RUN_DELAY)
        if result.requeue_after is not None:
            return _requeue(result.requeue_after)
        return RequeueAfter(per_cr.period) if per_cr.period > 0 else Done()

    async def _exists(self, key: NamespacedName) -> bool:
        """Whether the API server still has the CR (the informer may lag behind)."""
        try:
            await self._writes.get(key)
        except NotFound:
            return False
        return True

    async def _interrupted(
        self, key: NamespacedName, mark: int, before: Mapping[str, Any] | None, message: str
    ) -> bool:
        """True when a run that could not start (no stats) had its role edited under it.

        Then live reload has put the status back as it was before the run: it checks the
        edit and reconciles every CR again once it is good, so a half-saved file never
        turns CRs to Failure."""
        if not await self._gate.interrupted(key, mark=mark, before=before):
            return False
        log.warning(
            "reconcile %s %s: role edited during the run, status kept until the edit is "
            "reloaded: %s",
            self.watch.gvk.kind,
            key,
            redact_message(message),
        )
        return True

    async def _event(self, obj: Mapping[str, Any], type: str, reason: str, message: str) -> None:
        if self._events is not None:
            await self._events.record(obj, type=type, reason=reason, message=message)

    def _failed(
        self,
        status: Mapping[str, Any] | None,
        message: str,
        result: conditions.AnsibleResult | None,
    ) -> dict[str, Any]:
        return conditions.failed(status, message=message, result=result, now=_now())

    def _request(self, obj: Mapping[str, Any], per_cr: _PerCR, *, deleting: bool) -> RunRequest:
        watch = self.watch
        finalizer = watch.finalizer if deleting else None
        role, playbook = watch.role, watch.playbook
        if finalizer is not None and (finalizer.role or finalizer.playbook):
            role, playbook = finalizer.role, finalizer.playbook
        extravars = extra_vars(watch, obj, deleting=deleting)
        envvars: dict[str, str] = dict(self._settings.environ)
        kubeconfig = None
        if self._settings.run_kubeconfig is not None:
            kubeconfig = self._settings.run_kubeconfig(obj)
        elif self._settings.kubeconfig:
            envvars["K8S_AUTH_KUBECONFIG"] = self._settings.kubeconfig
            envvars["KUBECONFIG"] = self._settings.kubeconfig
        return RunRequest(
            gvk=watch.gvk,
            namespace=bodies.namespace(obj),
            name=bodies.name(obj),
            extravars=extravars,
            role=Path(role) if role else None,
            playbook=Path(playbook) if playbook else None,
            verbosity=per_cr.verbosity,
            cmdline=self._settings.ansible_args,
            envvars=envvars,
            kubeconfig=kubeconfig,
            max_artifacts=per_cr.max_artifacts,
        )


def _requeue(seconds: float) -> Outcome:
    """A role's `requeue_after`: a period of 0 (or less) means no requeue at all, as
    controller-runtime reads `RequeueAfter: 0`, not a requeue at once."""
    return RequeueAfter(seconds) if seconds > 0 else Done()


def _was_failing(obj: Mapping[str, Any]) -> bool:
    status = obj.get("status")
    found = conditions.get_condition(status if isinstance(status, Mapping) else None, "Failure")
    return bool(found and found.get("status") == "True")


def _now() -> datetime:
    return datetime.now(UTC)
