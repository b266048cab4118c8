"""A project scaffolded with `create webhook` passes its own generated Molecule scenario.

`init` + `create api --kind Guestbook` + `create webhook --defaulting
--programmatic-validation --conversion`, then `molecule test -s guestbook-webhooks`:
the operator runs the kind's role and serves the generated webhook roles, registered at
its loopback server against the tests' cluster (limited to the scenario's namespace),
and the scenario checks through the API server that a new Guestbook is defaulted and a
negative size refused with the validation role's message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.molecule_run import molecule_test


@pytest.fixture(scope="module")
def webhook_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("molecule-webhooks") / "guestbook-operator"
    root.mkdir()
    kind = ["--group", "web", "--version", "v1alpha1", "--kind", "Guestbook"]
    for args in (
        ["init", "--domain", "example.com"],
        ["create", "api", *kind],
        ["create", "webhook", *kind, "--defaulting", "--programmatic-validation", "--conversion"],
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
def test_scaffolded_webhooks_scenario(
    webhook_project: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    molecule_test(webhook_project, "guestbook-webhooks", kubeconfig=kubeconfig, capsys=capsys)
