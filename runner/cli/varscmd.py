"""`ansible-operator vars`: the extra-vars the operator would pass to a run on one CR.

Role tests (`molecule/role/`) run a role directly, without the operator, with exactly what
a reconcile of the same custom resource would hand to Ansible. So the numbers come from
the runtime's own function, `runner.operator.reconciler.extra_vars`, and the CR is first put
in the shape a reconcile sees it in:

- `metadata.managedFields` is dropped, as the informer's store drops it;
- the watch's finalizer is in `metadata.finalizers`, as the reconciler adds it before the
  first run;
- `metadata.namespace` is the CR's own or `--namespace` (a CR file often has none);
- `--deleting` gives the finalizer's run: `metadata.deletionTimestamp` is set (now) unless
  the file has one, and a file that has one gets the finalizer's run anyway;
- with `manageStatus` (the default) the status has the Running condition the reconcile
  writes before the run, as the role sees it (the Go operator's object after that write).

Other fields the API server would set (uid, resourceVersion, creationTimestamp) are
whatever the file holds. Everything but `_cmd_vars` is pure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from runner.errors import ConfigError
from runner.structs import GVK, bodies
from runner.structs.bodies import KubeObject
from runner.util.yamlerror import describe_yaml_error

if TYPE_CHECKING:
    from runner.watches.model import Watch

__all__ = [
    "add_commands",
    "as_read",
    "cr_extra_vars",
    "find_watch",
    "parse_cr",
    "render",
    "watches_environ",
]

OUTPUTS = ("yaml", "json")


class _Loader(yaml.SafeLoader):
    """YAML as the API server reads it: timestamps stay strings (the JSON a run gets)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `vars` on the top-level parser."""
    cmd = sub.add_parser(
        "vars",
        help="print the extra-vars a run of the operator gets for a custom resource file",
        description="Print the extra-vars the operator passes to the role or playbook of "
        "the watch for CR_FILE, as a reconcile of that resource would (same code path). "
        "Run it where `run` runs: paths in watches.yaml are relative to the current "
        "directory.",
    )
    cmd.add_argument("cr_file", metavar="CR_FILE", help="YAML file with one CR, or - for stdin")
    cmd.add_argument(
        "--watches-file",
        default="./watches.yaml",
        help="path to the watches file (default: ./watches.yaml)",
    )
    cmd.add_argument(
        "--namespace",
        "-n",
        help="namespace of the CR when the file has none ('' for a cluster-scoped kind)",
    )
    cmd.add_argument(
        "--deleting",
        action="store_true",
        help="the finalizer's run: as if the CR were being deleted",
    )
    cmd.add_argument(
        "--output", "-o", choices=OUTPUTS, default="yaml", help="output format (default: yaml)"
    )
    # As `run` has them: they decide where the watches' roles are found.
    cmd.add_argument("--ansible-roles-path", default="", help="sets ANSIBLE_ROLES_PATH")
    cmd.add_argument("--ansible-collections-path", default="", help="sets ANSIBLE_COLLECTIONS_PATH")
    cmd.set_defaults(handler=_cmd_vars)


def parse_cr(text: str, *, source: str) -> dict[str, Any]:
    """The one custom resource in YAML `text`; ConfigError naming `source` otherwise."""
    try:
        docs = [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as err:
        raise ConfigError(f"{source}: not valid YAML {describe_yaml_error(err)}") from None
    if len(docs) != 1:
        raise ConfigError(f"{source}: expected one custom resource, found {len(docs)} documents")
    obj = docs[0]
    if not isinstance(obj, dict):
        raise ConfigError(f"{source}: expected a custom resource (a mapping)")
    for key in ("apiVersion", "kind"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise ConfigError(f"{source}: the custom resource has no {key}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ConfigError(f"{source}: the custom resource has no metadata.name")
    return obj


def find_watch(watches: Sequence[Watch], obj: Mapping[str, Any], *, source: str) -> Watch:
    """The watch for the CR's group, version and kind."""
    gvk = GVK.from_api_version(str(obj["apiVersion"]), str(obj["kind"]))
    for watch in watches:
        if watch.gvk == gvk:
            return watch
    known = "; ".join(str(w.gvk) for w in watches) or "none"
    raise ConfigError(f"{source}: no watch for {gvk} (the watches file has: {known})")


