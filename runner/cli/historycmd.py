"""The `history` and `logs` sub-commands: a CR's past runs from its artifacts.

    ansible-operator history [--namespace N] [--runner-dir DIR] KIND/NAME
    ansible-operator logs [--namespace N] [--runner-dir DIR] KIND/NAME [--run IDENT]

Thin: find the CR's data directories (`runner.ansible.history`), summarize or print,
and say exactly what was not found and where it was looked for. Run inside the
operator's container (`kubectl exec deploy/<operator> -- ansible-operator history ...`)
or next to a local `ansible-operator run`; both default to the directory the runtime
uses (`$ANSIBLE_OPERATOR_RUNNER_DIR`, else `/tmp/ansible-operator/runner`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import ConfigError

if TYPE_CHECKING:
    from runner.ansible.artifacts import RunInfo
    from runner.ansible.history import CRDir, RunSummary, Target

__all__ = ["add_commands", "find_cr", "format_duration", "format_history"]

_MAX_LISTED = 10


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `history` and `logs`."""
    history = sub.add_parser(
        "history",
        help="list the last Ansible runs of a custom resource, newest first",
        description="List a custom resource's last runs from its artifacts: start time, "
        "duration, result, task counts, changed tasks and failures.",
    )
    _add_target_arguments(history)
    history.add_argument(
        "--limit", type=int, default=0, metavar="N", help="show only the N newest runs"
    )
    history.set_defaults(handler=_cmd_history)

    logs = sub.add_parser(
        "logs",
        help="print the Ansible output of a custom resource's run",
        description="Print the task output (ansible-runner's stdout) of the newest run of a "
        "custom resource, or of the run given with --run. Credentials are masked unless "
        "--raw is given.",
    )
    _add_target_arguments(logs)
    logs.add_argument("--run", metavar="IDENT", help="the run to print (see `history`)")
    logs.add_argument("--raw", action="store_true", help="print the output unmasked")
    logs.set_defaults(handler=_cmd_logs)


