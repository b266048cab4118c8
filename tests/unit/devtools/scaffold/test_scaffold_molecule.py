"""The Molecule scenarios `init` and `create api` write, and the repository's copy of them."""

from __future__ import annotations

import posixpath
import re
from typing import Any

import pytest
import yaml
from support.molecule_files import REPO, expected_files

from runner.devtools.scaffold.generate import api_plan, init_plan
from runner.devtools.scaffold.molecule.perkind import kind_files, scenario_dirs, shared_files
from runner.devtools.scaffold.names import Resource

HINT = "regenerate with: .venv/bin/python tests/support/molecule_files.py"
GUESTBOOK = Resource(group="web", domain="example.com", version="v1alpha1", kind="Guestbook")
INIT = init_plan(domain="example.com", project_name="guestbook-operator").create
API = api_plan(INIT, group="web", version="v1alpha1", kind="Guestbook")
PROJECT = {**INIT, **API.create, **API.update}
KIND_FILES = kind_files(GUESTBOOK)
# Paths playbooks refer to: vars files, imported tasks and playbooks.
_REFERENCE = re.compile(
    r"(?:(?:import_tasks|include_tasks|import_playbook): |^\s+- )(\S+\.yml)$", re.M
)


@pytest.mark.parametrize("path", sorted(expected_files()))
def test_repository_copy_matches_the_renderer(path: str) -> None:
    target = REPO / path
    assert target.is_file(), f"{path} is missing; {HINT}"
    assert target.read_text(encoding="utf-8") == expected_files()[path], f"{path}: {HINT}"


def test_init_writes_the_shared_playbooks() -> None:
    shared = shared_files("guestbook-operator")
    assert {path: INIT[path] for path in shared} == shared
    assert "project_name: guestbook-operator\n" in shared["molecule/shared/vars.yml"]


def test_create_api_writes_two_scenarios_for_the_kind() -> None:
    assert scenario_dirs(GUESTBOOK) == ("guestbook", "guestbook-role")
    assert sorted(KIND_FILES) == sorted(
        f"molecule/{scenario}/{name}"
        for scenario in ("guestbook", "guestbook-role")
        for name in ("molecule.yml", "vars.yml", "verify.yml")
    )
    assert {path: API.create[path] for path in KIND_FILES} == KIND_FILES


@pytest.mark.parametrize(
    ("scenario", "runs"), [("guestbook", "operator"), ("guestbook-role", "role")]
)
def test_scenario_config(scenario: str, runs: str) -> None:
    config = yaml.safe_load(PROJECT[f"molecule/{scenario}/molecule.yml"])
    assert config["dependency"] == {"name": "galaxy", "enabled": False}
    assert config["prerun"] is False
    assert config["driver"]["name"] == "default"
    assert config["driver"]["options"]["managed"] is False
    playbooks = config["ansible"]["playbooks"]
    assert playbooks["prepare"] == f"../shared/{runs}-prepare.yml"
    assert playbooks["converge"] == f"../shared/{runs}-converge.yml"
    for playbook in playbooks.values():
        path = posixpath.normpath(f"molecule/{scenario}/{playbook}")
        assert path in PROJECT, f"{scenario}: {playbook} is not written"
    sequence = config["scenario"]["test_sequence"]
    assert sequence.index("converge") < sequence.index("idempotence") < sequence.index("verify")
    paths = config["ansible"]["env"]["ANSIBLE_COLLECTIONS_PATH"]
    assert paths.endswith(":${MOLECULE_EPHEMERAL_DIRECTORY}/collections")


@pytest.mark.parametrize("scenario", ["guestbook", "guestbook-role"])
def test_scenario_is_wired_to_the_kinds_sample_and_role(scenario: str) -> None:
    scenario_vars = yaml.safe_load(PROJECT[f"molecule/{scenario}/vars.yml"])
    sample = yaml.safe_load(PROJECT[scenario_vars["sample_file"]])
    assert sample["kind"] == "Guestbook"
    assert "message" in sample["spec"]
    assert f"roles/{scenario_vars['role_name']}/tasks/main.yml" in PROJECT
    # verify looks for what the generated role makes: the ConfigMap <name>-guestbook.
    role_tasks = PROJECT[f"roles/{scenario_vars['role_name']}/tasks/main.yml"]
    assert '"{{ ansible_operator_meta.name }}-guestbook"' in role_tasks
    verify = PROJECT[f"molecule/{scenario}/verify.yml"]
    assert "{{ sample_name }}-guestbook" in verify
    assert yaml.safe_load(verify)[0]["hosts"] == "localhost"


@pytest.mark.parametrize("path", sorted(path for path in PROJECT if path.startswith("molecule/")))
def test_playbooks_parse_and_refer_to_written_files(path: str) -> None:
    docs: list[Any] = list(yaml.safe_load_all(PROJECT[path]))
    assert docs and docs[0] is not None
    base = posixpath.dirname(path)
    for ref in _REFERENCE.findall(PROJECT[path]):
        if "{{" in ref:
            continue
        resolved = posixpath.normpath(posixpath.join(base, ref))
        assert resolved in PROJECT, f"{path} refers to {ref}, which is not written"


def test_references_are_checked() -> None:
    found = {ref for text in PROJECT.values() for ref in _REFERENCE.findall(text)}
    assert {"tasks/stop-operator.yml", "tasks/install-crds.yml", "run-role.yml"} <= found
    assert {"vars.yml", "../shared/vars.yml"} <= found
