"""`markUnsafe`: a template written into a CR's spec runs only when the watch renders spec
values (the default, kept for drop-in), never with `markUnsafe: true` (what the scaffold
writes); the operator warns at start-up about every watch that renders them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.kube import condition, wait_for
from support.operator import crd, install_crd, operator_running, write_project

GROUP = "unsafe.test.example.com"

# Uses the spec value the way roles do: in a template of their own.
ECHO_ROLE = """
- name: Show the spec value
  ansible.builtin.debug:
    msg: "payload is {{ payload }}"
"""


def test_a_spec_template_runs_only_without_mark_unsafe(
    dyn: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    kinds = {"Rendered": False, "Marked": True}
    resources = {kind: install_crd(dyn, crd(group=GROUP, kind=kind)) for kind in kinds}
    watches = [
        {
            "group": GROUP,
            "version": "v1alpha1",
            "kind": kind,
            "role": "echo",
            "markUnsafe": mark_unsafe,
        }
        for kind, mark_unsafe in kinds.items()
    ]
    project = write_project(tmp_path / "project", watches=watches, roles={"echo": ECHO_ROLE})
    planted = {kind: tmp_path / f"planted-by-{kind.lower()}" for kind in kinds}
    with operator_running(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        env={"WATCH_NAMESPACE": namespace},
    ) as proc:
        for kind, resource in resources.items():
            payload = f"{{{{ lookup('pipe', 'touch {planted[kind]}') }}}}"
            resource.create(
                body={
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": kind,
                    "metadata": {"name": "cr"},
                    "spec": {"payload": payload},
                },
                namespace=namespace,
            )
        for kind, resource in resources.items():

            def successful(resource: Any = resource) -> bool:
                found = condition(resource.get(name="cr", namespace=namespace), "Successful")
                return bool(found and found["status"] == "True")

            wait_for(successful, timeout=90, message=f"{kind} cr Successful")
        log = proc.log()

    assert planted["Rendered"].exists(), "the default renders spec values as templates"
    assert not planted["Marked"].exists(), "markUnsafe: true must pass the template as text"
    warnings = [line for line in log.splitlines() if "renders the spec values" in line]
    assert len(warnings) == 1
    assert f"{GROUP}/v1alpha1, Kind=Rendered" in warnings[0]
    assert "markUnsafe: true" in warnings[0]
