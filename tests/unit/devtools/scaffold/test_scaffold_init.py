"""`ansible-operator init`: the files of a new project and the rules for writing them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner import __version__
from runner.devtools.scaffold.generate import init_plan
from runner.devtools.scaffold.projectfile import parse_project
from runner.devtools.scaffold.writer import apply
from runner.errors import ConfigError

FILES = init_plan(domain="example.com", project_name="web-operator").create


def _docs(path: str) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(FILES[path]) if doc is not None]


def _one(path: str) -> Any:
    (doc,) = _docs(path)
    return doc


def test_file_list() -> None:
    assert sorted(FILES) == [
        ".dockerignore",
        ".gitignore",
        "Dockerfile",
        "Makefile",
        "PROJECT",
        "config/crd/kustomization.yaml",
        "config/default/kustomization.yaml",
        "config/default/manager_metrics_patch.yaml",
        "config/default/metrics_service.yaml",
        "config/manager/kustomization.yaml",
        "config/manager/manager.yaml",
        "config/manifests/bases/web-operator.clusterserviceversion.yaml",
        "config/manifests/kustomization.yaml",
        "config/network-policy/allow-metrics-traffic.yaml",
        "config/network-policy/kustomization.yaml",
        "config/prometheus/kustomization.yaml",
        "config/prometheus/monitor.yaml",
        "config/rbac/kustomization.yaml",
        "config/rbac/leader_election_role.yaml",
        "config/rbac/leader_election_role_binding.yaml",
        "config/rbac/metrics_auth_role.yaml",
        "config/rbac/metrics_auth_role_binding.yaml",
        "config/rbac/metrics_reader_role.yaml",
        "config/rbac/role.yaml",
        "config/rbac/role_binding.yaml",
        "config/rbac/service_account.yaml",
        "config/samples/kustomization.yaml",
        "config/scorecard/bases/config.yaml",
        "config/scorecard/kustomization.yaml",
        "config/scorecard/patches/basic.config.yaml",
        "config/scorecard/patches/olm.config.yaml",
        "config/testing/debug_logs_patch.yaml",
        "config/testing/kustomization.yaml",
        "config/testing/manager_image.yaml",
        "config/testing/pull_policy/Always.yaml",
        "config/testing/pull_policy/IfNotPresent.yaml",
        "config/testing/pull_policy/Never.yaml",
        "molecule/default/converge.yml",
        "molecule/default/create.yml",
        "molecule/default/destroy.yml",
        "molecule/default/kustomize.yml",
        "molecule/default/molecule.yml",
        "molecule/default/prepare.yml",
        "molecule/default/verify.yml",
        "molecule/kind/converge.yml",
        "molecule/kind/create.yml",
        "molecule/kind/destroy.yml",
        "molecule/kind/molecule.yml",
        "molecule/shared/cleanup.yml",
        "molecule/shared/create.yml",
        "molecule/shared/destroy.yml",
        "molecule/shared/operator-converge.yml",
        "molecule/shared/operator-prepare.yml",
        "molecule/shared/role-converge.yml",
        "molecule/shared/role-prepare.yml",
        "molecule/shared/run-role.yml",
        "molecule/shared/tasks/extra-vars.yml",
        "molecule/shared/tasks/install-crds.yml",
        "molecule/shared/tasks/stop-operator.yml",
        "molecule/shared/vars.yml",
        "playbooks/.placeholder",
        "requirements.yml",
        "roles/.placeholder",
        "watches.yaml",
    ]


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, id=path)
        for path in sorted(FILES)
        if path.endswith((".yaml", ".yml")) or path == "PROJECT"
    ],
)
def test_yaml_files_parse(path: str) -> None:
    assert list(yaml.safe_load_all(FILES[path]))


def test_project_file() -> None:
    data = _one("PROJECT")
    assert data["domain"] == "example.com"
    assert data["layout"] == ["ansible.sdk.operatorframework.io/v1"]
    assert data["projectName"] == "web-operator"
    assert data["version"] == "3"
    assert "resources" not in data
    project = parse_project(FILES["PROJECT"])
    assert (project.domain, project.name, project.resources) == ("example.com", "web-operator", ())


def test_watches_is_an_empty_list() -> None:
    assert _one("watches.yaml") == []
    assert FILES["watches.yaml"].startswith("---\n# ")


def test_requirements_install_nothing_by_default() -> None:
    assert _one("requirements.yml") == {"collections": []}


def _deployment() -> dict[str, Any]:
    namespace, deployment = _docs("config/manager/manager.yaml")
    assert namespace["kind"] == "Namespace"
    assert deployment["kind"] == "Deployment"
    return dict(deployment)


def test_manager_deployment_is_locked_down() -> None:
    pod = _deployment()["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {}} in pod["volumes"]
    assert pod["serviceAccountName"] == "controller-manager"
    assert set(container["resources"]) == {"limits", "requests"}


def test_manager_args_probes_and_env() -> None:
    (container,) = _deployment()["spec"]["template"]["spec"]["containers"]
    assert container["args"] == [
        "--leader-elect",
        "--leader-election-id=web-operator",
        "--health-probe-bind-address=:6789",
        "--reconcile-timeout=30m",
    ]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 6789}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 6789}
    env = {item["name"]: item for item in container["env"]}
    assert env["ANSIBLE_GATHERING"]["value"] == "explicit"
    assert "olm.targetNamespaces" in env["WATCH_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"]
    images = _one("config/manager/kustomization.yaml")["images"]
    assert images == [{"name": "controller", "newName": "example.com/web-operator:0.0.1"}]
    assert container["image"] == "controller"


def test_rbac() -> None:
    role = _one("config/rbac/role.yaml")
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", "manager-role")
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    every = {"create", "delete", "get", "list", "patch", "update", "watch"}
    for resource in ("configmaps", "pods", "secrets", "services"):
        assert granted["", resource] == every
    assert granted["", "events"] == {"create", "patch"}
    assert granted["apps", "deployments"] == every
    leader = _one("config/rbac/leader_election_role.yaml")
    assert leader["kind"] == "Role"
    assert any("leases" in rule["resources"] for rule in leader["rules"])
    for path, role_kind in [
        ("config/rbac/role_binding.yaml", "ClusterRole"),
        ("config/rbac/leader_election_role_binding.yaml", "Role"),
    ]:
        binding = _one(path)
        assert binding["roleRef"]["kind"] == role_kind
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}
        ]
    assert _one("config/rbac/kustomization.yaml")["resources"] == [
        "service_account.yaml",
        "role.yaml",
        "role_binding.yaml",
        "leader_election_role.yaml",
        "leader_election_role_binding.yaml",
        "metrics_auth_role.yaml",
        "metrics_auth_role_binding.yaml",
        "metrics_reader_role.yaml",
    ]


def test_default_kustomization() -> None:
    assert _one("config/default/kustomization.yaml") == {
        "namespace": "web-operator-system",
        "namePrefix": "web-operator-",
        "resources": ["../crd", "../rbac", "../manager", "metrics_service.yaml"],
        "patches": [{"path": "manager_metrics_patch.yaml", "target": {"kind": "Deployment"}}],
    }


def test_csv_base() -> None:
    csv = _one("config/manifests/bases/web-operator.clusterserviceversion.yaml")
    assert csv["kind"] == "ClusterServiceVersion"
    assert csv["metadata"]["name"] == "web-operator.v0.0.0"
    spec = csv["spec"]
    assert spec["displayName"] == "Web Operator"
    assert spec["description"]
    assert spec["icon"] == [{"base64data": "", "mediatype": "image/svg+xml"}]
    assert spec["keywords"] == ["web-operator"]
    assert spec["maintainers"] and spec["provider"]["name"] and spec["links"]
    assert {m["type"]: m["supported"] for m in spec["installModes"]} == {
        "OwnNamespace": True,
        "SingleNamespace": True,
        "MultiNamespace": True,
        "AllNamespaces": True,
    }
    assert spec["version"] == "0.0.0"
    assert spec["install"]["strategy"] == ""
    assert spec["customresourcedefinitions"] == {"owned": []}


def test_scorecard() -> None:
    config = _one("config/scorecard/bases/config.yaml")
    assert config["kind"] == "Configuration"
    assert config["apiVersion"] == "scorecard.operatorframework.io/v1alpha3"
    tests = [
        patch["value"]["labels"]["test"]
        for name in ("basic", "olm")
        for patch in _one(f"config/scorecard/patches/{name}.config.yaml")
    ]
    assert "basic-check-spec-test" in tests
    assert "olm-bundle-validation-test" in tests
    patches = _one("config/scorecard/kustomization.yaml")["patches"]
    assert [p["path"] for p in patches] == [
        "patches/basic.config.yaml",
        "patches/olm.config.yaml",
    ]


def test_molecule_scenario_targets_the_cluster_without_containers() -> None:
    molecule = _one("molecule/default/molecule.yml")
    assert molecule["driver"] == {"name": "default", "options": {"managed": False}}
    (converge,) = _one("molecule/default/converge.yml")
    assert converge["hosts"] == "localhost"
    assert "ansible-operator cluster kubeconfig" in converge["vars"]["kubeconfig"]
    assert "KUBECONFIG" in converge["vars"]["kubeconfig"]
    (verify,) = _one("molecule/default/verify.yml")
    assert verify["tasks"]


@pytest.mark.parametrize(
    "target",
    [
        "run",
        "plan",
        "install",
        "uninstall",
        "deploy",
        "undeploy",
        "docker-build",
        "docker-push",
        "bundle",
        "bundle-build",
        "catalog",
        "catalog-build",
    ],
)
def test_makefile_targets(target: str) -> None:
    assert re.search(rf"^{re.escape(target)}:.*## ", FILES["Makefile"], re.MULTILINE)


def test_makefile_recipes_use_tabs_and_our_commands() -> None:
    makefile = FILES["Makefile"]
    recipes = [line for line in makefile.splitlines() if line.startswith("\t")]
    assert recipes
    assert not [line for line in makefile.splitlines() if line.startswith("    $")]
    assert "$(KUBECTL) apply -k config/crd" in makefile
    assert "$(KUBECTL) apply -k config/default" in makefile
    assert "$(ANSIBLE_OPERATOR) bundle generate --version $(VERSION)" in makefile
    assert "$(ANSIBLE_OPERATOR) catalog generate --package web-operator" in makefile
    assert '$(ANSIBLE_OPERATOR) plan --watches-file ./watches.yaml "$$@" $(PLAN_ARGS)' in makefile


def test_dockerfile_builds_from_this_version() -> None:
    assert (
        f"FROM quay.io/ansible-operator-python/ansible-operator:{__version__}\n"
        in (FILES["Dockerfile"])
    )


def test_writer_creates_the_project(tmp_path: Path) -> None:
    written = apply(tmp_path, init_plan(domain="example.com", project_name="web-operator"))
    assert written == sorted(FILES)
    for path, text in FILES.items():
        assert (tmp_path / path).read_text() == text


def test_writer_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("mine\n")
    (tmp_path / "watches.yaml").write_text("- mine\n")
    with pytest.raises(ConfigError) as err:
        apply(tmp_path, init_plan(domain="example.com", project_name="web-operator"))
    assert "refusing to overwrite" in str(err.value)
    assert "Makefile, watches.yaml" in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Makefile", "watches.yaml"]
    assert (tmp_path / "Makefile").read_text() == "mine\n"


def test_cli_init_uses_the_directory_name(
    cli: Callable[[Sequence[str]], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = tmp_path / "shop-operator"
    project.mkdir()
    (project / ".git").mkdir()  # other files may be there
    monkeypatch.chdir(project)
    assert cli(["init", "--domain", "example.com"]) == 0
    assert parse_project((project / "PROJECT").read_text()).name == "shop-operator"
    assert "wrote config/manager/manager.yaml" in capsys.readouterr().out


def test_cli_init_in_a_project_is_an_error(
    cli: Callable[[Sequence[str]], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli(["init", "--domain", "example.com", "--project-name", "one"]) == 0
    before = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert cli(["init", "--domain", "other.io", "--project-name", "two"]) == 1
    err = capsys.readouterr().err
    assert "PROJECT exists" in err and "create api" in err
    assert {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["init", "--domain", "Example.com", "--project-name", "x"],
            "--domain 'Example.com'",
            id="bad-domain",
        ),
        pytest.param(
            ["init", "--domain", "example.com", "--project-name", "X_y"],
            "--project-name 'X_y'",
            id="bad-name",
        ),
    ],
)
def test_cli_init_validation(
    cli: Callable[[Sequence[str]], int],
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli(argv) == 1
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_init_bad_directory_name_suggests_the_flag(
    cli: Callable[[Sequence[str]], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = tmp_path / "My_Project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert cli(["init", "--domain", "example.com"]) == 1
    err = capsys.readouterr().err
    assert "the directory name 'My_Project'" in err and "--project-name" in err
