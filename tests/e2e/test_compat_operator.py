"""A compatibility operator of our own, laid out as an operator-sdk project (`init` +
`create api`, requirements.yml, `molecule/default` with a `tasks/<kind>_test.yml` per
kind), run end to end by its own Molecule scenario.

`tests/fixtures/compat-operator` uses what existing operators rely on: an inventory
directory with group_vars and host_vars, ansible.cfg with a filter plugin path, a filter
next to a role, vault-encrypted role vars (`--ansible-args` with a password file), a role
from a collection by FQCN with `snakeCaseParameters: false`, `watchClusterScopedResources`
with a selector, a playbook with a finalizer playbook and facts across plays,
`requeue_after`, a `manageStatus: false` watch of Secrets, `k8s_status` with keys of its
own, `osdk_metric` of all four types (empty ones too), `include_role` / `import_tasks`,
handlers, `block` / `rescue`, loops with `until`, `lookup('kubernetes.core.k8s')` and
`delegate_to: localhost`. The project is copied first: Molecule and the operator write
next to it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.molecule_run import molecule_test

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "compat-operator"


@pytest.mark.timeout(1800)
def test_compat_operator_molecule_default(
    tmp_path: Path, kubeconfig: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "compat-operator"
    shutil.copytree(FIXTURE, project)
    molecule_test(project, "default", kubeconfig=kubeconfig, capsys=capsys)
