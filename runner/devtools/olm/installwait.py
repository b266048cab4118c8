"""Waiting for OLM to install a CSV: where an installation stands, read from the
Subscription, its InstallPlan and the CSV, until Succeeded, waiting for approval, or a
problem OLM reports (`report.problem`) that is final or has lasted too long.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.devtools.olm import olmobjects as model
from runner.devtools.olm import report
from runner.devtools.olm import steps as api
from runner.devtools.olm.runrecord import Run
from runner.devtools.olm.steps import OLMError
from runner.k8s import KubeClient
from runner.util.progress import Ticker

Progress = Callable[[str], None]
Obj = dict[str, Any]


# A problem OLM reports that is not (yet) final, e.g. a requirement not met, fails the
# wait once it has lasted this long (unless the problem says how long it may take).
SETTLE_SECONDS = 45.0


@dataclass(frozen=True)
class Outcome:
    """Where an installation stands when `run-bundle`, `bundle-upgrade` or `approve` return."""

    csv: str
    state: str  # "Succeeded" or "RequiresApproval"
    seconds: float
    install_plan: str | None = None


async def objects(
    client: KubeClient, run: Run, csv_name: str
) -> tuple[Obj | None, Obj | None, Obj | None]:
    """The run's Subscription, the InstallPlan it points at and CSV `csv_name` (None
    for those not there)."""
    sub = await api.get(client, model.SUBSCRIPTION, run.subscription, run.namespace)
    plan_name = (((sub or {}).get("status") or {}).get("installPlanRef") or {}).get("name")
    plan = None
    if plan_name:
        plan = await api.get(client, model.INSTALL_PLAN, str(plan_name), run.namespace)
    csv = await api.get(client, model.CSV, csv_name, run.namespace)
    return sub, plan, csv


def phase(obj: Obj | None) -> str:
    """`status.phase` of an OLM object, "" when it has none (yet)."""
    return str(((obj or {}).get("status") or {}).get("phase") or "")


async def wait_installed(
    client: KubeClient,
    run: Run,
    csv_name: str,
    *,
    timeout: float,
    progress: Progress,
    replaced: str | None = None,
) -> Outcome:
    """Wait until CSV `csv_name` is Succeeded, its InstallPlan Complete (and `replaced`
    gone), or the InstallPlan waits for approval; OLMError with OLM's reason when it
    fails."""
    with Ticker(f"waiting for CSV {csv_name}") as ticker:
        wrapped = ticker.wrap(progress)
        return await _wait_installed(
            client, run, csv_name, timeout=timeout, progress=wrapped, replaced=replaced
        )


async def _wait_installed(
    client: KubeClient,
    run: Run,
    csv_name: str,
    *,
    timeout: float,
    progress: Progress,
    replaced: str | None,
) -> Outcome:
    started = time.monotonic()
    seen: dict[str, str] = {}
    problem_since: float | None = None
    while True:
        sub, plan, csv = await objects(client, run, csv_name)
        old = await api.get(client, model.CSV, replaced, run.namespace) if replaced else None
        for name, obj in ((csv_name, csv), (replaced, old)):
            if name and obj is not None and seen.get(name) != phase(obj):
                seen[name] = phase(obj)
                progress(f"CSV {name}: {seen[name] or '(no phase yet)'}")
        plan_csvs = ((plan or {}).get("spec") or {}).get("clusterServiceVersionNames") or []
        elapsed = time.monotonic() - started
        plan_name = str(plan["metadata"]["name"]) if plan else None
        # The InstallPlan turns Complete a moment after the CSV it created Succeeded.
        plan_done = csv_name not in plan_csvs or phase(plan) == "Complete"
        if phase(csv) == report.CSV_SUCCEEDED and old is None and plan_done:
            progress(f"{csv_name} Succeeded after {elapsed:.1f} s")
            return Outcome(csv_name, report.CSV_SUCCEEDED, elapsed, plan_name)
        if csv_name in plan_csvs and report.waiting_for_approval(sub, plan):
            progress(
                f"InstallPlan {plan_name} for {csv_name} waits for approval: "
                f"`ansible-operator olm approve --namespace {run.namespace}`"
            )
            return Outcome(csv_name, "RequiresApproval", elapsed, plan_name)
        found = report.problem(sub, plan if csv_name in plan_csvs else None, csv)
        if found is None:
            problem_since = None
        else:
            problem_since = problem_since or time.monotonic()
            patience = found.settle_seconds or SETTLE_SECONDS
            if found.final or time.monotonic() - problem_since > patience:
                raise OLMError(f"OLM reports: {found.text}")
        if elapsed > timeout:
            lines = status_lines(sub, plan, csv)
            raise OLMError(
                f"{csv_name} not Succeeded after {timeout:.0f} s; OLM says:\n" + "\n".join(lines)
            )
        await asyncio.sleep(0.5)


def status_lines(sub: Obj | None, plan: Obj | None, csv: Obj | None) -> list[str]:
    """The Subscription, InstallPlan and CSV (those there) as OLM reports them."""
    lines: list[str] = []
    if sub is not None:
        lines += report.subscription_lines(sub)
    if plan is not None:
        lines += report.install_plan_lines(plan)
    if csv is not None:
        lines += report.csv_lines(csv)
    return lines or ["(no Subscription, InstallPlan or CSV yet)"]
