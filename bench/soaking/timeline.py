"""Every event of a soak on one clock (wall time), for the events around a failing
check: faults, operator processes starting, taking and losing their Lease and exiting,
and — for the CR the check concerns — the workload's operations and its runs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .invariants import Life, Violation, run_end
from .runlog import RunLog


@dataclass(frozen=True)
class Event:
    at: float
    source: str
    text: str
    key: str = ""
    """The CR (namespace/name) it is about; "" for events about the whole system."""


def system_events(
    lives: Iterable[Life],
    faults: Iterable[Mapping[str, object]],
) -> list[Event]:
    """Faults and operator processes: what happened to everyone."""
    events = []
    for fault in faults:
        hit = f" on {fault['hit']}" if fault.get("hit") else ""
        began = float(str(fault["began"]))
        events.append(Event(began, "fault", f"{fault['kind']}{hit} begins"))
        if fault.get("ended") is not None:
            events.append(
                Event(
                    float(str(fault["ended"])),
                    "fault",
                    f"{fault['kind']}{hit} ends: {fault['outcome']}",
                )
            )
    for life in lives:
        events.append(Event(life.started, "operator", f"{life.id} starts"))
        if life.holding_from is not None:
            events.append(Event(life.holding_from, "operator", f"{life.id} holds its Lease"))
        if life.lost_at is not None:
            events.append(Event(life.lost_at, "operator", f"{life.id} lost its Lease"))
        if life.exited is not None:
            events.append(Event(life.exited, "operator", f"{life.id} exited"))
        if life.gone is not None:
            events.append(Event(life.gone, "operator", f"{life.id}: no process of it left"))
    return events


def cr_events(
    key: str,
    log: RunLog,
    lives: Mapping[str, Life],
    zygote_kills: Sequence[tuple[str, float]],
    ops: Iterable[tuple[float, str, str, str]],
) -> list[Event]:
    """The runs of CR `key` and the workload's operations on it (`ops`: at, op, name,
    detail)."""
    events = []
    name = key.rsplit("/", 1)[-1]
    for at, op, op_name, detail in ops:
        if op_name == name:
            events.append(Event(at, "workload", f"{op} {detail}".strip(), key))
    for run in log.runs:
        if run.key != key:
            continue
        what = f"{run.phase} run {run.run} (generation {run.generation})"
        events.append(Event(run.started, run.incarnation, f"{what} starts", key))
        end = run_end(run, lives.get(run.incarnation), zygote_kills)
        if run.ended is not None:
            outcome = "fails" if run.failed else "ends"
            events.append(Event(run.ended, run.incarnation, f"{what} {outcome}", key))
        elif end is not None:
            events.append(Event(end, run.incarnation, f"{what} cut short (no end record)", key))
    return events


def around(
    violation: Violation,
    system: Sequence[Event],
    of_cr: Sequence[Event],
    *,
    window: float = 15.0,
) -> list[Event]:
    """The system's events within `window` seconds of the violation, and every event of
    its CR."""
    near = [e for e in system if abs(e.at - violation.at) <= window]
    return sorted([*near, *of_cr], key=lambda e: e.at)


def render(events: Sequence[Event], *, origin: float) -> str:
    lines = []
    for event in events:
        clock = datetime.fromtimestamp(event.at).strftime("%H:%M:%S.%f")[:-3]
        lines.append(f"  {clock} (+{event.at - origin:7.1f} s) {event.source:<9} {event.text}")
    return "\n".join(lines)