def find_cr(
    base: Path, target: Target, *, namespace: str | None = None
) -> tuple[CRDir, list[RunInfo]]:
    """The CR `target` names and its runs, newest first; ConfigError saying what is missing.

    Several data directories of one object (its kind moved to a new API version) are one
    history. Several objects (same name in two namespaces, or two groups with the kind)
    are an error that lists them.
    """
    from runner.ansible.artifacts import list_runs
    from runner.ansible.history import cr_dirs, matches

    if not base.is_dir():
        problem = "is not a directory" if base.exists() else "does not exist"
        raise ConfigError(
            f"--runner-dir {base} {problem}; it is the operator's runner directory (default "
            "$ANSIBLE_OPERATOR_RUNNER_DIR, else /tmp/ansible-operator/runner)"
        )
    everything = cr_dirs(base)
    found = [cr for cr in everything if matches(cr, target, namespace=namespace)]
    wanted = _wanted(target, namespace)
    if not found:
        raise ConfigError(_not_found(base, target, namespace, everything))
    objects = sorted({(cr.group, cr.kind, cr.namespace, cr.name) for cr in found})
    if len(objects) > 1:
        kinds = sorted({f"{cr.kind}.{cr.group}" if cr.group else cr.kind for cr in found})
        if len(kinds) > 1:
            raise ConfigError(
                f"{wanted} matches several kinds ({', '.join(kinds)}): give KIND.GROUP/NAME"
            )
        spaces = ", ".join(sorted({cr.namespace or "(cluster)" for cr in found}))
        raise ConfigError(f"{wanted} exists in several namespaces ({spaces}): pick --namespace")
    dirs = sorted({cr.path for cr in found})
    runs = sorted(
        (run for path in dirs for run in list_runs(path)),
        key=lambda run: (run.started, run.ident),
        reverse=True,
    )
    cr = found[0]
    if not runs:
        raise ConfigError(f"no runs of {cr.object_label} in {', '.join(map(str, dirs))}")
    return cr, runs


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_history(cr: CRDir, summaries: Sequence[RunSummary]) -> str:
    """The `history` table: one line per run, then its changed and failed tasks."""
    from runner.ansible.history import task_lines
    from runner.util.redact import redact_text

    header = ("STARTED (UTC)", "DURATION", "RESULT", "OK", "CHANGED", "FAILED", "RUN")
    rows = [
        (
            summary.started.strftime("%Y-%m-%d %H:%M:%S"),
            format_duration(summary.duration),
            summary.outcome,
            str(summary.ok),
            str(summary.changed),
            str(summary.failures),
            summary.ident,
        )
        for summary in summaries
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = [f"{cr.object_label} ({cr.kind_label})", _row(header, widths)]
    for row, summary in zip(rows, summaries, strict=True):
        lines.append(_row(row, widths))
        lines += [f"    {line}" for line in task_lines(summary)]
    return redact_text("\n".join(lines))


# -- handlers -------------------------------------------------------------------------


def _cmd_history(args: argparse.Namespace) -> int:
    from runner.ansible.history import summarize_run

    cr, runs = find_cr(_base(args), _target(args), namespace=args.namespace)
    if args.limit > 0:
        runs = runs[: args.limit]
    print(format_history(cr, [summarize_run(run) for run in runs]))
    return 0


def _cmd_logs(args: argparse.Namespace) -> int:
    from runner.ansible.artifacts import read_stdout
    from runner.ansible.jobevents import strip_ansi
    from runner.util.redact import redact_text

    cr, runs = find_cr(_base(args), _target(args), namespace=args.namespace)
    if args.run:
        chosen = [run for run in runs if run.ident == args.run]
        if not chosen:
            listed = ", ".join(run.ident for run in runs[:_MAX_LISTED])
            raise ConfigError(f"no run {args.run} of {cr.object_label}; its runs: {listed}")
        run = chosen[0]
    else:
        run = runs[0]
    text = read_stdout(run)
    if not text:
        state = "is still running" if run.status is None else "printed nothing"
        print(f"run {run.ident} of {cr.object_label} {state}", file=sys.stderr)
        return 0
    if not args.raw:
        text = redact_text(text)
    if not sys.stdout.isatty():
        text = strip_ansi(text)
    sys.stdout.write(text if text.endswith("\n") else f"{text}\n")
    return 0


# -- internals ------------------------------------------------------------------------


def _add_target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "target",
        metavar="KIND/NAME",
        help="the custom resource: Kind, kind, kind.group or a plural, then /name",
    )
    parser.add_argument("name", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument(
        "-n", "--namespace", help="its namespace (needed only when the name is in several)"
    )
    parser.add_argument(
        "--runner-dir",
        help="the operator's runner directory "
        "(default: $ANSIBLE_OPERATOR_RUNNER_DIR, else /tmp/ansible-operator/runner)",
    )


def _base(args: argparse.Namespace) -> Path:
    from runner.ansible.inputs import runner_dir

    return Path(args.runner_dir) if args.runner_dir else runner_dir(os.environ)


def _target(args: argparse.Namespace) -> Target:
    from runner.ansible.history import parse_target

    try:
        return parse_target(args.target, args.name)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _wanted(target: Target, namespace: str | None) -> str:
    kind = f"{target.kind}.{target.group}" if target.group else target.kind
    return f"{kind} {namespace}/{target.name}" if namespace else f"{kind} {target.name}"


def _not_found(base: Path, target: Target, namespace: str | None, everything: list[CRDir]) -> str:
    from runner.ansible.history import kind_matches

    message = f"no runs of {_wanted(target, namespace)} under {base}; is --runner-dir right?"
    same_kind = [cr for cr in everything if kind_matches(cr, target)]
    if same_kind:
        names = sorted({cr.object_label.partition(" ")[2] for cr in same_kind})
        shown = ", ".join(names[:_MAX_LISTED]) + (", ..." if len(names) > _MAX_LISTED else "")
        return f"{message} Objects of that kind with runs: {shown}"
    kinds = sorted({f"{cr.kind}.{cr.group}" if cr.group else cr.kind for cr in everything})
    if kinds:
        shown = ", ".join(kinds[:_MAX_LISTED]) + (", ..." if len(kinds) > _MAX_LISTED else "")
        return f"{message} Kinds with runs there: {shown}"
    return f"{message} It holds no runs at all."


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    numeric = {3, 4, 5}
    parts = [
        cell.rjust(width) if index in numeric else cell.ljust(width)
        for index, (cell, width) in enumerate(zip(cells, widths, strict=True))
    ]
    return "  ".join(parts).rstrip()
