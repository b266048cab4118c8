"""The `init` and `create` sub-commands (thin: parse, call the generator, print)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `init` and `create api` on the top-level parser."""
    init = sub.add_parser(
        "init",
        help="start a new operator project in the current directory",
        description="Write PROJECT, Makefile, Dockerfile, watches.yaml, requirements.yml, "
        "config/ (CRDs, RBAC, manager, OLM manifests, scorecard) and a Molecule scenario.",
    )
    init.add_argument(
        "--domain",
        default="my.domain",
        help="domain of the API groups, e.g. example.com (default: %(default)s)",
    )
    init.add_argument("--project-name", help="name of the project (default: the directory's name)")
    init.add_argument(
        "--plugins",
        default="ansible",
        help="comma-separated; grafana.kubebuilder.io/v1-alpha also writes a Grafana "
        "dashboard of the operator's metrics (default: %(default)s)",
    )
    init.set_defaults(handler=_cmd_init)

    create = sub.add_parser("create", help="add to the project: `create api`, `create webhook`")
    what = create.add_subparsers(dest="what", required=True, metavar="WHAT")
    api = what.add_parser(
        "api",
        help="add a custom resource kind reconciled by a new role",
        description="Add a kind: its CRD, sample, RBAC, a role that reconciles it and a "
        "watches.yaml entry; extends PROJECT and the CSV base.",
    )
    api.add_argument("--group", required=True, help="API group within the domain, e.g. cache")
    api.add_argument("--version", required=True, help="API version, e.g. v1alpha1")
    api.add_argument("--kind", required=True, help="kind in UpperCamelCase, e.g. Memcached")
    api.add_argument(
        "--generate-role",
        action="store_true",
        help="generate roles/<kind>/ and point watches.yaml at it (the default)",
    )
    api.add_argument(
        "--generate-playbook",
        action="store_true",
        help="also generate playbooks/<kind>.yml (running the role); watches.yaml uses it",
    )
    api.add_argument(
        "--plugins",
        default="ansible",
        help="comma-separated; grafana.kubebuilder.io/v1-alpha also writes the Grafana "
        "dashboard of the operator's metrics when the project has none (default: %(default)s)",
    )
    api.set_defaults(handler=_cmd_create_api)

    webhook = what.add_parser(
        "webhook",
        help="add webhooks of a kind, written as roles",
        description="Add a kind's defaulting, validating and/or conversion webhooks: a role "
        "each, their webhooks.yaml entry, config/webhook, config/certmanager and the "
        "kustomize wiring (see docs/webhooks.md).",
    )
    webhook.add_argument("--group", required=True, help="API group within the domain, e.g. cache")
    webhook.add_argument("--version", required=True, help="API version, e.g. v1alpha1")
    webhook.add_argument("--kind", required=True, help="kind in UpperCamelCase, e.g. Memcached")
    webhook.add_argument(
        "--defaulting", action="store_true", help="a mutating webhook (roles/<kind>_defaulting)"
    )
    webhook.add_argument(
        "--programmatic-validation",
        action="store_true",
        help="a validating webhook (roles/<kind>_validation)",
    )
    webhook.add_argument(
        "--conversion",
        action="store_true",
        help="a conversion webhook between the CRD's versions (roles/<kind>_conversion)",
    )
    webhook.set_defaults(handler=_cmd_create_webhook)


def _report(root: Path, written: list[str], verb: str) -> None:
    for relative in written:
        print(f"{verb} {relative}")
    print(f"({len(written)} files in {root})")


def tool_source() -> str:
    """The checkout this ansible-operator runs from (an editable install, or the source
    tree itself), for the new project's Makefile; "" when it runs from a built wheel."""
    from runner.cli.installation import detect

    checkout = detect().checkout
    if checkout and (Path(checkout) / "pyproject.toml").is_file():
        return checkout
    return ""


def tool_pip() -> str:
    """pip's arguments that install this same ansible-operator, for the new project's
    Makefile: the wheel (or archive, directory) it was installed from, else its version
    from the package index; "" when it runs from a checkout (`tool_source`)."""
    from runner import __version__
    from runner.cli.installation import detect

    found = detect()
    return "" if found.checkout else found.pip_install_args(__version__)


def _cmd_init(args: argparse.Namespace) -> int:
    from runner.devtools.scaffold import generate, grafana, writer
    from runner.devtools.scaffold.names import validate_project_name
    from runner.devtools.scaffold.projectfile import PROJECT_FILE
    from runner.errors import ConfigError

    root = Path.cwd()
    if (root / PROJECT_FILE).exists():
        raise ConfigError(
            f"{root / PROJECT_FILE} exists: this directory already holds a project "
            "(add kinds with `ansible-operator create api`)"
        )
    if args.project_name is None:
        try:
            name = validate_project_name(root.name, flag="the directory name")
        except ConfigError as err:
            raise ConfigError(f"{err}; choose one with --project-name") from None
    else:
        name = validate_project_name(args.project_name)
    plan = generate.init_plan(
        domain=args.domain,
        project_name=name,
        tool_source=tool_source(),
        tool_pip=tool_pip(),
        grafana=grafana.grafana_requested(args.plugins),
    )
    written = writer.apply(root, plan)
    _report(root, written, "wrote")
    print("next: ansible-operator create api --group GROUP --version v1alpha1 --kind Kind")
    return 0


def _cmd_create_api(args: argparse.Namespace) -> int:
    import sys

    from runner.devtools.scaffold import generate, grafana, writer
    from runner.devtools.scaffold.names import group_warning
    from runner.devtools.scaffold.projectfile import PROJECT_FILE, parse_project

    root = Path.cwd()
    files = writer.read_project_files(root)
    if PROJECT_FILE in files:
        note = group_warning(args.group, parse_project(files[PROJECT_FILE]).domain)
        if note:
            print(note, file=sys.stderr)
    plan = generate.api_plan(
        files,
        group=args.group,
        version=args.version,
        kind=args.kind,
        playbook=args.generate_playbook,
    )
    if grafana.grafana_requested(args.plugins) and not (root / grafana.DASHBOARD_FILE).exists():
        name = parse_project(files[PROJECT_FILE]).name
        plan.create[grafana.DASHBOARD_FILE] = grafana.dashboard(name)
    written = writer.apply(root, plan)
    _report(root, written, "wrote")
    print("next: make install run, then apply the sample from config/samples/")
    return 0


def _cmd_create_webhook(args: argparse.Namespace) -> int:
    from runner.devtools.scaffold import writer
    from runner.devtools.scaffold.projectfile import PROJECT_FILE
    from runner.devtools.scaffold.webhook.create import (
        SCENARIO_VERIFY_GLOB,
        WEBHOOK_FILES,
        webhook_plan,
    )

    root = Path.cwd()
    files: dict[str, str] = {}
    scenarios = [str(p.relative_to(root)) for p in sorted(root.glob(SCENARIO_VERIFY_GLOB))]
    for relative in (PROJECT_FILE, *WEBHOOK_FILES, *scenarios):
        if (root / relative).is_file():
            files[relative] = (root / relative).read_text(encoding="utf-8")
    plan = webhook_plan(
        files,
        group=args.group,
        version=args.version,
        kind=args.kind,
        defaulting=args.defaulting,
        validation=args.programmatic_validation,
        conversion=args.conversion,
        root=root,
    )
    written = writer.apply(root, plan)
    _report(root, written, "wrote")
    print("next: edit the roles, then `make run` serves them against the local cluster")
    return 0