def as_read(
    watch: Watch,
    obj: Mapping[str, Any],
    *,
    namespace: str | None,
    deleting: bool,
    now: datetime,
    source: str,
) -> KubeObject:
    """`obj` as a reconcile reads it (see the module docstring); a new dict."""
    from runner.k8s.informer import strip
    from runner.status import conditions

    meta: dict[str, Any] = dict(bodies.metadata(obj))
    name = meta.get("name")
    own = meta.get("namespace")
    if own and namespace is not None and namespace != own:
        raise ConfigError(
            f"{source}: {obj.get('kind')} {name} is in namespace {own}, not {namespace}"
        )
    if not own:
        if namespace is None:
            raise ConfigError(
                f"{source}: {obj.get('kind')} {name} has no metadata.namespace; pass "
                "--namespace NAMESPACE (the namespace it would live in), or --namespace '' "
                "for a cluster-scoped kind"
            )
        if namespace:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
    if watch.finalizer is not None:
        finalizers = list(meta.get("finalizers") or [])
        if watch.finalizer.name not in finalizers:
            meta["finalizers"] = [*finalizers, watch.finalizer.name]
    if deleting and not meta.get("deletionTimestamp"):
        meta["deletionTimestamp"] = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta.setdefault("deletionGracePeriodSeconds", 0)
    read: dict[str, Any] = {**obj, "metadata": meta}
    if watch.manage_status:
        status = obj.get("status")
        read["status"] = conditions.running(
            status if isinstance(status, Mapping) else None, now=now
        )
    return strip(cast(KubeObject, read))


def cr_extra_vars(
    watches: Sequence[Watch],
    obj: Mapping[str, Any],
    *,
    namespace: str | None,
    deleting: bool = False,
    now: datetime | None = None,
    source: str = "CR",
) -> dict[str, Any]:
    """The extra-vars a reconcile of `obj` passes to its watch's role or playbook."""
    from runner.operator.reconciler import extra_vars

    watch = find_watch(watches, obj, source=source)
    read = as_read(
        watch,
        obj,
        namespace=namespace,
        deleting=deleting,
        now=now or datetime.now(UTC),
        source=source,
    )
    is_deletion = bool(read["metadata"].get("deletionTimestamp"))
    if is_deletion and watch.finalizer is None:
        raise ConfigError(
            f"{source}: {watch.gvk} has no finalizer in the watches file, so the operator "
            "runs nothing when the CR is deleted"
        )
    return extra_vars(watch, read, deleting=is_deletion)


def render(extravars: Mapping[str, Any], output: str) -> str:
    """JSON as the run's `env/extravars` holds it (keys sorted), or YAML in run order."""
    if output == "json":
        return json.dumps(extravars, indent=2, sort_keys=True) + "\n"
    text: str = yaml.safe_dump(
        dict(extravars), sort_keys=False, default_flow_style=False, allow_unicode=True
    )
    return text


def watches_environ(
    environ: Mapping[str, str], *, roles_path: str, collections_path: str
) -> dict[str, str]:
    """The environment `run` loads the watches file with: its roles and collections paths,
    the bundled operator_sdk.util last."""
    from runner.ansible.bundledcollection import bundled_collections_path
    from runner.watches.model import DEFAULT_COLLECTIONS_PATH

    result = dict(environ)
    if roles_path:
        result["ANSIBLE_ROLES_PATH"] = roles_path
    collections = collections_path or environ.get(
        "ANSIBLE_COLLECTIONS_PATH", ":".join(DEFAULT_COLLECTIONS_PATH)
    )
    result["ANSIBLE_COLLECTIONS_PATH"] = f"{collections}:{bundled_collections_path()}"
    return result


def _cmd_vars(args: argparse.Namespace) -> int:
    from runner.watches import model as watches_mod

    cwd = Path.cwd()
    environ = watches_environ(
        os.environ,
        roles_path=args.ansible_roles_path,
        collections_path=args.ansible_collections_path,
    )
    watches = watches_mod.load(args.watches_file, environ=environ, cwd=cwd)
    for message in (message for watch in watches for message in watch.warnings):
        print(f"warning: {message}", file=sys.stderr)
    source = "stdin" if args.cr_file == "-" else str(args.cr_file)
    if args.cr_file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = (cwd / args.cr_file).read_text(encoding="utf-8")
        except OSError as err:
            raise ConfigError(f"{source}: cannot read the CR file: {err.strerror}") from None
    obj = parse_cr(text, source=source)
    extravars = cr_extra_vars(
        watches, obj, namespace=args.namespace, deleting=args.deleting, source=source
    )
    sys.stdout.write(render(extravars, args.output))
    return 0
