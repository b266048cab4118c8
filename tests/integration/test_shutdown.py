"""SIGTERM with runs in flight, as the kubelet sends it: the operator waits for its runs
up to `--graceful-shutdown-timeout` (default 30 s), releases its Lease, and exits before
the scaffolded pod's terminationGracePeriodSeconds would bring SIGKILL."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from kubernetes import client
from support.kube import wait_for
from support.operator import crd, install_crd, operator_running, write_project

from runner.devtools.scaffold.files.config import TERMINATION_GRACE_SECONDS

GROUP = "shutdown.test.example.com"
LEASE = "shutdown-test-lock"

HANG_ROLE = """
- name: A run that outlasts any grace period
  ansible.builtin.pause:
    seconds: 600
"""


def test_sigterm_with_runs_in_flight_releases_the_lease_within_the_pod_grace_period(
    dyn: Any, api_client: Any, kubeconfig: Path, tmp_path: Path, namespace: str
) -> None:
    hanging = install_crd(dyn, crd(group=GROUP, kind="Hanging"))
    watches = [{"group": GROUP, "version": "v1alpha1", "kind": "Hanging", "role": "hang"}]
    project = write_project(tmp_path / "project", watches=watches, roles={"hang": HANG_ROLE})
    leases = client.CoordinationV1Api(api_client)

    def holder() -> str | None:
        return leases.read_namespaced_lease(LEASE, namespace).spec.holder_identity or None

    args = ["--leader-elect", f"--leader-election-id={LEASE}"]
    args.append(f"--leader-election-namespace={namespace}")
    with operator_running(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        args=args,
        env={"WATCH_NAMESPACE": namespace},
    ) as proc:
        wait_for(lambda: "became the leader" in proc.log(), timeout=90, message="leader")
        for name in ("one", "two"):
            hanging.create(
                body={
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": "Hanging",
                    "metadata": {"name": name},
                    "spec": {},
                },
                namespace=namespace,
            )
        wait_for(
            lambda: proc.log().count("task ok: Gathering Facts") >= 2,
            timeout=120,
            message="two runs in flight",
        )
        assert holder() is not None

        proc.process.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        released_at: float | None = None
        while proc.process.poll() is None:
            if released_at is None and holder() is None:
                released_at = time.monotonic()
            if time.monotonic() - signalled > TERMINATION_GRACE_SECONDS + 30:
                break
            time.sleep(0.1)
        exited = time.monotonic() - signalled

    print(f"exit {exited:.1f} s after SIGTERM; lease released at {released_at}")
    assert proc.process.returncode == 0
    assert exited < TERMINATION_GRACE_SECONDS, "the kubelet would have sent SIGKILL"
    assert released_at is not None, "the lease must be released before the process exits"
    assert holder() is None
    assert "released the lease" in proc.log()
