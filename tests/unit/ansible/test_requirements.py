"""runner.ansible.requirements and its start-up report: a project's requirements.yml
against the collections Ansible would load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.ansible.requirements import (
    Installed,
    Requirement,
    check,
    installed_versions,
    parse,
    search_paths,
)
from runner.operator.run import collection_warnings

GO_SCAFFOLD = """\
---
collections:
  - name: operator_sdk.util
    version: "0.5.0"
  - name: kubernetes.core
    version: "3.2.0"
  - name: cloud.common
    version: "3.0.0"
  - name: community.docker
    version: "3.12.1"
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            GO_SCAFFOLD,
            [
                Requirement("operator_sdk.util", "0.5.0"),
                Requirement("kubernetes.core", "3.2.0"),
                Requirement("cloud.common", "3.0.0"),
                Requirement("community.docker", "3.12.1"),
            ],
            id="go-scaffold",
        ),
        pytest.param(
            "collections: [community.general, {name: a.b, version: '>=1.0,<2.0'}]",
            [Requirement("community.general"), Requirement("a.b", ">=1.0,<2.0")],
            id="short-forms",
        ),
        pytest.param(
            "collections:\n"
            "  - {name: 'https://github.com/org/repo.git', type: git}\n"
            "  - {name: my.coll, type: git, version: main}\n"
            "  - {name: ./local.tar.gz, type: file}\n"
            "  - {name: kubernetes.core, source: 'https://galaxy.ansible.com'}\n",
            [Requirement("kubernetes.core")],
            id="only-galaxy",
        ),
        pytest.param("- src: geerlingguy.docker\n", [], id="old-roles-format"),
        pytest.param("collections: []\nroles: [{name: x.y}]\n", [], id="empty"),
        pytest.param("---\n# nothing\n", [], id="blank"),
    ],
)
def test_parse(text: str, expected: list[Requirement]) -> None:
    assert parse(text) == expected


def test_parse_names_a_bad_entry() -> None:
    with pytest.raises(ValueError, match=r"reqs.yml: collections\[1\]: expected a name"):
        parse("collections: [a.b, {version: '1.0'}]", source="reqs.yml")


WHERE = Path("/c/ansible_collections/x/y")


@pytest.mark.parametrize(
    ("wanted", "installed", "expected"),
    [
        pytest.param(
            "3.2.0",
            "6.2.0",
            "pinned to 3.2.0, but the version Ansible loads is 6.2.0",
            id="older-major-pinned",
        ),
        pytest.param("==3.2.0", "6.2.0", "another major version", id="double-equals"),
        pytest.param("3.2.0", "3.9.1", None, id="same-major"),
        pytest.param("*", "6.2.0", None, id="any"),
        pytest.param(">=2.0.0,<3.0.0", "6.2.0", "outside the range", id="range-missed"),
        pytest.param(">=2.0.0, <7.0.0", "6.2.0", None, id="range-met"),
        pytest.param("3.2.0", None, "not installed", id="missing"),
        pytest.param("*", None, "collection x.y is not installed", id="missing-any"),
        pytest.param("latest-ish", "1.0.0", None, id="unparsable-spec"),
    ],
)
def test_check(wanted: str, installed: str | None, expected: str | None) -> None:
    found = {} if installed is None else {"x.y": Installed(installed, WHERE)}
    messages = check([Requirement("x.y", wanted)], found, source="p/requirements.yml")
    if expected is None:
        assert messages == []
        return
    (message,) = messages
    assert message.startswith("p/requirements.yml: collection x.y")
    assert expected in message
    assert "ansible-galaxy collection install -r p/requirements.yml" in message


def _collection(root: Path, name: str, version: str, *, manifest: bool = True) -> Path:
    namespace, collection = name.split(".")
    directory = root / "ansible_collections" / namespace / collection
    directory.mkdir(parents=True)
    if manifest:
        info = {"collection_info": {"namespace": namespace, "name": collection, "version": version}}
        (directory / "MANIFEST.json").write_text(json.dumps(info))
    else:
        (directory / "galaxy.yml").write_text(f"namespace: {namespace}\nversion: {version}\n")
    return directory


def test_the_first_copy_on_the_search_path_wins(tmp_path: Path) -> None:
    user = _collection(tmp_path / "user", "kubernetes.core", "3.2.0", manifest=False)
    _collection(tmp_path / "site", "kubernetes.core", "6.2.0")
    site_only = _collection(tmp_path / "site", "cloud.common", "5.0.0")
    paths = search_paths(f"{tmp_path / 'user'}:{tmp_path / 'nowhere'}", [str(tmp_path / "site")])
    found = installed_versions(["kubernetes.core", "cloud.common", "community.docker"], paths)
    assert found == {
        "kubernetes.core": Installed("3.2.0", user),
        "cloud.common": Installed("5.0.0", site_only),
    }


def test_search_paths_take_ansible_collections_entries_as_they_are() -> None:
    assert search_paths("/a:/b/ansible_collections::/a", ["/c"]) == [
        Path("/a/ansible_collections"),
        Path("/b/ansible_collections"),
        Path("/c/ansible_collections"),
    ]


def test_start_up_report_of_a_go_scaffolded_project(tmp_path: Path) -> None:
    """What `ansible-operator run` warns about, once, for the Go scaffold's pins against
    a collections path holding a newer kubernetes.core and our operator_sdk.util."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.yml").write_text(GO_SCAFFOLD)
    _collection(tmp_path / "cols", "kubernetes.core", "6.2.0")
    _collection(tmp_path / "cols", "operator_sdk.util", "0.5.0", manifest=False)
    environ = {
        "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "cols"),
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "false",
    }
    messages = collection_warnings(project, environ)
    assert len(messages) == 3, messages
    kubernetes, cloud, docker = messages
    assert "kubernetes.core is pinned to 3.2.0" in kubernetes and "is 6.2.0" in kubernetes
    assert "cloud.common 3.0.0 is not installed" in cloud
    assert "community.docker 3.12.1 is not installed" in docker


def test_start_up_report_without_requirements_or_with_a_broken_file(tmp_path: Path) -> None:
    assert collection_warnings(tmp_path, {}) == []
    (tmp_path / "requirements.yml").write_text("collections: {a: b}\n")
    (message,) = collection_warnings(tmp_path, {})
    assert "not checked against the installed collections" in message
