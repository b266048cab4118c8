"""`molecule test` of the repository's scenarios, of a freshly scaffolded project's and of
a compatibility operator's, side by side on the session's cluster.

`molecule/default` runs the memcached sample operator end to end; `molecule/role` runs
roles/memcached alone with the extra-vars of `ansible-operator vars`. A project made by
`init` + `create api --kind Guestbook` gets the same two kinds of scenario,
`molecule/guestbook` and `molecule/guestbook-role`. All of them use the cluster $KUBECONFIG
names when it is set, so here they run on the session's cluster (the `kubeconfig` fixture)
and never start a second one.

`tests/fixtures/compat-operator` is a compatibility operator of our own, laid out as an
operator-sdk project (`init` + `create api`, requirements.yml, `molecule/default` with a
`tasks/<kind>_test.yml` per kind). It uses what existing operators rely on: an inventory
directory with group_vars and host_vars, ansible.cfg with a filter plugin path, a filter
next to a role, vault-encrypted role vars (`--ansible-args` with a password file), a role
from a collection by FQCN with `snakeCaseParameters: false`,
`watchClusterScopedResources` with a selector, a playbook with a finalizer playbook and
facts across plays, `requeue_after`, a `manageStatus: false` watch of Secrets,
`k8s_status` with keys of its own, `osdk_metric` of all four types (empty ones too),
`include_role` / `import_tasks`, handlers, `block` / `rescue`, loops with `until`,
`lookup('kubernetes.core.k8s')` and `delegate_to: localhost`. The project is copied
first: Molecule and the operator write next to it. Its CRDs are its own, so its scenario
also installs them and removes them at cleanup.

Every scenario starts when the module does (support.molecule_run runs a few at once);
each test waits for its own and prints its wall time.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic.exceptions import NotFoundError
from support.cli import run_cli
from support.kube import documents
from support.molecule_run import MoleculeRuns, workers
from support.operator import install_crd

REPO = Path(__file__).resolve().parents[2]
COMPAT_FIXTURE = REPO / "tests" / "fixtures" / "compat-operator"
REPOSITORY_SCENARIOS = ("default", "role")
SCAFFOLDED_SCENARIOS = ("default", "guestbook", "guestbook-role")


def _scaffold_guestbook(root: Path) -> Path:
    root.mkdir()
    for args in (
        ["init", "--domain", "example.com"],
        ["create", "api", "--group", "web", "--version", "v1alpha1", "--kind", "Guestbook"],
    ):
        run_cli(root, *args, timeout=120)
    return root


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("molecule")
    compat = root / "compat-operator"
    shutil.copytree(COMPAT_FIXTURE, compat)
    return {
        "repository": REPO,
        "guestbook": _scaffold_guestbook(root / "guestbook-operator"),
        "compat": compat,
    }


@pytest.fixture(scope="module")
def scenario_runs(
    request: pytest.FixtureRequest,
    projects: dict[str, Path],
    kubeconfig: Path,
    dyn: Any,
    memcached_crd: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[MoleculeRuns]:
    """The scenarios of the module the session runs, started at once, longest first
    (`MoleculeRuns` runs a few together). The CRDs two scenarios share (Memcached: the
    session's `memcached_crd`; Guestbook, which the scaffolded `default` scenario leaves
    installed anyway) are installed before, and the Guestbook CRD removed after when
    this fixture installed it."""
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    guestbook_crds = [
        doc
        for path in sorted((projects["guestbook"] / "config" / "crd" / "bases").glob("*.yaml"))
        for doc in documents(path)
    ]
    installed = []
    for body in guestbook_crds:
        try:
            crds.get(name=body["metadata"]["name"])
        except NotFoundError:
            installed.append(body["metadata"]["name"])
        install_crd(dyn, body)
    runs = MoleculeRuns(kubeconfig, tmp_path_factory.mktemp("molecule-runs"), workers=workers())
    selected = _selected(request.session.items)
    try:
        for project, scenario in LONGEST_FIRST:
            if (project, scenario) in selected:
                runs.start(projects[project], scenario)
        yield runs
    finally:
        runs.close()
        for name in installed:
            with contextlib.suppress(NotFoundError):
                crds.delete(name=name)


# Every scenario of the module as (project, scenario), in the order they start: the
# longest first, so that the last to end is a short one.
LONGEST_FIRST = (
    ("compat", "default"),
    ("repository", "default"),
    ("guestbook", "guestbook"),
    ("repository", "role"),
    ("guestbook", "guestbook-role"),
    ("guestbook", "default"),
)
_PROJECT_OF_TEST = {
    "test_compat_operator_molecule_default": "compat",
    "test_repository_scenario": "repository",
    "test_scaffolded_project_scenario": "guestbook",
}


def _selected(items: list[pytest.Item]) -> set[tuple[str, str]]:
    """The (project, scenario) pairs whose tests of this module the session runs (a
    `-k` or node id selection starts only those)."""
    found = set()
    for item in items:
        if not isinstance(item, pytest.Function) or item.module is None:
            continue
        if item.module.__name__ != __name__:
            continue
        project = _PROJECT_OF_TEST[item.originalname]
        params = getattr(item, "callspec", None)
        found.add((project, params.params["scenario"] if params else "default"))
    return found


def _check(
    runs: MoleculeRuns, project: Path, scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fail with the end of Molecule's output unless the scenario passed."""
    run = runs.result(project, scenario)
    with capsys.disabled():
        print(
            f"\nmolecule test -s {scenario} ({project.name}): {run.seconds:.0f} s wall time "
            f"(exit {run.returncode})"
        )
    assert run.returncode == 0, (
        f"molecule test -s {scenario} failed; its output ends:\n{run.tail()}"
    )


@pytest.mark.timeout(3600)
def test_compat_operator_molecule_default(
    scenario_runs: MoleculeRuns, projects: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _check(scenario_runs, projects["compat"], "default", capsys)


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("scenario", REPOSITORY_SCENARIOS)
def test_repository_scenario(
    scenario: str,
    scenario_runs: MoleculeRuns,
    projects: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _check(scenario_runs, projects["repository"], scenario, capsys)


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("scenario", SCAFFOLDED_SCENARIOS)
def test_scaffolded_project_scenario(
    scenario: str,
    scenario_runs: MoleculeRuns,
    projects: dict[str, Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _check(scenario_runs, projects["guestbook"], scenario, capsys)
