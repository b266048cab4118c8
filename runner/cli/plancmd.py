"""`ansible-operator plan`: what one reconcile of a custom resource would change.

    ansible-operator plan [--watches-file W] CR.yaml [-n NS] [-o text|yaml|json]
    ansible-operator plan --cr KIND/NAME [-n NS] [--set PATH=VALUE]... [--patch FILE]
    ... [--delete] [--show-secrets] [--allow-side-effects] [--ansible-backend fast|runner]

Thin: read the files, build the plan's settings the way `run` and `vars` read theirs,
run `runner.plan.session.plan`, print. Exit codes: 0 no changes, 2 changes, 1 the run
failed (or bad input).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from runner.errors import ConfigError
from runner.util.yamlerror import describe_yaml_error

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `plan`."""
    from runner.cli.runflags import go_duration

    cmd = sub.add_parser(
        "plan",
        help="show what a reconcile of a custom resource would change, changing nothing",
        description="Run the reconcile of one custom resource as `run` would, with every "
        "write to the API server sent as a dry run and remembered for the rest of the run; "
        "print what would be created, changed and deleted. Nothing in the cluster changes. "
        "Tasks acting outside the Kubernetes API are skipped and listed. Exit code: 0 no "
        "changes, 2 changes, 1 the run failed. See docs/plan.md.",
    )
    cmd.add_argument(
        "cr_file", nargs="?", metavar="CR_FILE", help="YAML file with one CR, or - for stdin"
    )
    cmd.add_argument("--cr", metavar="KIND/NAME", help="a CR in the cluster instead of a file")
    cmd.add_argument(
        "--namespace",
        "-n",
        help="the CR's namespace (default: the file's, else the kubeconfig context's, "
        "else default)",
    )
    cmd.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="change a field first, e.g. spec.size=3 (VALUE is YAML; repeatable)",
    )
    cmd.add_argument(
        "--patch",
        metavar="FILE",
        help="change the CR first with a merge patch (a YAML/JSON mapping) or a JSON patch "
        "(a list of operations)",
    )
    cmd.add_argument("--delete", action="store_true", help="plan the finalizer's run of a deletion")
    cmd.add_argument(
        "--output", "-o", choices=("text", "yaml", "json"), default="text", help="default: text"
    )
    cmd.add_argument(
        "--show-secrets", action="store_true", help="print Secret data and credentials unmasked"
    )
    cmd.add_argument(
        "--allow-side-effects",
        action="store_true",
        help="run the tasks that act outside the Kubernetes API (command, shell, uri, exec, "
        "...) instead of skipping them",
    )
    cmd.add_argument(
        "--watches-file",
        default="./watches.yaml",
        help="path to watches.yaml (default: ./watches.yaml)",
    )
    cmd.add_argument(
        "--ansible-backend",
        choices=("fast", "runner"),
        default="fast",
        help="as `run`'s (default: fast)",
    )
    cmd.add_argument("--ansible-roles-path", default="", help="sets ANSIBLE_ROLES_PATH")
    cmd.add_argument("--ansible-collections-path", default="", help="sets ANSIBLE_COLLECTIONS_PATH")
    cmd.add_argument("--ansible-args", default="", help="extra ansible-runner cmdline, as `run`'s")
    cmd.add_argument(
        "--reconcile-timeout",
        default="0",
        type=go_duration,
        metavar="DURATION",
        help="stop the run after this long (Go duration; default 0: no limit)",
    )
    cmd.add_argument(
        "--inject-owner-ref",
        default="true",
        choices=("true", "false"),
        help="as `run`'s (default: true)",
    )
    cmd.add_argument(
        "--kubeconfig", help="the cluster's kubeconfig (default: $KUBECONFIG, ~/.kube/config)"
    )
    cmd.add_argument(
        "--keep-artifacts",
        metavar="DIR",
        help="keep the run's data directory (job events, stdout) under DIR",
    )
    cmd.add_argument(
        "--log-level",
        default="off",
        choices=("debug", "info", "warn", "error", "off"),
        help="the operator's log lines on stderr (default: off)",
    )
    cmd.set_defaults(handler=_cmd_plan)


def _cmd_plan(args: argparse.Namespace) -> int:
    from runner.cli.varscmd import parse_cr, watches_environ
    from runner.observability import logging as logs
    from runner.plan.crinput import CRInput
    from runner.plan.render import render
    from runner.plan.session import PlanSettings, plan
    from runner.util.durations import parse_duration
    from runner.watches import model as watches_mod

    if (args.cr_file is None) == (args.cr is None):
        raise ConfigError("plan: give a CR file or --cr KIND/NAME (one of them)")
    level = "panic" if args.log_level == "off" else args.log_level
    logs.configure(level=level, encoder="console", devel=False)
    cwd = Path.cwd()
    environ = watches_environ(
        os.environ,
        roles_path=args.ansible_roles_path,
        collections_path=args.ansible_collections_path,
    )
    watches = watches_mod.load(
        args.watches_file,
        environ=environ,
        cwd=cwd,
        default_reconcile_timeout=parse_duration(args.reconcile_timeout),
    )
    for message in (message for watch in watches for message in watch.warnings):
        print(f"warning: {message}", file=sys.stderr)
    obj = None
    source = "CR"
    if args.cr_file is not None:
        source = "stdin" if args.cr_file == "-" else str(args.cr_file)
        obj = parse_cr(_read(args.cr_file, cwd, what="the CR file"), source=source)
    patch = None
    if args.patch:
        patch = _parse_patch(_read(args.patch, cwd, what="the patch file"), source=args.patch)
    run_env: dict[str, str] = {
        key: environ[key]
        for key in ("ANSIBLE_ROLES_PATH", "ANSIBLE_COLLECTIONS_PATH")
        if key in environ
    }
    settings = PlanSettings(
        watches=watches,
        kubeconfig=args.kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None,
        backend=args.ansible_backend,
        allow_side_effects=args.allow_side_effects,
        inject_owner_ref=args.inject_owner_ref == "true",
        ansible_args=args.ansible_args,
        env=run_env,
        keep_artifacts=Path(args.keep_artifacts).resolve() if args.keep_artifacts else None,
        show_secrets=args.show_secrets,
    )
    cr_input = CRInput(
        obj=obj,
        source=source,
        target=args.cr,
        namespace=args.namespace,
        assignments=tuple(args.assignments),
        patch=patch,
        delete=args.delete,
    )
    report = asyncio.run(plan(settings, cr_input))
    sys.stdout.write(render(report, args.output, masked=not args.show_secrets))
    return report.exit_code


def _read(name: str, cwd: Path, *, what: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return (cwd / name).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{name}: cannot read {what}: {err.strerror}") from None


def _parse_patch(text: str, *, source: str) -> Any:
    try:
        patch = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: not valid YAML {describe_yaml_error(err)}") from None
    if not isinstance(patch, dict | list):
        raise ConfigError(
            f"{source}: a patch is a mapping (merge patch) or a list of operations (JSON patch)"
        )
    return patch
