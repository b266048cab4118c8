"""An ansible-core the hooks were not tested with: the operator says so once and runs the
plain ansible-runner way (no zygote, no payload-sharing plugin), with the same results.

The operator is made to see ansible-core 2.99.0 (its package metadata, which the start-up
check reads) by a `sitecustomize` on its `PYTHONPATH`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kube import condition, wait_for
from support.operator import OperatorProcess, crd, install_crd, write_project

from runner.ansible.artifacts import latest_run
from runner.ansible.hooks import payloads
from runner.ansible.inputs import private_data_dir
from runner.ansible.rundir import process_dirs
from runner.structs.gvk import GVK

GROUP = "hooks.test.example.com"
KIND = GVK(GROUP, "v1alpha1", "Untested")
ROLE = f"""
- name: A module task
  ansible.builtin.command: echo done
  register: said
- name: Its output in the status
  operator_sdk.util.k8s_status:
    api_version: {GROUP}/v1alpha1
    kind: Untested
    name: "{{{{ ansible_operator_meta.name }}}}"
    namespace: "{{{{ ansible_operator_meta.namespace }}}}"
    status:
      said: "{{{{ said.stdout }}}}"
"""
SITECUSTOMIZE = """
from importlib import metadata

_real_version = metadata.version


def _version(name):
    return "2.99.0" if name == "ansible-core" else _real_version(name)


metadata.version = _version
"""


@pytest.fixture(scope="module")
def untested(dyn: Any) -> Any:
    return install_crd(dyn, crd(group=GROUP, kind="Untested"))


@pytest.fixture
def operator(
    untested: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> Iterator[OperatorProcess]:
    watches = [{"group": GROUP, "version": "v1alpha1", "kind": "Untested", "role": "untested"}]
    project = write_project(tmp_path / "project", watches=watches, roles={"untested": ROLE})
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    proc = OperatorProcess(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        args=["--ansible-backend", "fast"],
        env={"WATCH_NAMESPACE": namespace, "PYTHONPATH": str(site)},
    )
    yield proc
    proc.stop()
    print(proc.log()[-4000:])


def zygotes_under(path: Path) -> list[int]:
    """Zygote processes whose store is under `path` (the operator's TMPDIR is there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = [part.decode(errors="replace") for part in argv]
        if "runner.ansible.fastbackend.zygoteprocess" in text and any(
            str(path) in part for part in text
        ):
            found.append(int(entry.name))
    return found


def test_an_untested_ansible_core_runs_the_plain_ansible_runner_way(
    operator: OperatorProcess, untested: Any, namespace: str, tmp_path: Path
) -> None:
    untested.create(
        body={"apiVersion": f"{GROUP}/v1alpha1", "kind": "Untested", "metadata": {"name": "u"}},
        namespace=namespace,
    )

    def successful() -> dict[str, Any] | None:
        found = untested.get(name="u", namespace=namespace)
        ok = condition(found, "Successful")
        status: dict[str, Any] = found.to_dict().get("status") or {}
        return status if ok and ok["status"] == "True" else None

    status = wait_for(successful, timeout=120, message="the CR Successful")
    assert status["said"] == "done"

    log = operator.log()
    assert log.count("hooks were tested with") == 1, log
    assert "ansible-core 2.99.0 is not a version the fast backend's" in log
    assert "runs go through plain ansible-runner" in log
    assert zygotes_under(tmp_path) == []
    # ansible-runner's record of the run: the payload-sharing plugin was not loaded.
    (own,) = process_dirs(tmp_path / "runner")  # the operator's own run directory
    run = latest_run(private_data_dir(own, KIND, namespace, "u"))
    assert run is not None and run.rc == 0
    env = json.loads((run.path / "command").read_text())["env"]
    assert payloads.STORE_ENV not in env
    assert "hooks/callback_plugins" not in env.get("ANSIBLE_CALLBACK_PLUGINS", "")
    assert operator.running()
