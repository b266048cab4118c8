"""What one operator process's log (`--zap-encoder json`) says, for the checks (pure):
its Lease identity or ring member name, when it began and stopped holding its Lease, the
reconciles it logged per CR, when it removed its finalizer from a CR, when its manager
had stopped every reconcile (their runs killed and reaped), and the tracebacks in it
(also on lines that are not JSON: a crash's own stderr goes to the same file)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

_IDENTITY = re.compile(r"^waiting for the lease \S+ \(identity (?P<identity>\S+)\)$")
_MEMBER = re.compile(r"^joining the ring \S+ as member (?P<member>\S+) ")
_HOLDING = re.compile(r"^(became the leader|joined the ring )")
_LOST = re.compile(r"^(lost the lease|lost the membership)")
_RUN_START = re.compile(r"^reconcile (?P<kind>\w+) (?P<key>\S+): running Ansible$")
_FINALIZER_REMOVED = re.compile(r"^removed finalizer \S+ from (?P<kind>\w+) (?P<key>\S+)$")
# The manager's last line of a shutdown: every controller's reconciles are cancelled and
# awaited, and a cancelled run returns only once its ansible-playbook is gone.
_STOPPED = "stopped"
_RUN_END = re.compile(
    r"^reconcile (?P<kind>\w+) (?P<key>\S+): (?P<result>succeeded|failed|error|timed out) in "
)


@dataclass
class OpLog:
    identity: str = ""
    member: str = ""
    holding_from: float | None = None
    lost_at: float | None = None
    run_starts: dict[str, list[float]] = field(default_factory=dict)
    run_ends: dict[str, list[float]] = field(default_factory=dict)
    run_errors: dict[str, list[float]] = field(default_factory=dict)
    finalizer_removed: dict[str, list[float]] = field(default_factory=dict)
    stopped: list[float] = field(default_factory=list)
    tracebacks: list[str] = field(default_factory=list)
    lines: int = 0

    def end_after(self, key: str, when: float) -> float | None:
        """The first reconcile end of `key` the log has at or after `when`."""
        later = [t for t in self.run_ends.get(key, []) if t >= when]
        return min(later) if later else None


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def parse(lines: Iterable[str]) -> OpLog:
    found = OpLog()
    for line in lines:
        found.lines += 1
        if "Traceback" in line:
            found.tracebacks.append(line[:2000])
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
            message = str(entry.get("msg", ""))
            at = _ts(str(entry["ts"]))
        except (ValueError, KeyError, TypeError):
            continue
        if match := _RUN_START.match(message):
            found.run_starts.setdefault(match["key"], []).append(at)
        elif match := _RUN_END.match(message):
            found.run_ends.setdefault(match["key"], []).append(at)
            if match["result"] in ("error", "timed out"):
                found.run_errors.setdefault(match["key"], []).append(at)
        elif message == _STOPPED and str(entry.get("logger", "")).endswith(".manager"):
            found.stopped.append(at)
        elif match := _FINALIZER_REMOVED.match(message):
            found.finalizer_removed.setdefault(match["key"], []).append(at)
        elif match := _IDENTITY.match(message):
            found.identity = match["identity"]
        elif match := _MEMBER.match(message):
            found.member = match["member"]
            found.identity = match["member"]
        elif _HOLDING.match(message):
            if found.holding_from is None:
                found.holding_from = at
        elif _LOST.match(message) and found.lost_at is None:
            found.lost_at = at
    return found
