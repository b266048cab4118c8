"""`init` + `create api` against the real `operator-sdk init --plugins ansible` +
`create api`: the same files (ours may add the ones listed here, and no others) and the
same Makefile targets (again, ours may add the listed ones), and the same plural and API
group for the same flags.

operator-sdk is the one gomodules/tools builds from Go modules (cached; a cold build takes
several minutes). It runs with a throwaway HOME and touches nothing outside its
directory.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from runner.cli.main import main
from runner.errors import ClusterError

pytestmark = pytest.mark.timeout(1800)

GROUP, VERSION, KIND = "web", "v1alpha1", "Sites"
PROJECT = "webapp"

# Files operator-sdk does not write and ours does, each for a reason.
EXTRA_FILES = {
    ".dockerignore",  # keeps .venv, bin/ and .cluster out of the image build context
    # The CSV base, filled in at init (operator-sdk writes it at `generate kustomize`).
    f"config/manifests/bases/{PROJECT}.clusterserviceversion.yaml",
    # Molecule scenarios on the local cluster, no containers: the operator end to end and
    # the role alone, per kind, with their shared playbooks.
    "molecule/shared/cleanup.yml",
    "molecule/shared/create.yml",
    "molecule/shared/destroy.yml",
    "molecule/shared/operator-converge.yml",
    "molecule/shared/operator-prepare.yml",
    "molecule/shared/role-converge.yml",
    "molecule/shared/role-prepare.yml",
    "molecule/shared/run-role.yml",
    "molecule/shared/tasks/extra-vars.yml",
    "molecule/shared/tasks/install-crds.yml",
    "molecule/shared/tasks/stop-operator.yml",
    "molecule/shared/vars.yml",
    "molecule/sites/molecule.yml",
    "molecule/sites/vars.yml",
    "molecule/sites/verify.yml",
    "molecule/sites-role/molecule.yml",
    "molecule/sites-role/vars.yml",
    "molecule/sites-role/verify.yml",
}

# operator-sdk's files ours does not write: none.
MISSING_FILES: set[str] = set()

# Makefile targets ours adds: the local cluster, the file-based catalog, and the plan of
# a reconcile (`ansible-operator plan`).
EXTRA_TARGETS = {"cluster-up", "cluster-down", "catalog", "plan"}

_TARGET = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_./-]*):(?!=)", re.MULTILINE)


@pytest.fixture(scope="module")
def operator_sdk() -> Path:
    from runner.devtools.cluster import build
    from runner.devtools.cluster.components import tools as tool_components

    wanted = {"operator-sdk": tool_components()["operator-sdk"]}
    if build.missing(wanted.values(), build.cache_root()):
        try:
            build.check_go(c.module for c in wanted.values())
        except ClusterError as exc:  # no Go, or too old: the only reason to skip
            pytest.skip(f"cannot build operator-sdk from Go modules: {exc}")
    return build.ensure_built(wanted.values(), root=build.cache_root())["operator-sdk"]


def _files(root: Path) -> set[str]:
    return {
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and "bin" not in path.relative_to(root).parts
    }


def _targets(makefile: Path) -> set[str]:
    return set(_TARGET.findall(makefile.read_text()))


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory, operator_sdk: Path) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("scaffolds")
    sdk, ours = base / "sdk" / PROJECT, base / "ours" / PROJECT
    sdk.mkdir(parents=True)
    ours.mkdir(parents=True)
    env = {**os.environ, "HOME": str(base / "home")}
    api = ["--group", GROUP, "--version", VERSION, "--kind", KIND, "--generate-role"]
    for command in (["init", "--plugins", "ansible"], ["create", "api", *api]):
        subprocess.run(
            [str(operator_sdk), *command], cwd=sdk, env=env, check=True, capture_output=True
        )
    cwd = Path.cwd()
    try:
        os.chdir(ours)
        assert main(["init"]) == 0
        assert main(["create", "api", *api]) == 0
    finally:
        os.chdir(cwd)
    return sdk, ours


def test_same_files_but_the_listed_extras(projects: tuple[Path, Path]) -> None:
    sdk, ours = _files(projects[0]), _files(projects[1])
    assert sorted(ours - sdk - EXTRA_FILES) == [], "files only ours writes, not listed"
    assert sorted(sdk - ours - MISSING_FILES) == [], "operator-sdk's files ours lacks"
    assert sorted(MISSING_FILES - sdk) == [], "MISSING_FILES names a file operator-sdk lacks"
    assert sorted(EXTRA_FILES - ours) == [], "EXTRA_FILES names a file ours does not write"


def test_same_makefile_targets_but_the_listed_extras(projects: tuple[Path, Path]) -> None:
    sdk, ours = (_targets(root / "Makefile") for root in projects)
    assert sorted(sdk - ours) == []
    assert sorted(ours - sdk) == sorted(EXTRA_TARGETS)


def test_same_domain_group_and_plural(projects: tuple[Path, Path]) -> None:
    # Both default the domain to my.domain and pluralise Sites as sites.
    name = "config/crd/bases/web.my.domain_sites.yaml"
    for root in projects:
        assert (root / name).is_file(), root
