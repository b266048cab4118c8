"""What a test run split over pytest-xdist workers (`make test`'s `-n`) needs: one
session cluster for all workers, and groups of tests that must share a worker.

The cluster: a worker that needs it takes a file lock, reuses the cluster if it runs
or starts it and records the run's token beside its state directory; the controller
(the process that started the workers, and outlives them) stops it at the end when the
record is its own. A serial run keeps starting and stopping it in its fixture.

The groups (`--dist loadgroup`, whose scheduler `group_scheduler` replaces): tests that
share something machine- or cluster-wide that two of them cannot use at once run on one
worker, one after another; every other module is a group of its own (its module-scoped
fixtures are set up once). The slowest groups are handed out first (each worker sorts
its collection by `rank`, and the scheduler keeps that order), so that the run does not
end waiting on one of them. (Groups are not `xdist_group` markers: xdist 3.8 marks the
group in an item's node id, which pytest 9.2 no longer reads.)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Set by the controller for its workers: which run started the shared cluster.
RUN_TOKEN = "ANSIBLE_OPERATOR_TEST_RUN"

# Modules that cannot run beside each other, by group.
SHARED = {
    # Real nodes: a kubelet, containerd, a bridge and iptables rules each, plus the
    # machine's kernel settings that the first node records and the last one restores;
    # the clean-up test compares the whole machine before and after.
    "real-node": (
        "integration/test_real_node.py",
        "integration/test_exec_and_logs_on_a_real_node.py",
        "e2e/test_olm_images.py",
        "e2e/test_real_node_cleanup.py",
    ),
    # Both install, replace and delete CRDs of the group faults.test.example.com.
    "faults-crds": ("e2e/test_faults.py", "integration/test_failure_modes.py"),
    # Both scaffold guestbook-operator: the same Guestbook CRD, one with a conversion
    # webhook served by the operator of its scenario.
    "molecule": ("e2e/test_molecule.py", "e2e/test_webhook_molecule.py"),
}
GROUP_OF = {module: group for group, modules in SHARED.items() for module in modules}
# Not a group: the differential suite's Go ansible-operator binds the fixed ports 8888 and
# 5050, which no other test binds (every operator the tests start, Molecule's included,
# takes port 0 for its proxy and osdk_metric endpoint); against other processes of the
# machine (bench/compare, another checkout's tests) it holds /tmp/ao-go-operator.lock.

# Groups by wall time in a serial run, slowest first (the order only affects how long a
# parallel run takes, never what it checks); the rest follow in collection order, with
# the cluster tiers before the unit tests.
SLOWEST_FIRST = (
    "real-node",
    "differential/test_differential.py",
    "molecule",
    "faults-crds",
    "e2e/test_soak.py",
    "e2e/test_olm.py",
    "integration/test_sharding.py",
    "integration/test_ansible_backend.py",
    "integration/test_backend_equivalence.py",
    "integration/test_dependent_watches.py",
    "e2e/test_images.py",
    "e2e/test_wheel_install.py",
    "integration/test_shutdown.py",
)
_TIER_ORDER = {"e2e": 0, "integration": 1, "unit": 2}


def group_of(module: str) -> str:
    """The xdist group of a test module (its path under tests/)."""
    return GROUP_OF.get(module, module)


def module_of(nodeid: str) -> str:
    """The test module of a node id (`tests/unit/test_x.py::test_y[z]`), under tests/."""
    return nodeid.split("::")[0].removeprefix("tests/")


def group_scheduler(config: Any, log: Any) -> Any:
    """xdist's scheduler by scope, with a scope per group rather than per module, work
    handed out in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return group_of(module_of(nodeid))

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)


def rank(module: str) -> tuple[int, int]:
    """Sort key of a module's tests: its group's place in SLOWEST_FIRST, then its tier."""
    group = group_of(module)
    if group in SLOWEST_FIRST:
        return (0, SLOWEST_FIRST.index(group))
    return (1, _TIER_ORDER.get(module.split("/")[0], len(_TIER_ORDER)))


def is_worker() -> bool:
    return "PYTEST_XDIST_WORKER" in os.environ


def start_run() -> None:
    """In the controller: a token of this run that its workers inherit."""
    os.environ[RUN_TOKEN] = uuid.uuid4().hex


def _marker(state_dir: Path) -> Path:
    return state_dir.with_name(state_dir.name + ".test-run")


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    lock = state_dir.with_name(state_dir.name + ".test-lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_cluster(state_dir: Path) -> Path:
    """In a worker: the kubeconfig of the cluster at `state_dir`, started by the first
    worker that asks (and then recorded as this run's, for the controller to stop)."""
    from runner.devtools.cluster.local import LocalCluster

    cluster = LocalCluster(state_dir)
    with _locked(state_dir):
        if not cluster.is_up():
            cluster.up(progress=lambda _message: None)
            _marker(state_dir).write_text(os.environ.get(RUN_TOKEN, ""))
    return cluster.kubeconfig


def stop_shared_cluster(state_dir: Path) -> None:
    """In the controller after the workers ended: stop the cluster if a worker of this
    run started it."""
    from runner.devtools.cluster.local import LocalCluster

    marker = _marker(state_dir)
    token = os.environ.get(RUN_TOKEN)
    if not token or not marker.is_file():
        return
    with _locked(state_dir):
        if not marker.is_file() or marker.read_text() != token:
            return
        try:
            LocalCluster(state_dir).down(progress=lambda _message: None)
        finally:
            marker.unlink(missing_ok=True)
