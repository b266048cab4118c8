"""The operator under faults around it: the run directory's disk full, the fast backend's
zygote killed in the middle of a run. Each time the CR affected fails or is retried
visibly, and the operator keeps serving the others."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kube import create_cr, true_condition, wait_for
from support.operator import OperatorProcess, Operators, crd, install_crd, write_project

GROUP = "faults.test.example.com"

QUICK_ROLE = """
- name: Say hello
  ansible.builtin.debug:
    msg: "hello {{ ansible_operator_meta.name }}"
"""


@pytest.fixture(scope="module")
def kinds(dyn: Any) -> dict[str, Any]:
    return {kind: install_crd(dyn, crd(group=GROUP, kind=kind)) for kind in ("Starved", "Slow")}


def watch(kind: str, role: str) -> dict[str, Any]:
    return {"group": GROUP, "version": "v1alpha1", "kind": kind, "role": role}


def wait_condition(
    resource: Any, name: str, namespace: str, kind: str, timeout: float = 90
) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        return true_condition(resource.get(name=name, namespace=namespace), kind)

    return wait_for(probe, timeout=timeout, message=f"{resource.kind} {name}: {kind}=True")


def private_mount_prefix() -> list[str]:
    """A command prefix that runs the operator in its own mount namespace (root, or an
    unprivileged user namespace), so the tmpfs it mounts vanishes with it."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) for a private mount namespace")
    prefix = ["unshare", "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        prefix[1:1] = ["--user", "--map-root-user"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace: {probe.stderr.decode().strip()}")
    return prefix


def fill(directory: Path) -> Path:
    """Write a file into `directory` until its filesystem has no space left."""
    filler = directory / "filler"
    chunk = b"\0" * 65536
    # Unbuffered: a buffered writer would flush what it holds again on close, and raise
    # ENOSPC there.
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
                out.flush()
        except OSError as err:
            assert err.errno == errno.ENOSPC, err
    return filler


@pytest.fixture
def start(kubeconfig: Path, tmp_path: Path) -> Iterator[Callable[..., OperatorProcess]]:
    operators = Operators(kubeconfig=kubeconfig, directory=tmp_path)

    def run(
        watches: list[dict[str, Any]], roles: dict[str, str], **options: Any
    ) -> OperatorProcess:
        project = write_project(tmp_path / "project", watches=watches, roles=roles)
        return operators.start(project, **options)

    yield run
    operators.stop_all(tail=5000)


def test_a_full_run_directory_fails_the_cr_and_the_operator_serves_on(
    kinds: dict[str, Any], start: Callable[..., OperatorProcess], tmp_path: Path, namespace: str
) -> None:
    starved = kinds["Starved"]
    runner_dir = tmp_path / "runner"  # the run directories' base OperatorProcess sets
    runner_dir.mkdir()
    prefix = private_mount_prefix()
    mount = ["sh", "-c", 'mount -t tmpfs -o size=8m tmpfs "$0" && exec "$@"', str(runner_dir)]
    proc = start(
        [watch("Starved", "quick")],
        {"quick": QUICK_ROLE},
        env={"WATCH_NAMESPACE": namespace},
        prefix=[*prefix, *mount],
    )
    create_cr(starved, "first", namespace)
    wait_condition(starved, "first", namespace, "Successful")

    # The operator's view of its run directory: the tmpfs is in its mount namespace only.
    seen_by_operator = Path(f"/proc/{proc.process.pid}/root") / str(runner_dir).lstrip("/")
    filler = fill(seen_by_operator)
    create_cr(starved, "full", namespace)
    failure = wait_condition(starved, "full", namespace, "Failure")
    assert "No space left on device" in failure["message"]
    assert proc.running()

    filler.unlink()
    create_cr(starved, "after", namespace)
    wait_condition(starved, "after", namespace, "Successful")
    wait_condition(starved, "full", namespace, "Successful", timeout=120)
    assert proc.running()


# Hangs in its first run (a marker file says it started); quick afterwards.
HANG_ONCE_ROLE = """
- name: Has this CR run before
  ansible.builtin.stat:
    path: "{{ marker }}"
  register: seen

- name: Leave a mark
  ansible.builtin.file:
    path: "{{ marker }}"
    state: touch
  when: not seen.stat.exists

- name: Hang the first time
  ansible.builtin.pause:
    seconds: 300
  when: not seen.stat.exists
"""


def zygotes_of(pid: int) -> list[int]:
    """The fast backend's zygote processes started by the operator `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid and b"runner.ansible.fastbackend.zygoteprocess" in cmdline:
            found.append(int(entry.name))
    return found


def test_a_zygote_killed_in_the_middle_of_a_run(
    kinds: dict[str, Any], start: Callable[..., OperatorProcess], tmp_path: Path, namespace: str
) -> None:
    slow, quick = kinds["Slow"], kinds["Starved"]
    proc = start(
        [watch("Slow", "hang_once"), watch("Starved", "quick")],
        {"hang_once": HANG_ONCE_ROLE, "quick": QUICK_ROLE},
        env={"WATCH_NAMESPACE": namespace},
        args=["--ansible-backend", "fast"],
    )
    create_cr(quick, "bystander", namespace)
    wait_condition(quick, "bystander", namespace, "Successful")
    bystander = quick.get(name="bystander", namespace=namespace)

    marker = tmp_path / "hanging"
    create_cr(slow, "victim", namespace, {"marker": str(marker)})
    wait_for(marker.exists, timeout=90, message="the victim's run has started")
    (zygote,) = wait_for(lambda: zygotes_of(proc.process.pid), timeout=10, message="a zygote")
    os.kill(zygote, 9)

    # The run in flight is lost; the CR is retried in a new zygote and converges.
    wait_condition(slow, "victim", namespace, "Successful", timeout=120)
    assert zygote not in zygotes_of(proc.process.pid)
    assert "victim: error in" in proc.log(), "the lost run counts as a failed attempt"
    # The other watch's CR was not run again, and new CRs of it converge.
    assert quick.get(name="bystander", namespace=namespace).metadata.resourceVersion == (
        bystander.metadata.resourceVersion
    )
    create_cr(quick, "newcomer", namespace)
    wait_condition(quick, "newcomer", namespace, "Successful")
    assert proc.running()
