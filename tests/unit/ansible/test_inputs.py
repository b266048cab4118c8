"""runner.ansible.inputs: the ansible-runner input directory (SPEC "Running Ansible")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.inputs import (
    RunRequest,
    hosts_line,
    input_copies,
    new_ident,
    private_data_dir,
    render_inputs,
    role_playbook,
    roles_path,
    runner_args,
    runner_config,
    strip_quotes,
)
from runner.structs.gvk import GVK

MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
SECRET = GVK("", "v1", "Secret")
BASE = Path("/tmp/ansible-operator/runner")
DATA = BASE / "cache.example.com/v1alpha1/Memcached/ns/sample"
ROLE = Path("/opt/ansible/roles/memcached")
PLAYBOOK = Path("/opt/ansible/playbooks/memcached.yml")
ROLE_ARGS = ["--role", "memcached", "--roles-path", "/opt/ansible/roles/"]
PLAIN = "localhost ansible_connection=local ansible_python_interpreter={{ansible_playbook_python}}"


def request(**overrides: Any) -> RunRequest:
    fields: dict[str, Any] = {
        "gvk": MEMCACHED,
        "namespace": "ns",
        "name": "sample",
        "role": ROLE,
        "ident": "1234",
    }
    fields.update(overrides)
    return RunRequest(**fields)


@pytest.mark.parametrize(
    ("gvk", "namespace", "name", "expected"),
    [
        pytest.param(MEMCACHED, "ns", "sample", DATA, id="namespaced"),
        pytest.param(
            MEMCACHED,
            "",
            "sample",
            BASE / "cache.example.com/v1alpha1/Memcached/sample",
            id="cluster",
        ),
        pytest.param(SECRET, "ns", "s", BASE / "v1/Secret/ns/s", id="core-group"),
        pytest.param(SECRET, "", "s", BASE / "v1/Secret/s", id="core-and-cluster"),
        pytest.param(
            GVK("a.b", "v1", "CamelKind"), "n", "x", BASE / "a.b/v1/CamelKind/n/x", id="kind-case"
        ),
    ],
)
def test_private_data_dir(gvk: GVK, namespace: str, name: str, expected: Path) -> None:
    assert private_data_dir(BASE, gvk, namespace, name) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("", "", id="empty"),
        pytest.param("--tags=a", "--tags=a", id="plain"),
        pytest.param("'--tags=a --skip-tags b'", "--tags=a --skip-tags b", id="single-quoted"),
        pytest.param("''", "", id="empty-quotes"),
        pytest.param("'", "", id="lone-quote"),
        pytest.param("'--tags=a", "'--tags=a", id="unbalanced"),
        pytest.param('"--tags=a"', '"--tags=a"', id="double-quotes-kept"),
        pytest.param("''--x''", "'--x'", id="one-pair-only"),
    ],
)
def test_strip_quotes(raw: str, expected: str) -> None:
    assert strip_quotes(raw) == expected


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        pytest.param({}, PLAIN, id="no-venv"),
        pytest.param({"VIRTUAL_ENV": ""}, PLAIN, id="empty-venv"),
        pytest.param(
            {"VIRTUAL_ENV": "/opt/venv"},
            "localhost ansible_connection=local ansible_python_interpreter=/opt/venv/bin/python3",
            id="venv",
        ),
    ],
)
def test_hosts_line(environ: dict[str, str], expected: str) -> None:
    assert hosts_line(environ) == expected


def test_render_inputs_role() -> None:
    req = request(
        extravars={"size": 3, "ansible_operator_meta": {"name": "sample", "namespace": "ns"}},
        envvars={"K8S_AUTH_KUBECONFIG": "/k", "KUBECONFIG": "/k"},
        cmdline="'--tags deploy'",
    )
    files = render_inputs(req, environ={}, data_dir=Path("/d"))
    assert set(files) == {
        "env/extravars",
        "env/envvars",
        "env/cmdline",
        "inventory/hosts",
        "project/main.json",
    }
    assert json.loads(files["env/extravars"]) == {
        "size": 3,
        "ansible_operator_meta": {"name": "sample", "namespace": "ns"},
    }
    assert json.loads(files["env/envvars"]) == {"K8S_AUTH_KUBECONFIG": "/k", "KUBECONFIG": "/k"}
    assert files["env/cmdline"] == "--tags deploy"
    assert files["inventory/hosts"] == PLAIN
    assert json.loads(files["project/main.json"]) == [
        {"hosts": "localhost", "roles": [{"name": "memcached"}]}
    ]


@pytest.mark.parametrize(
    ("overrides", "environ", "present", "absent"),
    [
        pytest.param({}, {}, {"inventory/hosts"}, {"env/cmdline"}, id="no-cmdline"),
        pytest.param({"cmdline": "''"}, {}, set(), {"env/cmdline"}, id="quoted-empty-cmdline"),
        pytest.param(
            {}, {"ANSIBLE_INVENTORY": "/etc/inv"}, set(), {"inventory/hosts"}, id="inventory-env"
        ),
        pytest.param(
            {"role": None, "playbook": PLAYBOOK},
            {},
            {"inventory/hosts"},
            {"project/main.json", "project/playbook.yaml"},
            id="playbook-is-copied-not-rendered",
        ),
    ],
)
def test_render_inputs_files(
    overrides: dict[str, Any], environ: dict[str, str], present: set[str], absent: set[str]
) -> None:
    files = render_inputs(request(**overrides), environ=environ, data_dir=Path("/d"))
    assert present <= set(files)
    assert not absent & set(files)
    assert {"env/extravars", "env/envvars"} <= set(files)


def test_render_inputs_empty_envvars_and_venv() -> None:
    files = render_inputs(request(), environ={"VIRTUAL_ENV": "/v"}, data_dir=Path("/d"))
    assert files["env/envvars"] == "{}"
    assert files["env/extravars"] == "{}"
    assert files["inventory/hosts"].endswith("ansible_python_interpreter=/v/bin/python3")


def test_role_skip_facts() -> None:
    assert role_playbook(ROLE, environ={"ANSIBLE_GATHERING": "explicit"}) == [
        {"hosts": "localhost", "roles": [{"name": "memcached"}], "gather_facts": False}
    ]
    assert "gather_facts" not in role_playbook(ROLE, environ={"ANSIBLE_GATHERING": "smart"})[0]


def test_input_copies() -> None:
    assert input_copies(request()) == {}
    assert input_copies(request(role=None, playbook=PLAYBOOK)) == {
        "project/playbook.yaml": PLAYBOOK
    }


@pytest.mark.parametrize(
    ("overrides", "environ", "expected"),
    [
        pytest.param(
            {"role": None, "playbook": PLAYBOOK},
            {},
            ["-p", str(PLAYBOOK), "-i", "1234", "-vv"],
            id="playbook",
        ),
        pytest.param(
            {},
            {},
            [*ROLE_ARGS, "--hosts", "localhost", "-i", "1234", "-vv"],
            id="role",
        ),
        pytest.param(
            {"verbosity": 0},
            {},
            [*ROLE_ARGS, "--hosts", "localhost", "-i", "1234"],
            id="verbosity-0-no-flag",
        ),
        pytest.param(
            {"role": None, "playbook": PLAYBOOK, "verbosity": 0},
            {"ANSIBLE_GATHERING": "explicit"},
            ["-p", str(PLAYBOOK), "-i", "1234"],
            id="playbook-ignores-gathering",
        ),
        pytest.param(
            {"verbosity": 4},
            {"ANSIBLE_GATHERING": "explicit"},
            [*ROLE_ARGS, "--hosts", "localhost", "-i", "1234", "-vvvv", "--role-skip-facts"],
            id="role-skip-facts",
        ),
    ],
)
def test_runner_args(
    overrides: dict[str, Any], environ: dict[str, str], expected: list[str]
) -> None:
    req = request(max_artifacts=7, **overrides)
    assert runner_args(req, data_dir=DATA, environ=environ) == [
        "run",
        str(DATA),
        "--rotate-artifacts",
        "7",
        *expected,
    ]


@pytest.mark.parametrize(
    ("overrides", "environ", "playbook", "verbosity", "envvars"),
    [
        pytest.param({"role": None, "playbook": PLAYBOOK}, {}, str(PLAYBOOK), 2, {}, id="playbook"),
        pytest.param(
            {"verbosity": 0},
            {},
            str(DATA / "project/main.json"),
            None,
            {"ANSIBLE_ROLES_PATH": f"/opt/ansible/roles/:{DATA}/roles"},
            id="role",
        ),
        pytest.param(
            {},
            {"ANSIBLE_ROLES_PATH": "/a::/b"},
            str(DATA / "project/main.json"),
            2,
            {"ANSIBLE_ROLES_PATH": f"/opt/ansible/roles/:/a:/b:{DATA}/roles"},
            id="role-keeps-operator-roles-path",
        ),
    ],
)
def test_runner_config(
    overrides: dict[str, Any],
    environ: dict[str, str],
    playbook: str,
    verbosity: int | None,
    envvars: dict[str, str],
) -> None:
    config = runner_config(request(**overrides), data_dir=DATA, environ=environ)
    assert config == {
        "private_data_dir": str(DATA),
        "playbook": playbook,
        "ident": "1234",
        "verbosity": verbosity,
        "rotate_artifacts": 0,
        "envvars": envvars,
        "quiet": True,
    }


def test_roles_path_of_a_role_at_the_root() -> None:
    assert roles_path(Path("/myrole"), data_dir=DATA, environ={}) == f"/:{DATA}/roles"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"role": None}, "exactly one of role or playbook", id="neither"),
        pytest.param({"playbook": PLAYBOOK}, "exactly one of role or playbook", id="both"),
        pytest.param({"role": Path("roles/x")}, "must be absolute", id="relative-role"),
        pytest.param({"name": ""}, "name", id="no-name"),
        pytest.param({"ident": "latest"}, "ident", id="ident-latest"),
        pytest.param({"ident": "a/b"}, "ident", id="ident-slash"),
    ],
)
def test_invalid_requests(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        request(**overrides)


def test_default_ident_is_a_random_integer() -> None:
    idents = {RunRequest(gvk=MEMCACHED, namespace="", name="x", role=ROLE).ident for _ in range(5)}
    assert len(idents) == 5
    assert all(ident.isdigit() for ident in idents)
    assert new_ident().isdigit()


def test_render_inputs_kubeconfig_points_the_run_at_its_own_file() -> None:
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "clusters": []}
    files = render_inputs(
        request(kubeconfig=kubeconfig, envvars={"EXTRA": "1"}),
        environ={},
        data_dir=Path("/d"),
    )
    assert json.loads(files["kubeconfig"]) == kubeconfig
    assert json.loads(files["env/envvars"]) == {
        "EXTRA": "1",
        "K8S_AUTH_KUBECONFIG": "/d/kubeconfig",
        "KUBECONFIG": "/d/kubeconfig",
    }
