"""`molecule test` of the repository's scenarios and of a freshly scaffolded project's.

`molecule/default` runs the memcached sample operator end to end; `molecule/role` runs
roles/memcached alone with the extra-vars of `ansible-operator vars`. A project made by
`init` + `create api --kind Guestbook` gets the same two kinds of scenario,
`molecule/guestbook` and `molecule/guestbook-role`. All of them use the cluster $KUBECONFIG
names when it is set, so here they run on the session's cluster (the `kubeconfig` fixture)
and never start a second one. Each test prints its wall time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.molecule_run import molecule_test

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def guestbook_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("molecule") / "guestbook-operator"
    root.mkdir()
    for args in (
        ["init", "--domain", "example.com"],
        ["create", "api", "--group", "web", "--version", "v1alpha1", "--kind", "Guestbook"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "runner.cli", *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return root


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("scenario", ["default", "role"])
def test_repository_scenario(
    scenario: str, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    molecule_test(REPO, scenario, kubeconfig=kubeconfig, capsys=capsys)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("scenario", ["default", "guestbook", "guestbook-role"])
def test_scaffolded_project_scenario(
    scenario: str, guestbook_project: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    molecule_test(guestbook_project, scenario, kubeconfig=kubeconfig, capsys=capsys)
