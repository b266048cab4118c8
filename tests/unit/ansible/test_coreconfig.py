"""ALLOW_BROKEN_CONDITIONALS: on for operator runs on ansible-core 2.19 unless the user
chose, and with it a role written for 2.18 (`when: some_list | length`,
`when: some_string_var`) runs on the installed line as it did on 2.18."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner.ansible.coreconfig import (
    BROKEN_CONDITIONALS_ENV,
    allow_broken_conditionals,
    config_file,
)
from runner.ansible.hooks import installed_core_version


@pytest.mark.parametrize(
    ("version", "changed"),
    [
        pytest.param("2.18.19", False, id="2.18"),
        pytest.param("2.19.14", True, id="2.19"),
        pytest.param("2.20.0", True, id="2.20"),
        pytest.param(None, False, id="none"),
    ],
)
def test_on_from_2_19(version: str | None, changed: bool, tmp_path: Path) -> None:
    environ: dict[str, str] = {}
    notice = allow_broken_conditionals(version, environ, home=tmp_path, etc=tmp_path)
    assert (BROKEN_CONDITIONALS_ENV in environ) is changed
    assert (notice is not None) is changed
    if notice is not None:
        assert environ[BROKEN_CONDITIONALS_ENV] == "true"
        assert "\n" not in notice and f"{BROKEN_CONDITIONALS_ENV}=true" in notice


def test_the_users_variable_is_kept(tmp_path: Path) -> None:
    environ = {BROKEN_CONDITIONALS_ENV: "false"}
    assert allow_broken_conditionals("2.19.14", environ, home=tmp_path, etc=tmp_path) is None
    assert environ == {BROKEN_CONDITIONALS_ENV: "false"}


@pytest.mark.parametrize("where", ["ANSIBLE_CONFIG", "home", "etc", "ANSIBLE_CONFIG-dir"])
def test_the_users_ansible_cfg_is_kept(where: str, tmp_path: Path) -> None:
    home, etc = tmp_path / "home", tmp_path / "etc"
    home.mkdir()
    etc.mkdir()
    text = "[defaults]\nallow_broken_conditionals = false\n"
    environ: dict[str, str] = {}
    if where == "home":
        (home / ".ansible.cfg").write_text(text)
    elif where == "etc":
        (etc / "ansible.cfg").write_text(text)
    else:
        directory = tmp_path / "project"
        directory.mkdir()
        (directory / "ansible.cfg").write_text(text)
        given = directory if where.endswith("-dir") else directory / "ansible.cfg"
        environ["ANSIBLE_CONFIG"] = str(given)
    assert allow_broken_conditionals("2.19.14", environ, home=home, etc=etc) is None
    assert BROKEN_CONDITIONALS_ENV not in environ


def test_an_ansible_cfg_without_the_key_is_no_choice(tmp_path: Path) -> None:
    (tmp_path / ".ansible.cfg").write_text("[defaults]\nstdout_callback = yaml\n")
    environ: dict[str, str] = {}
    assert config_file(environ, home=tmp_path, etc=tmp_path) == tmp_path / ".ansible.cfg"
    assert allow_broken_conditionals("2.19.14", environ, home=tmp_path, etc=tmp_path)
    assert environ[BROKEN_CONDITIONALS_ENV] == "true"


PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  vars:
    some_list: [1, 2]
    empty_list: []
    some_string_var: "false"
    empty_string: ""
  tasks:
    - {name: list-length, debug: {msg: x}, when: some_list | length}
    - {name: empty-list-length, debug: {msg: x}, when: empty_list | length}
    - {name: string, debug: {msg: x}, when: some_string_var}
    - {name: empty-string, debug: {msg: x}, when: empty_string}
"""


def test_roles_written_for_2_18_run_on_the_installed_line(tmp_path: Path) -> None:
    """The same task outcomes as ansible-core 2.18 gives them, on either line."""
    (tmp_path / "site.yml").write_text(textwrap.dedent(PLAYBOOK))
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("ANSIBLE_") or key == "ANSIBLE_COLLECTIONS_PATH"
    }
    allow_broken_conditionals(installed_core_version(), environ, home=tmp_path, etc=tmp_path)
    environ |= {"HOME": str(tmp_path), "ANSIBLE_DEPRECATION_WARNINGS": "false"}
    playbook = Path(sys.executable).parent / "ansible-playbook"
    done = subprocess.run(
        [str(playbook), "site.yml"],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = [
        line.split(":")[0]
        for line in done.stdout.splitlines()
        if line.startswith(("ok:", "skipping:"))
    ]
    assert outcomes == ["ok", "skipping", "ok", "skipping"], done.stdout
