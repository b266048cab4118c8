"""`ansible-operator run --reload`: role edits, broken edits, and watches.yaml changes are
applied to a running operator without a restart and without losing work."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError
from support.kube import condition, wait_for, wait_steady
from support.operator import OperatorProcess, crd, install_crd, write_project
from support.roles import output_configmap

GROUP = "reload.test.example.com"
API_VERSION = f"{GROUP}/v1alpha1"


def role(value: str) -> str:
    return output_configmap(data=f'value: "{value}"')


def entry(kind: str, **extra: Any) -> dict[str, Any]:
    return {"group": GROUP, "version": "v1alpha1", "kind": kind, "role": "r", **extra}


@pytest.fixture(scope="module")
def kinds(dyn: Any) -> dict[str, Any]:
    return {kind: install_crd(dyn, crd(group=GROUP, kind=kind)) for kind in ("Reloaded", "Added")}


def test_live_reload(
    dyn: Any, kinds: dict[str, Any], kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    project = write_project(
        tmp_path / "project", watches=[entry("Reloaded")], roles={"r": role("v1")}
    )
    tasks = project / "roles" / "r" / "tasks" / "main.yml"
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    proc = OperatorProcess(
        project, kubeconfig=kubeconfig, log=tmp_path / "op.log", args=["--reload"]
    )

    def output(name: str) -> str | None:
        try:
            return str(configmaps.get(name=f"{name}-out", namespace=namespace).data["value"])
        except NotFoundError:
            return None

    def runs() -> int:
        return proc.log().count("running Ansible")

    try:
        wait_for(lambda: "live reload on" in proc.log(), timeout=90, message="reload started")
        body = {"apiVersion": API_VERSION, "kind": "Reloaded", "metadata": {"name": "one"}}
        kinds["Reloaded"].create(body={**body, "spec": {}}, namespace=namespace)
        wait_for(lambda: output("one") == "v1", timeout=60, message="first run")

        # An edit of the role re-runs its CRs.
        tasks.write_text(role("v2"))
        wait_for(lambda: output("one") == "v2", timeout=60, message="role edit applied")

        # A broken edit is reported once with file and line, and nothing runs after it.
        # The save lands just as a run starts (a spec change): that run reads the file
        # half-way through its edit, and the CR keeps its last good status.
        def settled() -> bool:
            cr = kinds["Reloaded"].get(name="one", namespace=namespace)
            cond = condition(cr, "Running")
            return cond is not None and cond.get("reason") == "Successful"

        # The v2 run changed the watched output ConfigMap, which may bring one more run:
        # wait until runs have stopped before starting the one the save must race.
        started = wait_steady(
            lambda: runs() if settled() else None,
            quiet=3,
            timeout=90,
            message="v2 run finished and no run followed",
        )
        kinds["Reloaded"].patch(
            body={"spec": {"touch": "1"}},
            name="one",
            namespace=namespace,
            content_type="application/merge-patch+json",
        )
        wait_for(lambda: runs() > started, timeout=60, message="run started")
        tasks.write_text("- name: broken\n  debug: [unclosed\n")
        wait_for(
            lambda: "not reloading, fix this first" in proc.log(),
            timeout=90,
            message="broken role reported",
        )
        assert f"{tasks}:" in proc.log()
        wait_for(settled, timeout=60, message="the run in flight ended")
        before = runs()
        time.sleep(3)
        assert runs() == before
        cond = condition(kinds["Reloaded"].get(name="one", namespace=namespace), "Successful")
        assert cond is not None and cond["status"] == "True"

        # Fixed: runs again.
        tasks.write_text(role("v3"))
        wait_for(lambda: output("one") == "v3", timeout=60, message="fixed role applied")

        # A new watch starts; an invalid watches.yaml changes nothing.
        watches = project / "watches.yaml"
        watches.write_text(yaml.safe_dump([entry("Reloaded"), entry("Added")]))
        wait_for(
            lambda: re.search(r"started watching \S+, Kind=Added", proc.log()),
            timeout=90,
            message="new watch",
        )
        added = {"apiVersion": API_VERSION, "kind": "Added", "metadata": {"name": "two"}}
        kinds["Added"].create(body={**added, "spec": {}}, namespace=namespace)
        wait_for(lambda: output("two") == "v3", timeout=60, message="new kind reconciled")

        watches.write_text(
            yaml.safe_dump([entry("Reloaded", reconcilePeriod="soon"), entry("Added")])
        )
        wait_for(
            lambda: "watches.yaml not reloaded" in proc.log(),
            timeout=90,
            message="invalid watches.yaml reported",
        )
        assert "reconcilePeriod" in proc.log()

        # Removing a watch stops its controller and leaves its CRs alone.
        watches.write_text(yaml.safe_dump([entry("Reloaded")]))
        wait_for(
            lambda: "its CRs and finalizers are left as they are" in proc.log(),
            timeout=90,
            message="removed watch stopped",
        )
        assert kinds["Added"].get(name="two", namespace=namespace) is not None
        assert proc.running()
    finally:
        proc.stop()
        print(proc.log()[-5000:])


CLEANUP = f"{GROUP}/cleanup"


def test_a_dropped_finalizer_never_leaves_a_cr_terminating(
    dyn: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    """Live reload drops a finalizer (the watch stays) and a whole watch while CRs of
    each are being deleted and their finalizer role keeps failing: those CRs are released
    and go; the watch that stays releases all its CRs; the removed watch's other CRs keep
    the finalizer, for the watch to come back."""
    kinds = {kind: install_crd(dyn, crd(group=GROUP, kind=kind)) for kind in ("Kept", "Gone")}
    finalizer = {"name": CLEANUP, "role": "refuse"}
    roles = {
        "r": "- ansible.builtin.debug:\n    msg: reconciled\n",
        "refuse": "- ansible.builtin.fail:\n    msg: cleanup refused\n",
    }
    watches = [entry("Kept", finalizer=finalizer), entry("Gone", finalizer=finalizer)]
    project = write_project(tmp_path / "project", watches=watches, roles=roles)
    proc = OperatorProcess(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "op.log",
        args=["--reload"],
        env={"WATCH_NAMESPACE": namespace},
    )

    def finalizers(kind: str, name: str) -> list[str] | None:
        try:
            obj = kinds[kind].get(name=name, namespace=namespace)
        except NotFoundError:
            return None
        return list(obj.metadata.finalizers or [])

    try:
        wait_for(lambda: "live reload on" in proc.log(), timeout=90, message="reload started")
        for kind in kinds:
            for name in ("doomed", "staying"):
                body = {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}}
                kinds[kind].create(body={**body, "spec": {}}, namespace=namespace)
        for kind in kinds:
            for name in ("doomed", "staying"):
                wait_for(
                    lambda k=kind, n=name: condition(
                        kinds[k].get(name=n, namespace=namespace), "Successful"
                    ),
                    timeout=90,
                    message=f"{kind} {name} Successful with its finalizer",
                )
                assert finalizers(kind, name) == [CLEANUP]
            kinds[kind].delete(name="doomed", namespace=namespace)
        for kind in kinds:
            wait_for(
                lambda k=kind: (
                    (c := condition(kinds[k].get(name="doomed", namespace=namespace), "Failure"))
                    and c["status"] == "True"
                ),
                timeout=90,
                message=f"{kind} doomed: the finalizer role failed",
            )
        assert finalizers("Kept", "doomed") == [CLEANUP], "stuck Terminating before the edit"

        (project / "watches.yaml").write_text(yaml.safe_dump([entry("Kept")], sort_keys=False))

        for kind in kinds:
            wait_for(
                lambda k=kind: finalizers(k, "doomed") is None,
                timeout=60,
                message=f"{kind} doomed deleted",
            )
        wait_for(lambda: finalizers("Kept", "staying") == [], timeout=30, message="released")
        assert finalizers("Gone", "staying") == [CLEANUP]
        assert "removed finalizer" in proc.log()
        assert proc.running()
    finally:
        proc.stop()
        print(proc.log()[-5000:])
