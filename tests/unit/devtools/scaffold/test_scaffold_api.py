"""`ansible-operator create api`: new files per kind, and extending the project's files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.devtools.scaffold.generate import Plan, api_plan, init_plan
from runner.devtools.scaffold.writer import apply, read_project_files
from runner.errors import ConfigError
from runner.watches import model as watches

CSV = "config/manifests/bases/web-operator.clusterserviceversion.yaml"
SITE_WATCH = "- {group: web.scaffold.example.com, version: v1alpha1, kind: Site, role: x}\n"
INIT = init_plan(domain="scaffold.example.com", project_name="web-operator").create


def _files(*plans: Plan) -> dict[str, str]:
    files = dict(INIT)
    for plan in plans:
        files.update(plan.create)
        files.update(plan.update)
    return files


def _site(files: dict[str, str] | None = None, **kwargs: Any) -> Plan:
    args = {"group": "web", "version": "v1alpha1", "kind": "Site", **kwargs}
    return api_plan(files or INIT, **args)


def _load(text: str) -> Any:
    return yaml.safe_load(text)


def test_new_and_updated_files() -> None:
    plan = _site()
    assert sorted(plan.create) == [
        "config/crd/bases/web.scaffold.example.com_sites.yaml",
        "config/rbac/site_admin_role.yaml",
        "config/rbac/site_editor_role.yaml",
        "config/rbac/site_viewer_role.yaml",
        "config/samples/web_v1alpha1_site.yaml",
        "molecule/default/tasks/site_test.yml",
        "molecule/site-role/molecule.yml",
        "molecule/site-role/vars.yml",
        "molecule/site-role/verify.yml",
        "molecule/site/molecule.yml",
        "molecule/site/vars.yml",
        "molecule/site/verify.yml",
        "roles/site/README.md",
        "roles/site/defaults/main.yml",
        "roles/site/files/.placeholder",
        "roles/site/handlers/main.yml",
        "roles/site/meta/main.yml",
        "roles/site/tasks/main.yml",
        "roles/site/templates/.placeholder",
        "roles/site/vars/main.yml",
    ]
    assert sorted(plan.update) == [
        "PROJECT",
        "config/crd/kustomization.yaml",
        CSV,
        "config/rbac/kustomization.yaml",
        "config/rbac/role.yaml",
        "config/samples/kustomization.yaml",
        "watches.yaml",
    ]


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, id=path)
        for path, _ in sorted({**_site(playbook=True).create, **_site().update}.items())
        if path.endswith((".yaml", ".yml")) or path == "PROJECT"
    ],
)
def test_rendered_files_parse(path: str) -> None:
    files = {**_site(playbook=True).create, **_site().update}
    list(yaml.safe_load_all(files[path]))


def test_crd() -> None:
    crd = _load(_site().create["config/crd/bases/web.scaffold.example.com_sites.yaml"])
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["name"] == "sites.web.scaffold.example.com"
    spec = crd["spec"]
    assert spec["group"] == "web.scaffold.example.com"
    assert spec["names"] == {
        "kind": "Site",
        "listKind": "SiteList",
        "plural": "sites",
        "singular": "site",
    }
    assert spec["scope"] == "Namespaced"
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    props = version["schema"]["openAPIV3Schema"]["properties"]
    assert props["spec"]["x-kubernetes-preserve-unknown-fields"] is True
    assert props["status"]["x-kubernetes-preserve-unknown-fields"] is True


def test_sample_and_role() -> None:
    plan = _site()
    sample = _load(plan.create["config/samples/web_v1alpha1_site.yaml"])
    assert sample["apiVersion"] == "web.scaffold.example.com/v1alpha1"
    assert sample["kind"] == "Site"
    assert sample["metadata"]["name"] == "site-sample"
    assert sample["spec"]["message"]
    (task,) = _load(plan.create["roles/site/tasks/main.yml"])
    definition = task["kubernetes.core.k8s"]["definition"]
    assert definition["kind"] == "ConfigMap"
    assert definition["metadata"]["name"] == "{{ ansible_operator_meta.name }}-site"
    assert definition["data"] == {"message": "{{ message }}"}
    assert _load(plan.create["roles/site/defaults/main.yml"])["message"]
    assert _load(plan.create["roles/site/meta/main.yml"])["dependencies"] == []
    assert _load(plan.create["roles/site/handlers/main.yml"]) is None


@pytest.mark.parametrize(
    ("playbook", "expected"),
    [
        pytest.param(False, {"role": "site", "markUnsafe": True}, id="role"),
        pytest.param(True, {"playbook": "playbooks/site.yml", "markUnsafe": True}, id="playbook"),
    ],
)
def test_watch_entry(playbook: bool, expected: dict[str, Any]) -> None:
    """New entries pass spec values as plain strings (`markUnsafe: true`): a CR author must
    not be able to run commands through a template in a spec field."""
    plan = _site(playbook=playbook)
    text = plan.update["watches.yaml"]
    assert _load(text) == [
        {"version": "v1alpha1", "group": "web.scaffold.example.com", "kind": "Site", **expected}
    ]
    assert text.startswith(INIT["watches.yaml"].replace("[]\n", ""))  # header comments kept
    assert ("playbooks/site.yml" in plan.create) is playbook
    assert "roles/site/tasks/main.yml" in plan.create


def test_playbook_runs_the_role() -> None:
    (play,) = _load(_site(playbook=True).create["playbooks/site.yml"])
    assert play["hosts"] == "localhost"
    assert play["tasks"] == [
        {
            "name": "Reconcile with the site role",
            "ansible.builtin.import_role": {"name": "site"},
        }
    ]


def test_manager_role_rules() -> None:
    role = _load(_site().update["config/rbac/role.yaml"])
    base = _load(INIT["config/rbac/role.yaml"])["rules"]
    group = ["web.scaffold.example.com"]
    assert role["rules"] == [
        *base,
        {
            "apiGroups": group,
            "resources": ["sites"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
        {"apiGroups": group, "resources": ["sites/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": group, "resources": ["sites/finalizers"], "verbs": ["update"]},
    ]


def test_editor_and_viewer_roles() -> None:
    plan = _site()
    editor = _load(plan.create["config/rbac/site_editor_role.yaml"])
    viewer = _load(plan.create["config/rbac/site_viewer_role.yaml"])
    assert editor["metadata"]["name"] == "site-editor-role"
    assert viewer["metadata"]["name"] == "site-viewer-role"
    assert set(editor["rules"][0]["verbs"]) >= {"create", "delete", "update"}
    assert viewer["rules"][0]["verbs"] == ["get", "list", "watch"]
    admin = _load(plan.create["config/rbac/site_admin_role.yaml"])
    assert admin["metadata"]["name"] == "site-admin-role"
    assert admin["rules"][0]["verbs"] == ["*"]
    assert _load(plan.update["config/rbac/kustomization.yaml"])["resources"][-3:] == [
        "site_admin_role.yaml",
        "site_editor_role.yaml",
        "site_viewer_role.yaml",
    ]


def test_second_kind_extends_everything() -> None:
    first = _site()
    files = _files(first)
    second = api_plan(files, group="web", version="v1", kind="WebPolicy", playbook=True)
    after = {**files, **second.create, **second.update}

    project = _load(after["PROJECT"])
    assert [(r["group"], r["version"], r["kind"]) for r in project["resources"]] == [
        ("web", "v1alpha1", "Site"),
        ("web", "v1", "WebPolicy"),
    ]
    assert [entry["kind"] for entry in _load(after["watches.yaml"])] == ["Site", "WebPolicy"]
    assert _load(after["config/crd/kustomization.yaml"])["resources"] == [
        "bases/web.scaffold.example.com_sites.yaml",
        "bases/web.scaffold.example.com_webpolicies.yaml",
    ]
    assert _load(after["config/samples/kustomization.yaml"])["resources"] == [
        "web_v1alpha1_site.yaml",
        "web_v1_webpolicy.yaml",
    ]
    assert _load(after["config/rbac/kustomization.yaml"])["resources"][-6:] == [
        "site_admin_role.yaml",
        "site_editor_role.yaml",
        "site_viewer_role.yaml",
        "webpolicy_admin_role.yaml",
        "webpolicy_editor_role.yaml",
        "webpolicy_viewer_role.yaml",
    ]
    resources = [
        resource
        for rule in _load(after["config/rbac/role.yaml"])["rules"]
        for resource in rule["resources"]
    ]
    assert {"sites", "sites/status", "webpolicies", "webpolicies/finalizers"} <= set(resources)
    owned = _load(after[CSV])["spec"]["customresourcedefinitions"]["owned"]
    assert owned == [
        {
            "name": "sites.web.scaffold.example.com",
            "version": "v1alpha1",
            "kind": "Site",
            "displayName": "Site",
            "description": "Site is the Schema for the sites API",
        },
        {
            "name": "webpolicies.web.scaffold.example.com",
            "version": "v1",
            "kind": "WebPolicy",
            "displayName": "Web Policy",
            "description": "WebPolicy is the Schema for the webpolicies API",
        },
    ]
    assert after[CSV].startswith("# The hand-written part")
    # nothing the first kind wrote is rewritten by the second
    assert not set(second.create) & set(first.create)


def test_hand_edits_survive() -> None:
    files = dict(INIT)
    files["watches.yaml"] = (
        "---\n# mine\n- version: v1\n  group: other.io\n  kind: Other\n  role: other  # note\n"
    )
    files["config/rbac/role.yaml"] += (
        "  # my extra rule\n  - apiGroups: [batch]\n    resources: [jobs]\n    verbs: [get]\n"
    )
    plan = _site(files)
    assert plan.update["watches.yaml"].startswith(files["watches.yaml"])
    assert "role: other  # note" in plan.update["watches.yaml"]
    assert plan.update["config/rbac/role.yaml"].startswith(files["config/rbac/role.yaml"])
    assert [e["kind"] for e in _load(plan.update["watches.yaml"])] == ["Other", "Site"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param(
            {},
            "PROJECT: the project already has web.scaffold.example.com/v1alpha1, Kind=Site; "
            "nothing was written",
            id="same-gvk",
        ),
        pytest.param(
            {"version": "v1"},
            "PROJECT: Site (web.scaffold.example.com) already exists in version v1alpha1",
            id="same-kind-new-version",
        ),
    ],
)
def test_same_kind_twice_is_an_error(kwargs: dict[str, str], message: str) -> None:
    files = _files(_site())
    with pytest.raises(ConfigError) as err:
        _site(files, **kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        pytest.param(
            lambda f: f.pop("PROJECT"),
            "PROJECT not found: run `ansible-operator init` first",
            id="no-project",
        ),
        pytest.param(
            lambda f: f.pop("config/rbac/role.yaml"),
            "missing config/rbac/role.yaml",
            id="missing-role",
        ),
        pytest.param(
            lambda f: f.update({"watches.yaml": "site: 1\n"}),
            "watches.yaml: expected a list of watches",
            id="watches-not-a-list",
        ),
        pytest.param(
            lambda f: f.update({"watches.yaml": SITE_WATCH}),
            "watches.yaml: already has an entry for web.scaffold.example.com/v1alpha1, Kind=Site",
            id="watches-has-it",
        ),
        pytest.param(
            lambda f: f.update(
                {"config/rbac/role.yaml": f["config/rbac/role.yaml"] + "aggregationRule: {}\n"}
            ),
            "config/rbac/role.yaml: `rules` is not the last key",
            id="rules-not-last",
        ),
        pytest.param(
            lambda f: f.update({"PROJECT": f["PROJECT"].replace("ansible.sdk", "go.kubebuilder")}),
            "only extends Ansible projects",
            id="other-layout",
        ),
        pytest.param(
            lambda f: f.update({CSV: "kind: ClusterServiceVersion\n"}),
            "expected a ClusterServiceVersion with a spec",
            id="csv-without-spec",
        ),
    ],
)
def test_project_problems(edit: Callable[[dict[str, str]], object], message: str) -> None:
    files = dict(INIT)
    edit(files)
    with pytest.raises(ConfigError) as err:
        _site(files)
    assert message in str(err.value)


def _init(tmp_path: Path) -> Path:
    apply(tmp_path, init_plan(domain="scaffold.example.com", project_name="web-operator"))
    return tmp_path


def _snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}


def test_writer_round_trip_and_watches_load(tmp_path: Path) -> None:
    root = _init(tmp_path)
    apply(root, api_plan(read_project_files(root), group="web", version="v1alpha1", kind="Site"))
    apply(
        root,
        api_plan(
            read_project_files(root), group="web", version="v1", kind="WebPolicy", playbook=True
        ),
    )
    loaded = watches.load("watches.yaml", environ={}, cwd=root)
    assert [(w.gvk.kind, w.role, w.playbook) for w in loaded] == [
        ("Site", root / "roles" / "site", None),
        ("WebPolicy", None, root / "playbooks" / "webpolicy.yml"),
    ]
    assert all(w.mark_unsafe for w in loaded)
    assert [watches.spec_template_warning(w) for w in loaded] == [None, None]


def test_cli_duplicate_kind_writes_nothing(
    cli: Callable[[Sequence[str]], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _init(tmp_path)
    monkeypatch.chdir(root)
    argv = ["create", "api", "--group", "web", "--version", "v1alpha1", "--kind", "Site"]
    assert cli([*argv, "--generate-role"]) == 0
    before = _snapshot(root)
    capsys.readouterr()
    assert cli(argv) == 1
    err = capsys.readouterr().err
    assert "PROJECT" in err and "web.scaffold.example.com/v1alpha1, Kind=Site" in err
    assert _snapshot(root) == before


def test_cli_name_clash_writes_nothing(
    cli: Callable[[Sequence[str]], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same kind in another group needs the same role directory: refused whole."""
    root = _init(tmp_path)
    monkeypatch.chdir(root)
    assert cli(["create", "api", "--group", "web", "--version", "v1", "--kind", "Site"]) == 0
    before = _snapshot(root)
    capsys.readouterr()
    assert cli(["create", "api", "--group", "shop", "--version", "v1", "--kind", "Site"]) == 1
    err = capsys.readouterr().err
    assert "refusing to overwrite" in err and "roles/site/tasks/main.yml" in err
    assert _snapshot(root) == before


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--group", "Web", "--version", "v1", "--kind", "Site"], "--group 'Web'"),
        pytest.param(["--group", "web", "--version", "1", "--kind", "Site"], "--version '1'"),
        pytest.param(["--group", "web", "--version", "v1", "--kind", "site"], "--kind 'site'"),
    ],
)
def test_cli_validation_writes_nothing(
    flags: list[str],
    message: str,
    cli: Callable[[Sequence[str]], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _init(tmp_path)
    before = _snapshot(root)
    monkeypatch.chdir(root)
    assert cli(["create", "api", *flags]) == 1
    assert message in capsys.readouterr().err
    assert _snapshot(root) == before


def test_cli_outside_a_project(
    cli: Callable[[Sequence[str]], int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli(["create", "api", "--group", "web", "--version", "v1", "--kind", "Site"]) == 1
    assert "PROJECT not found" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
