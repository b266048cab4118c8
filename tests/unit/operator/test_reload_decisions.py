"""What a live reload does with a changed path: pure decisions."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.operator.reload import (
    affected,
    check_yaml,
    diff,
    dropped_finalizers,
    is_ignored,
    watched_roots,
)
from runner.structs import GVK
from runner.watches.model import Finalizer, Watch

A = GVK("a.example.com", "v1", "A")
B = GVK("b.example.com", "v1", "B")
ROLE_A = Path("/p/roles/a")
PLAYBOOK_B = Path("/p/playbooks/b.yml")
WATCHES = (
    Watch(gvk=A, role=ROLE_A, finalizer=Finalizer(name="f", role=Path("/p/roles/cleanup"))),
    Watch(gvk=B, playbook=PLAYBOOK_B),
)
SHARED = (Path("/p/roles"), Path("/p/collections"))


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        pytest.param("/p/roles/a/tasks/main.yml", False, id="task-file"),
        pytest.param("/p/roles/a/tasks/.main.yml.swp", True, id="vim-swap"),
        pytest.param("/p/roles/a/tasks/main.yml~", True, id="backup"),
        pytest.param("/p/roles/a/tasks/4913", True, id="vim-probe"),
        pytest.param("/p/roles/a/tasks/.#main.yml", True, id="emacs-lock"),
        pytest.param("/p/roles/a/__pycache__/x.pyc", True, id="pycache"),
        pytest.param("/p/.git/index", True, id="git"),
        pytest.param("/p/runner/artifacts/1/stdout", True, id="artifacts"),
    ],
)
def test_is_ignored(path: str, ignored: bool) -> None:
    assert is_ignored(Path(path)) is ignored


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("/p/roles/a/tasks/main.yml", {A}, id="own-role"),
        pytest.param("/p/roles/cleanup/tasks/main.yml", {A}, id="finalizer-role"),
        pytest.param("/p/playbooks/b.yml", {B}, id="playbook"),
        pytest.param("/p/playbooks/vars.yml", {B}, id="playbook-neighbour"),
        pytest.param("/p/roles/common/tasks/main.yml", {A, B}, id="shared-roles-path"),
        pytest.param("/p/collections/x/y/plugins/modules/m.py", {A, B}, id="collections"),
        pytest.param("/elsewhere/file.yml", set(), id="unrelated"),
    ],
)
def test_affected(path: str, expected: set[GVK]) -> None:
    assert affected(Path(path), WATCHES, SHARED) == expected


def test_diff_by_gvk() -> None:
    c = GVK("c.example.com", "v1", "C")
    new = (Watch(gvk=A, role=ROLE_A, reconcile_period=60.0), Watch(gvk=c, role=ROLE_A))
    added, removed, changed = diff(WATCHES, new)
    assert [w.gvk for w in added] == [c]
    assert removed == [B]
    assert [w.gvk for w in changed] == [A]
    assert diff(WATCHES, WATCHES) == ([], [], [])


@pytest.mark.parametrize(
    ("new", "dropped"),
    [
        pytest.param(WATCHES, [], id="unchanged"),
        pytest.param((WATCHES[1],), [(A, "f")], id="watch-removed"),
        pytest.param((Watch(gvk=A, role=ROLE_A), WATCHES[1]), [(A, "f")], id="finalizer-removed"),
        pytest.param(
            (Watch(gvk=A, role=ROLE_A, finalizer=Finalizer(name="g")), WATCHES[1]),
            [(A, "f")],
            id="finalizer-renamed",
        ),
        pytest.param(
            (Watch(gvk=A, role=Path("/p/roles/other"), finalizer=Finalizer(name="f")),),
            [],
            id="same-name-other-role",
        ),
    ],
)
def test_dropped_finalizers(new: tuple[Watch, ...], dropped: list[tuple[GVK, str]]) -> None:
    assert dropped_finalizers(WATCHES, new) == dropped


def test_check_yaml_names_file_and_line(tmp_path: Path) -> None:
    good = tmp_path / "good.yml"
    good.write_text("- name: ok\n  debug: {}\n")
    bad = tmp_path / "bad.yml"
    bad.write_text("- name: broken\n  debug: [unclosed\n")
    assert check_yaml(good) is None
    assert check_yaml(tmp_path / "template.j2") is None
    problem = check_yaml(bad)
    assert problem is not None and problem.startswith(f"{bad}:3")


def test_watched_roots_take_the_project_directory_without_its_subdirectories() -> None:
    trees = [ROLE_A, Path("/p/roles/cleanup"), PLAYBOOK_B.parent, *SHARED]
    assert watched_roots(Path("/p"), trees) == [
        (Path("/p"), False),
        (Path("/p/collections"), True),
        (Path("/p/playbooks"), True),
        (Path("/p/roles"), True),
    ]


def test_watched_roots_a_playbook_beside_the_watches_file() -> None:
    """Its directory is the playbook's tree: watched with all below it, once."""
    assert watched_roots(Path("/p"), [Path("/p"), Path("/p/roles/a")]) == [(Path("/p"), True)]
