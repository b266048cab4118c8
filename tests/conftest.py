"""Fixtures for every test layer: the real local control plane, clients, namespaces.

The cluster comes from `$ANSIBLE_OPERATOR_TEST_KUBECONFIG` when set; otherwise the
project's local cluster (`ansible-operator cluster`) is reused if it runs, or started
for the session and stopped afterwards (once for all workers of a pytest-xdist run,
see support.parallel).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
MEMCACHED_CRD = REPO / "config" / "crd" / "bases" / "cache.example.com_memcacheds.yaml"


def pytest_configure(config: pytest.Config) -> None:
    from support import parallel

    if not parallel.is_worker():
        parallel.start_run()


def pytest_unconfigure(config: pytest.Config) -> None:
    from support import parallel

    if not parallel.is_worker() and not os.environ.get("ANSIBLE_OPERATOR_TEST_KUBECONFIG"):
        from runner.devtools.cluster.layout import default_state_dir

        parallel.stop_shared_cluster(default_state_dir())


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from support import parallel

    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        if parts[0] in ("integration", "e2e"):
            item.add_marker(getattr(pytest.mark, parts[0]))
        if parts[0] == "differential":
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.differential)
        if parts[:2] in (("integration", "engine"), ("integration", "operator")):
            item.add_marker(pytest.mark.engine)
    if parallel.is_worker():
        items.sort(key=lambda item: parallel.rank(parallel.module_of(item.nodeid)))


# Before xdist's own (the first answer wins); only called when xdist runs the session.
@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from support import parallel

    if config.getvalue("dist") != "loadgroup":
        return None
    return parallel.group_scheduler(config, log)


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """A test that runs a sub-command configures logging (`logs.configure` replaces the
    root logger's handlers and level, e.g. `plan` to errors only): put both back, so
    that a later test's `caplog` still sees its records whatever ran before it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(scope="session")
def kubeconfig() -> Iterator[Path]:
    given = os.environ.get("ANSIBLE_OPERATOR_TEST_KUBECONFIG")
    if given:
        yield Path(given)
        return
    from support import parallel

    from runner.devtools.cluster.layout import default_state_dir
    from runner.devtools.cluster.local import LocalCluster

    if parallel.is_worker():
        yield parallel.shared_cluster(default_state_dir())
        return
    cluster = LocalCluster(default_state_dir())
    if cluster.is_up():
        yield cluster.kubeconfig
        return
    try:
        cluster.up()
        yield cluster.kubeconfig
    finally:
        cluster.down()


@pytest.fixture(scope="session")
def real_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A private cluster with a real node (kubelet, containerd, a CNI bridge) beside the
    fake one, started once per session for the tests that need real pods, removed with
    everything it changed on the machine afterwards. Yields a
    `support.realnode.RealNodeCluster`; the image `support.realnode.TOOLS_IMAGE` (static
    kubectl and catatonit) is already on the node."""
    from support.realnode import RealNodeCluster, tools_image_archive

    from runner.devtools.cluster.local import LocalCluster

    cluster = LocalCluster(tmp_path_factory.mktemp("real-node-cluster"))
    try:
        cluster.up(real_node=True, progress=lambda _message: None)
        handle = RealNodeCluster(cluster)
        handle.import_archive(tools_image_archive(cluster.cache))
        yield handle
    finally:
        cluster.down(progress=lambda _message: None)


@pytest.fixture(scope="session")
def api_client(kubeconfig: Path) -> Iterator[Any]:
    from kubernetes import config

    client = config.new_client_from_config(config_file=str(kubeconfig))
    yield client
    client.close()


@pytest.fixture(scope="session")
def dyn(api_client: Any) -> Any:
    from kubernetes.dynamic import DynamicClient

    return DynamicClient(api_client)


@pytest.fixture
def namespace(request: pytest.FixtureRequest, api_client: Any, dyn: Any) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting). Finalizers
    of custom resources left in it are dropped first: no operator runs any more to
    honour them, and the namespace would stay Terminating for ever."""
    from kubernetes import client
    from support.kube import release_custom_resources

    core = client.CoreV1Api(api_client)
    stem = request.node.name.lower().replace("_", "-")
    name = f"t-{''.join(c for c in stem if c.isalnum() or c == '-')[:40]}-{uuid.uuid4().hex[:5]}"
    core.create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        release_custom_resources(dyn, name)
        core.delete_namespace(name)


@pytest.fixture(scope="session")
def memcached_crd(dyn: Any) -> Any:
    """The sample's Memcached CRD, installed and served; its dynamic-client resource."""
    import yaml
    from support.operator import install_crd

    return install_crd(dyn, yaml.safe_load(MEMCACHED_CRD.read_text()))


@pytest.fixture
async def kube(kubeconfig: Path, memcached_crd: Any) -> AsyncIterator[Any]:
    """Our own async client (`runner.k8s.KubeClient`), with the Memcached CRD served."""
    from runner.k8s.client import KubeClient

    client = await KubeClient.connect(kubeconfig=str(kubeconfig))
    yield client
    await client.close()


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """With `--durations`, the slowest test modules as well (see support.timing)."""
    if not config.getoption("durations"):
        return
    from support.timing import seconds_per_module, summary

    reports = [report for found in terminalreporter.stats.values() for report in found]
    totals = seconds_per_module(reports)
    if totals:
        terminalreporter.write_sep("=", "slowest test modules (set-up, calls, tear-down)")
        for line in summary(totals):
            terminalreporter.write_line(line)
