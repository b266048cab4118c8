"""What OLM says about an installation, as lines for people and as a verdict (pure).

OLM reports progress in three objects: the Subscription (`status.state`, its
conditions such as `ResolutionFailed`), the InstallPlan (`status.phase`, the `Installed`
condition) and the ClusterServiceVersion (`status.phase`, `reason`, `message`, the
phase history in `conditions` and the `requirementStatus` list).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.devtools.olm.olmobjects import conditions
from runner.structs import bodies

Obj = dict[str, Any]

# Phases a CSV ends in (for now): Failed is OLM's verdict, the others wait for something.
CSV_FAILED = "Failed"
CSV_SUCCEEDED = "Succeeded"
# Subscription conditions that report a problem when their status is True.
_SUBSCRIPTION_PROBLEMS = (
    "ResolutionFailed",
    "InstallPlanFailed",
    "BundleUnpackFailed",
    "CatalogSourcesUnhealthy",
    "InstallPlanMissing",
)


# OLM's resolver retries with a backoff, and while a catalog is being replaced (an
# upgrade, under load) it reports `ResolutionFailed` for a while before it resolves, so
# the Subscription's problems may last longer than the waiting caller's default.
RESOLUTION_SETTLE_SECONDS = 150.0


@dataclass(frozen=True)
class Problem:
    """A failure OLM reports; `final` when waiting cannot help (a Failed phase), else
    how long it may last before waiting gives up (None: the caller's default)."""

    text: str
    final: bool
    settle_seconds: float | None = None


def _name(obj: Obj | None) -> str:
    return str(bodies.metadata(obj).get("name", "?"))


def _why(reason: Any, message: Any) -> str:
    parts = [str(p) for p in (reason, message) if p]
    return ": ".join(parts)


def subscription_lines(sub: Obj) -> list[str]:
    status = sub.get("status") or {}
    spec = sub.get("spec") or {}
    state = status.get("state") or "(no state yet)"
    lines = [
        f"Subscription {_name(sub)}: state {state}; package {spec.get('name')}, "
        f"channel {spec.get('channel')}, approval {spec.get('installPlanApproval', 'Automatic')}"
    ]
    lines.append(
        f"  installed CSV {status.get('installedCSV') or '-'}, "
        f"current CSV {status.get('currentCSV') or '-'}"
    )
    for cond in conditions(sub):
        if cond.get("status") == "True":
            lines.append(f"  {cond.get('type')}: {_why(cond.get('reason'), cond.get('message'))}")
    return lines


def install_plan_lines(plan: Obj) -> list[str]:
    spec = plan.get("spec") or {}
    status = plan.get("status") or {}
    approved = "approved" if spec.get("approved") else "not approved"
    csvs = ", ".join(spec.get("clusterServiceVersionNames") or []) or "-"
    lines = [
        f"InstallPlan {_name(plan)}: phase {status.get('phase') or '(none yet)'} "
        f"({spec.get('approval', '?')}, {approved}) for {csvs}"
    ]
    for cond in conditions(plan):
        if cond.get("status") != "True" or cond.get("reason"):
            why = _why(cond.get("reason"), cond.get("message"))
            lines.append(f"  {cond.get('type')}={cond.get('status')}: {why}")
    for lookup in status.get("bundleLookups") or []:
        for cond in lookup.get("conditions") or []:
            if cond.get("status") == "True":
                why = _why(cond.get("reason"), cond.get("message"))
                lines.append(f"  bundle {lookup.get('path')}: {cond.get('type')}: {why}")
    return lines


def csv_lines(csv: Obj) -> list[str]:
    status = csv.get("status") or {}
    phase = status.get("phase") or "(no phase yet)"
    why = _why(status.get("reason"), status.get("message"))
    lines = [f"CSV {_name(csv)}: phase {phase}" + (f" ({why})" if why else "")]
    history = [f"{c.get('phase')}/{c.get('reason')}" for c in conditions(csv) if c.get("phase")]
    if history:
        lines.append(f"  phases: {' -> '.join(history[-8:])}")
    for requirement in missing_requirements(csv):
        lines.append(f"  requirement {requirement}")
    return lines


def missing_requirements(csv: Obj) -> list[str]:
    """Requirements OLM found unmet (`requirementStatus` entries not Present)."""
    found = []
    for entry in (csv.get("status") or {}).get("requirementStatus") or []:
        if entry.get("status") != "Present":
            what = f"{entry.get('kind')} {entry.get('name')}"
            found.append(f"{what} {entry.get('status')}: {entry.get('message', '')}".strip())
    return found


def problem(sub: Obj | None, plan: Obj | None, csv: Obj | None) -> Problem | None:
    """OLM's reason why the installation does not (yet) succeed, if it reports one."""
    if csv is not None:
        status = csv.get("status") or {}
        why = _why(status.get("reason"), status.get("message"))
        if status.get("phase") == CSV_FAILED:
            # OLM moves a CSV whose requirements went missing for a moment (a cache not
            # yet synced during an upgrade, under load) back to Pending by itself.
            recoverable = status.get("reason") == "RequirementsNotMet"
            return Problem(f"CSV {_name(csv)} phase Failed: {why}", final=not recoverable)
        if status.get("reason") == "RequirementsNotMet":
            missing = "; ".join(missing_requirements(csv))
            text = f"CSV {_name(csv)} phase {status.get('phase')}: {why}"
            return Problem(text + (f" ({missing})" if missing else ""), final=False)
    if plan is not None:
        status = plan.get("status") or {}
        if status.get("phase") == "Failed":
            causes = [
                _why(c.get("reason"), c.get("message"))
                for c in conditions(plan)
                if c.get("status") == "False"
            ]
            text = f"InstallPlan {_name(plan)} Failed: {'; '.join(causes) or 'no reason given'}"
            return Problem(text, final=True)
    if sub is not None:
        for cond in conditions(sub):
            if cond.get("type") in _SUBSCRIPTION_PROBLEMS and cond.get("status") == "True":
                why = _why(cond.get("reason"), cond.get("message"))
                return Problem(
                    f"Subscription {_name(sub)} {cond.get('type')}: {why}",
                    final=False,
                    settle_seconds=RESOLUTION_SETTLE_SECONDS,
                )
    return None


def waiting_for_approval(sub: Obj | None, plan: Obj | None) -> bool:
    """A Manual Subscription whose InstallPlan waits to be approved."""
    if plan is None:
        return False
    phase = (plan.get("status") or {}).get("phase")
    return phase == "RequiresApproval" and not (plan.get("spec") or {}).get("approved")
