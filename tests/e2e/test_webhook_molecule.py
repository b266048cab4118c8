"""A project scaffolded with `create webhook` passes its own generated Molecule scenario.

`init` + `create api --kind Guestbook` + `create webhook --defaulting
--programmatic-validation --conversion`, then `molecule test -s guestbook-webhooks`:
the operator runs the kind's role and serves the generated webhook roles, registered at
its loopback server against the tests' cluster (limited to the scenario's namespace),
and the scenario checks through the API server that a new Guestbook is defaulted and a
negative size refused with the validation role's message.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_cli
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
        run_cli(root, *args, timeout=120)
    return root


@pytest.mark.timeout(1800)
def test_scaffolded_webhooks_scenario(
    webhook_project: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    molecule_test(webhook_project, "guestbook-webhooks", kubeconfig=kubeconfig, capsys=capsys)
