"""Which CRs' data directories outlived their CR: deleted while no operator ran.

A new operator process carries its stopped predecessors' data directories over
(`rundir.carry_runs`); the data directory of a CR deleted meanwhile would then stay
forever, since no delete event ever comes for it and the global artifacts cap keeps each
CR's newest run. Once a watch's first list is in, the data directories of its kind whose
CR is not in that list are the ones to remove (`absent_crs`, pure), and only in the
namespaces the process watches.

Layout (`inputs.private_data_dir`): `<base>/<group>/<version>/<kind>/<namespace>/<name>`,
or `.../<kind>/<name>` for a cluster-scoped kind.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

from runner.ansible.artifacts import find_data_dirs
from runner.ansible.inputs import private_data_dir
from runner.structs.gvk import GVK, NamespacedName

__all__ = ["absent_crs", "cr_data_dirs"]


def absent_crs(
    data_dirs: Iterable[tuple[str, ...]],
    *,
    existing: Collection[NamespacedName],
    namespaces: Collection[str] | None,
) -> list[NamespacedName]:
    """The CRs whose data directories (given by their path below the kind's directory:
    `(namespace, name)`, or `(name,)` when cluster-scoped) should go: not in `existing`
    (the watch's synced list) and in a namespace this process watches (`None`: all).
    Cluster-scoped ones only when all namespaces are watched; any other shape is not a
    CR's data directory of this kind and stays."""
    gone: list[NamespacedName] = []
    for parts in data_dirs:
        if len(parts) == 2:
            key = NamespacedName(namespace=parts[0], name=parts[1])
            if namespaces is not None and key.namespace not in namespaces:
                continue
        elif len(parts) == 1:
            if namespaces is not None:
                continue
            key = NamespacedName(namespace="", name=parts[0])
        else:
            continue
        if key not in existing and key not in gone:
            gone.append(key)
    return gone


def cr_data_dirs(base: Path, gvk: GVK) -> list[tuple[str, ...]]:
    """The data directories of kind `gvk` under `base`, as paths below the kind's own
    directory; none when any directory on the way is a symbolic link."""
    kind_dir = private_data_dir(base, gvk, "", "")
    current = base
    for part in kind_dir.relative_to(base).parts:
        current = current / part
        if current.is_symlink() or not current.is_dir():
            return []
    return [path.relative_to(kind_dir).parts for path in find_data_dirs(kind_dir)]
