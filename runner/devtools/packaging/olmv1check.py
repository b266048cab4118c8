"""The `olm-v1` rule suite of `bundle validate`: what OLM v1 (operator-controller)
refuses or ignores in a registry+v1 bundle that OLM v0 accepts (pure).

- install modes: OLM v1 installs an extension cluster-wide; a CSV must support
  `AllNamespaces` (OwnNamespace/SingleNamespace are behind an alpha feature gate);
- dependencies: OLM v1 resolves no dependencies between bundles, so an `olm.gvk.required`,
  `olm.package.required` or `olm.constraint` (in `metadata/dependencies.yaml`,
  `metadata/properties.yaml` or the CSV's `spec.customresourcedefinitions.required`)
  would go unmet;
- OperatorConditions: OLM v1 creates no OperatorCondition and sets no
  `OPERATOR_CONDITION_NAME`; an operator that uses them waits for ever;
- ownership: every object belongs to exactly one ClusterExtension; installing a bundle
  with an object another extension already installed (the same CRD, cluster role, ...)
  fails, so the bundle is checked against the other bundles given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runner.devtools.packaging import olmnames as olm
from runner.devtools.packaging import yamlio
from runner.devtools.packaging.findings import Finding, error
from runner.devtools.packaging.loader import LoadedBundle
from runner.errors import ConfigError
from runner.structs import bodies

Obj = dict[str, Any]
DEPENDENCIES_FILE = "metadata/dependencies.yaml"
PROPERTIES_FILE = "metadata/properties.yaml"
# Dependency kinds: as written in dependencies.yaml, and as properties.
_DEPENDENCY_TYPES = ("olm.gvk", "olm.package", "olm.constraint")
_REQUIRED_PROPERTIES = ("olm.gvk.required", "olm.package.required", "olm.constraint")
_CONDITION_ENV = "OPERATOR_CONDITION_NAME"
_CLUSTER_SCOPED = {kind for kind, namespaced in olm.SUPPORTED_KINDS.items() if not namespaced}


def _metadata_entries(bundle: LoadedBundle, relative: str, key: str) -> list[Obj] | str:
    """The `key` list of a metadata file (absent: empty); a message when unreadable."""
    path = bundle.directory / relative
    if not path.is_file():
        return []
    try:
        documents = yamlio.load_all(path)
    except ConfigError as exc:
        return f"cannot read it: {exc}"
    data = documents[0] if documents else None
    entries = (data or {}).get(key) if isinstance(data, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list):
        return f"`{key}` must be a list"
    return [e for e in entries if isinstance(e, dict)]


def install_modes(file: str, csv: Obj) -> list[Finding]:
    modes = (csv.get("spec") or {}).get("installModes") or []
    supported = {str(m.get("type")) for m in modes if isinstance(m, dict) and m.get("supported")}
    if "AllNamespaces" in supported:
        return []
    listed = ", ".join(sorted(supported)) or "none"
    return [
        error(
            file,
            "spec.installModes",
            f"OLM v1 installs extensions in AllNamespaces mode only, which this CSV does not "
            f"support (supported: {listed}); add {{type: AllNamespaces, supported: true}}",
        )
    ]


def dependencies(bundle: LoadedBundle, file: str, csv: Obj) -> list[Finding]:
    found: list[Finding] = []
    for relative, key, types in (
        (DEPENDENCIES_FILE, "dependencies", _DEPENDENCY_TYPES),
        (PROPERTIES_FILE, "properties", _REQUIRED_PROPERTIES),
    ):
        entries = _metadata_entries(bundle, relative, key)
        if isinstance(entries, str):
            found.append(error(relative, key, entries))
            continue
        for index, entry in enumerate(entries):
            kind = str(entry.get("type"))
            if kind in types:
                found.append(
                    error(
                        relative,
                        f"{key}[{index}].type",
                        f"{kind}: OLM v1 resolves no dependencies between bundles, so this "
                        "one would never be installed for the operator; remove it and "
                        "install what it needs separately",
                    )
                )
    required = ((csv.get("spec") or {}).get("customresourcedefinitions") or {}).get("required")
    for index, crd in enumerate(required or []):
        name = crd.get("name") if isinstance(crd, dict) else crd
        found.append(
            error(
                file,
                f"spec.customresourcedefinitions.required[{index}]",
                f"{name}: a required API is a dependency (olm.gvk.required), which OLM v1 "
                "does not resolve; install the extension that owns it separately and drop "
                "it here",
            )
        )
    return found


def _deployments(csv: Obj) -> list[Obj]:
    install = ((csv.get("spec") or {}).get("install") or {}).get("spec") or {}
    return [d for d in install.get("deployments") or [] if isinstance(d, dict)]


def operator_conditions(bundle: LoadedBundle, file: str, csv: Obj) -> list[Finding]:
    found: list[Finding] = []
    for manifest, obj in bundle.objects("OperatorCondition"):
        name = bodies.metadata(obj).get("name")
        found.append(
            error(manifest, "kind", f"OperatorCondition {name}: OLM v1 has no OperatorConditions")
        )
    install = ((csv.get("spec") or {}).get("install") or {}).get("spec") or {}
    for field in ("clusterPermissions", "permissions"):
        for i, entry in enumerate(install.get(field) or []):
            for j, rule in enumerate((entry or {}).get("rules") or []):
                groups = rule.get("apiGroups") or []
                resources = rule.get("resources") or []
                if olm_group(groups) and "operatorconditions" in resources:
                    found.append(
                        error(
                            file,
                            f"spec.install.spec.{field}[{i}].rules[{j}]",
                            "grants access to operatorconditions: OLM v1 creates no "
                            "OperatorCondition for the operator to read or update",
                        )
                    )
    for d_index, deployment in enumerate(_deployments(csv)):
        pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c_index, container in enumerate(pod.get("containers") or []):
            for env in container.get("env") or []:
                if isinstance(env, dict) and env.get("name") == _CONDITION_ENV:
                    found.append(
                        error(
                            file,
                            f"spec.install.spec.deployments[{d_index}].spec.template.spec."
                            f"containers[{c_index}].env",
                            f"{_CONDITION_ENV}: OLM v1 sets no OperatorCondition name; the "
                            "operator must not rely on one",
                        )
                    )
    return found


def olm_group(groups: Iterable[str]) -> bool:
    return any(g in ("operators.coreos.com", "*") for g in groups)


def _owned_objects(bundle: LoadedBundle) -> dict[tuple[str, str], str]:
    """(kind, name) of what installing the bundle creates, by the file naming it: every
    manifest but the CSV, and the CRDs the CSV owns."""
    owned: dict[tuple[str, str], str] = {}
    for file, obj in bundle.objects():
        kind = str(obj.get("kind"))
        if kind == olm.CSV_KIND:
            crds = ((obj.get("spec") or {}).get("customresourcedefinitions") or {}).get("owned")
            for crd in crds or []:
                if isinstance(crd, dict) and crd.get("name"):
                    owned.setdefault(("CustomResourceDefinition", str(crd["name"])), file)
            continue
        name = bodies.metadata(obj).get("name")
        if name:
            owned[(kind, str(name))] = file
    return owned


def shared_objects(bundle: LoadedBundle, others: Iterable[LoadedBundle]) -> list[Finding]:
    """Objects this bundle and another would both install: OLM v1 lets one extension
    own each object, so the second installation fails. Cluster-scoped objects always
    collide; namespaced ones when both extensions install into one namespace."""
    mine = _owned_objects(bundle)
    found: list[Finding] = []
    for other in others:
        theirs = _owned_objects(other)
        for (kind, name), file in sorted(mine.items()):
            if (kind, name) not in theirs:
                continue
            scope = "" if kind in _CLUSTER_SCOPED else " (when both install into one namespace)"
            found.append(
                error(
                    file,
                    "metadata.name",
                    f"{kind} {name} is also installed by the bundle {other.directory} "
                    f"({theirs[(kind, name)]}){scope}: OLM v1 lets only one ClusterExtension "
                    "own an object; give it another name or ship it in one bundle only",
                )
            )
    return found


def check_bundle(bundle: LoadedBundle, others: Iterable[LoadedBundle] = ()) -> list[Finding]:
    """Every OLM v1 rule on a loaded bundle."""
    found: list[Finding] = []
    for file, csv in bundle.csvs:
        found += install_modes(file, csv)
        found += dependencies(bundle, file, csv)
        found += operator_conditions(bundle, file, csv)
    return found + shared_objects(bundle, others)
