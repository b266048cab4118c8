"""The `bundle` and `catalog` sub-commands (thin: parse, call the builders, print)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from runner.errors import ConfigError


def _channels(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(","))


def _print_changed(changed: list[Path], what: str) -> None:
    if not changed:
        print(f"{what} is up to date", file=sys.stderr)
    for path in changed:
        print(f"{'removed' if not path.exists() else 'wrote'} {path}", file=sys.stderr)


def _bundle_generate(args: argparse.Namespace) -> int:
    from runner.devtools.packaging.bundle import render_bundle
    from runner.devtools.packaging.csv import BundleOptions
    from runner.devtools.packaging.projectconfig import load_project
    from runner.devtools.packaging.write import write_files

    project_dir = Path(args.project_dir)
    inputs = load_project(project_dir, name=args.package)
    options = BundleOptions(
        version=args.version,
        package=args.package or inputs.name,
        channels=_channels(args.channels),
        default_channel=args.default_channel,
        replaces=args.replaces,
        skip_range=args.skip_range,
        image=args.image,
    )
    output = Path(args.output_dir)
    if output.name in ("", ".", ".."):
        raise ConfigError(f"--output-dir {args.output_dir!r}: name the bundle directory")
    files = render_bundle(inputs, options, bundle_dir=output.name)
    changed = write_files(output.parent, files, owned=[output.name])
    _print_changed(changed, str(output))
    return 0


def _bundle_validate(args: argparse.Namespace) -> int:
    from runner.devtools.packaging.findings import has_errors
    from runner.devtools.packaging.validate import default_project, validate_bundle

    directory = Path(args.directory)
    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a directory")
    project = Path(args.project_dir) if args.project_dir else default_project(directory)
    findings = validate_bundle(
        directory,
        project=project,
        dockerfile=Path(args.dockerfile) if args.dockerfile else None,
        suite=args.suite,
        others=[Path(p) for p in args.other_bundle or []],
    )
    if args.output == "json":
        print(json.dumps([vars(f) for f in findings], indent=2))
    else:
        for finding in findings:
            print(finding)
        errors = sum(1 for f in findings if f.level == "error")
        summary = f"{errors} error(s), {len(findings) - errors} warning(s), {args.suite} rules"
        if project is None:
            summary += "; RBAC not checked against roles (no project: pass --project-dir)"
        print(f"{directory}: {summary}", file=sys.stderr)
    return 1 if has_errors(findings) else 0


def _catalog_generate(args: argparse.Namespace) -> int:
    from runner.devtools.packaging import catalog
    from runner.devtools.packaging.findings import has_errors
    from runner.devtools.packaging.loader import load_bundle
    from runner.devtools.packaging.validate import validate_loaded
    from runner.devtools.packaging.write import write_files

    if not Path(args.bundle).is_dir():
        problem = "is not a directory" if Path(args.bundle).exists() else "does not exist"
        raise ConfigError(
            f"--bundle {args.bundle} {problem}; give a bundle directory "
            "(`ansible-operator bundle generate` writes bundle/)"
        )
    bundle = load_bundle(Path(args.bundle))
    findings = validate_loaded(bundle)
    if has_errors(findings):
        problems = "\n".join(str(f) for f in findings if f.level == "error")
        raise ConfigError(f"{args.bundle}: the bundle is not valid:\n{problems}")
    package = args.package or (bundle.annotations or {}).get(
        "operators.operatorframework.io.bundle.package.v1"
    )
    if not package:
        raise ConfigError("no --package and the bundle's annotations name none")
    documents = (
        catalog.load_documents(Path(args.from_dir), package=package) if args.from_dir else []
    )
    options = catalog.CatalogOptions(
        package=package, channel=args.channel, bundle_image=args.bundle_image
    )
    documents = catalog.add_bundle(documents, bundle, options)
    output = Path(args.output)
    suffix = "json" if args.format == "json" else "yaml"
    files = {
        f"{output.name}/{package}/index.{suffix}": catalog.render(documents, fmt=args.format),
        "catalog.Dockerfile": catalog.catalog_dockerfile(output.name),
    }
    _print_changed(write_files(output.parent, files), str(output))
    return 0


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `bundle generate|validate` and `catalog generate` on the top-level parser."""
    bundle = sub.add_parser(
        "bundle",
        help="OLM bundles: generate from config/, validate",
        description="Generate and validate registry+v1 bundles for OLM.",
    )
    actions = bundle.add_subparsers(dest="action", required=True, metavar="ACTION")
    generate = actions.add_parser(
        "generate",
        help="write bundle/ and bundle.Dockerfile from config/",
        description="Render config/manifests (kustomize subset) into a bundle: CSV, CRDs, "
        "extra manifests, metadata/annotations.yaml, scorecard config, bundle.Dockerfile.",
    )
    generate.add_argument("--version", required=True, help="the bundle's semantic version")
    generate.add_argument("--channels", default="alpha", help="comma list (default: alpha)")
    generate.add_argument("--default-channel", help="default: the first channel")
    generate.add_argument("--replaces", help="the CSV this one upgrades (NAME.vX.Y.Z)")
    generate.add_argument("--skip-range", help="olm.skipRange, e.g. '>=0.1.0 <0.2.0'")
    generate.add_argument("--image", help="operator image for the manager container")
    generate.add_argument("--package", help="package name (default: PROJECT's projectName)")
    generate.add_argument("--output-dir", default="bundle", help="default: bundle")
    generate.add_argument("--project-dir", default=".", help="default: .")
    generate.set_defaults(handler=_bundle_generate)
    validate = actions.add_parser(
        "validate",
        help="check a bundle directory (exit 1 on errors)",
        description="Check a bundle: CSV fields, names and versions, owned CRDs, examples, "
        "install modes, annotations vs bundle.Dockerfile, images, and RBAC against the "
        "project's roles and playbooks.",
    )
    validate.add_argument("directory", help="the bundle directory, e.g. bundle/")
    validate.add_argument(
        "--project-dir", help="project whose roles to scan (default: the bundle's parent)"
    )
    validate.add_argument("--dockerfile", help="default: bundle.Dockerfile beside the bundle")
    validate.add_argument("--output", choices=("text", "json"), default="text")
    validate.add_argument(
        "--suite",
        choices=("olm-v0", "olm-v1"),
        default="olm-v0",
        help="olm-v0: the registry+v1 rules OLM v0 applies (default); olm-v1: those plus "
        "what OLM v1 refuses (install modes, dependencies, OperatorConditions, objects "
        "shared with other extensions' bundles)",
    )
    validate.add_argument(
        "--other-bundle",
        action="append",
        metavar="DIR",
        help="(olm-v1) a bundle of another extension on the same cluster; objects both "
        "would install are errors (repeatable)",
    )
    validate.set_defaults(handler=_bundle_validate)

    catalog = sub.add_parser(
        "catalog",
        help="OLM file-based catalogs",
        description="Build file-based catalogs (olm.package, olm.channel, olm.bundle).",
    )
    catalog_actions = catalog.add_subparsers(dest="action", required=True, metavar="ACTION")
    cgen = catalog_actions.add_parser(
        "generate",
        help="write catalog/<package>/index.yaml from a bundle",
        description="Add a bundle to a file-based catalog; with --from, as the new head of "
        "its channel(s) (an upgrade edge replacing the previous head).",
    )
    cgen.add_argument("--bundle", required=True, help="the bundle directory")
    cgen.add_argument("--package", help="default: the bundle's package annotation")
    cgen.add_argument("--channel", help="default: the bundle's channels")
    cgen.add_argument("--from", dest="from_dir", help="an existing catalog to extend")
    cgen.add_argument("--output", default="catalog", help="default: catalog")
    cgen.add_argument(
        "--bundle-image",
        help="default: <operator image>-bundle:v<version>; '' leaves it empty (OLM then "
        "installs from the embedded manifests, without unpacking an image)",
    )
    cgen.add_argument("--format", choices=("yaml", "json"), default="yaml")
    cgen.set_defaults(handler=_catalog_generate)
