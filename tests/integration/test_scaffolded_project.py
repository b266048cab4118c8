"""A freshly scaffolded project runs as it is: `init`, `create api` (a role and a
playbook kind), its CRDs installed from config/crd/bases, `ansible-operator run` in the
project, its samples applied; each becomes Successful and the generated role's
ConfigMap appears, owned by the CR. Its kustomizations build with kubectl."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.dynamic.exceptions import NotFoundError
from support.cli import run_cli
from support.kube import apply, condition, documents, wait_for
from support.operator import REPO, OperatorProcess, install_crd, operator_running

from runner.watches import model as watches

DOMAIN = "scaffold.example.com"
KINDS = [
    # (kind, version, extra flag, plural)
    ("Site", "v1alpha1", "--generate-role", "sites"),
    ("WebPolicy", "v1", "--generate-playbook", "webpolicies"),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scaffold") / "web-operator"
    root.mkdir()
    run_cli(root, "init", "--domain", DOMAIN)
    for kind, version, flag, _ in KINDS:
        run_cli(root, "create", "api", "--group", "web", "--version", version, "--kind", kind, flag)
    return root


@pytest.fixture(scope="module")
def resources(dyn: Any, project: Path) -> dict[str, Any]:
    found = {}
    for kind, _, _, plural in KINDS:
        crd_file = project / "config/crd/bases" / f"web.{DOMAIN}_{plural}.yaml"
        found[kind] = install_crd(dyn, yaml.safe_load(crd_file.read_text()))
    return found


@pytest.fixture
def operator(
    kubeconfig: Path, tmp_path: Path, namespace: str, project: Path, resources: Any
) -> Iterator[OperatorProcess]:
    with operator_running(
        project,
        kubeconfig=kubeconfig,
        log=tmp_path / "operator.log",
        # as `make run` and the operator image do, so the playbook finds the role
        env={"WATCH_NAMESPACE": namespace, "ANSIBLE_ROLES_PATH": str(project / "roles")},
    ) as proc:
        yield proc


def test_generated_watches_load(project: Path) -> None:
    loaded = watches.load("watches.yaml", environ={}, cwd=project)
    assert [(w.gvk.group, w.gvk.version, w.gvk.kind) for w in loaded] == [
        (f"web.{DOMAIN}", "v1alpha1", "Site"),
        (f"web.{DOMAIN}", "v1", "WebPolicy"),
    ]
    assert loaded[0].role == project / "roles" / "site"
    assert loaded[1].playbook == project / "playbooks" / "webpolicy.yml"


def _successful(resource: Any, name: str, namespace: str) -> dict[str, Any] | None:
    try:
        cond = condition(resource.get(name=name, namespace=namespace), "Successful")
    except NotFoundError:
        return None
    return cond if cond and cond["status"] == "True" else None


def _configmap(dyn: Any, name: str, namespace: str) -> Any:
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    try:
        return configmaps.get(name=name, namespace=namespace)
    except NotFoundError:
        return None


def test_samples_reconcile(
    dyn: Any, project: Path, resources: dict[str, Any], operator: OperatorProcess, namespace: str
) -> None:
    samples = {
        "Site": project / "config/samples/web_v1alpha1_site.yaml",
        "WebPolicy": project / "config/samples/web_v1_webpolicy.yaml",
    }
    for path in samples.values():
        apply(dyn, path, namespace=namespace)
    for kind, path in samples.items():
        (sample,) = documents(path)
        name = sample["metadata"]["name"]
        wait_for(
            lambda kind=kind, name=name: _successful(resources[kind], name, namespace),
            timeout=120,
            message=f"{kind} {name} Successful",
            interval=0.5,
        )
        configmap = wait_for(
            lambda kind=kind, name=name: _configmap(dyn, f"{name}-{kind.lower()}", namespace),
            timeout=90,
            message=f"ConfigMap {name}-{kind.lower()}",
        )
        assert configmap.data["message"] == sample["spec"]["message"]
        owners = configmap.metadata.ownerReferences or []
        assert [(o.kind, o.name) for o in owners] == [(kind, name)]
    assert operator.running()


@pytest.mark.parametrize("directory", ["config/default", "config/manifests", "config/crd"])
@pytest.mark.parametrize(("where", "crds"), [("scaffolded", 2), ("repository", 1)])
def test_kustomizations_build(
    project: Path, kubeconfig: Path, directory: str, where: str, crds: int
) -> None:
    """kubectl's built-in kustomize accepts the generated kustomizations (a new project's
    and the memcached sample's)."""
    root = project if where == "scaffolded" else REPO
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    out = run_cli(root, "cluster", "kubectl", "kustomize", directory, env=env)
    kinds = [doc["kind"] for doc in yaml.safe_load_all(out) if doc]
    assert kinds.count("CustomResourceDefinition") == crds
    if directory == "config/default":
        assert {"Namespace", "Deployment", "ClusterRole", "ServiceAccount"} <= set(kinds)
    if directory == "config/manifests":
        assert "ClusterServiceVersion" in kinds


@pytest.mark.parametrize(
    ("where", "system"),
    [("scaffolded", "web-operator-system"), ("repository", "memcached-operator-system")],
)
def test_deploy_is_accepted_by_the_api_server(
    project: Path, kubeconfig: Path, api_client: Any, resources: Any, where: str, system: str
) -> None:
    """What `make deploy` applies passes the API server's validation (server dry run; the
    operator's namespace has to exist for that)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    root = project if where == "scaffolded" else REPO
    core = client.CoreV1Api(api_client)

    def usable() -> list[bool] | None:
        """[True]: created here; [False]: exists (someone's, left alone); None: terminating."""
        try:
            core.create_namespace({"metadata": {"name": system}})
        except ApiException as err:
            if err.status != 409:
                raise
        else:
            return [True]
        try:
            phase = core.read_namespace(system).status.phase
        except ApiException as err:
            if err.status != 404:
                raise
            return None  # gone meanwhile: try again
        return None if phase == "Terminating" else [False]

    (created,) = wait_for(usable, timeout=90, message=f"namespace {system} usable", interval=1)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    try:
        out = run_cli(
            root, "cluster", "kubectl", "apply", "-k", "config/default", "--dry-run=server", env=env
        )
    finally:
        if created:
            core.delete_namespace(system)
    prefix = system.removesuffix("-system")
    assert f"deployment.apps/{prefix}-controller-manager created (server dry run)" in out
    assert f"clusterrole.rbac.authorization.k8s.io/{prefix}-manager-role" in out
