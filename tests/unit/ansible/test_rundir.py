"""Each operator process's own run directory (`runner.ansible.rundir`)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner.ansible.rundir import (
    LOCK_FILE,
    OWNER_FILE,
    carry_runs,
    check_base,
    claim,
    process_dirs,
    remove_abandoned,
)
from runner.errors import ConfigError

OTHER_UID = 54321
IDENTITY = "/projects/memcached/watches.yaml"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_missing_base_is_created_private(tmp_path: Path) -> None:
    base = tmp_path / "a" / "b" / "runner"
    assert check_base(base) == base.resolve()
    for level in (tmp_path / "a", tmp_path / "a" / "b", base):
        assert mode(level) == 0o700


def test_each_process_gets_a_fresh_private_locked_directory(tmp_path: Path) -> None:
    base = tmp_path / "runner"
    first = claim(base, identity=IDENTITY)
    second = claim(base, identity=IDENTITY)
    try:
        assert first.path != second.path
        for own in (first, second):
            assert own.path.parent == base
            assert mode(own.path) == 0o700
            assert own.path.stat().st_uid == os.geteuid()
            assert sorted(p.name for p in own.path.iterdir()) == [LOCK_FILE, OWNER_FILE]
            assert mode(own.path / OWNER_FILE) == 0o600
        assert set(process_dirs(base)) == {first.path, second.path}
    finally:
        first.release()
        second.release()


def test_a_running_operators_directory_is_left_alone(tmp_path: Path) -> None:
    """Two operators of the same project on one machine: the second one starting does
    not remove the first one's directory, but does remove it once the first has gone."""
    base = tmp_path / "runner"
    running = claim(base, identity=IDENTITY)
    (running.path / "cache.example.com").mkdir()
    starting = claim(base, identity=IDENTITY)
    try:
        assert remove_abandoned(base, identity=IDENTITY) == []
        assert (running.path / "cache.example.com").is_dir()
        assert starting.path.is_dir()

        running.release()  # the first operator stopped
        assert remove_abandoned(base, identity=IDENTITY) == [running.path]
        assert not running.path.exists()
        assert starting.path.is_dir()
    finally:
        running.release()
        starting.release()


def test_a_killed_operators_directory_is_removed_by_its_next_process(tmp_path: Path) -> None:
    base = tmp_path / "runner"
    script = textwrap.dedent(
        """\
        import sys, time
        from pathlib import Path
        from runner.ansible.rundir import claim
        own = claim(Path(sys.argv[1]), identity=sys.argv[2])
        print(own.path, flush=True)
        time.sleep(600)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(base), IDENTITY], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        path = Path(child.stdout.readline().strip())
        assert remove_abandoned(base, identity=IDENTITY) == []  # it runs: its lock is held
        assert path.is_dir()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert remove_abandoned(base, identity=IDENTITY) == [path]


def make_run(process_dir: Path, relative: str, ident: str) -> Path:
    """A finished run of the CR whose data directory is `relative`, as ansible-runner
    leaves it."""
    data_dir = process_dir / relative
    (data_dir / "env").mkdir(parents=True, exist_ok=True)
    (data_dir / "env" / "extravars").write_text("{}")
    run = data_dir / "artifacts" / ident
    run.mkdir(parents=True)
    (run / "command").write_text("{}")
    (run / "status").write_text("successful")
    return run


def test_the_next_process_keeps_its_predecessors_runs(tmp_path: Path) -> None:
    base = tmp_path / "runner"
    web = "cache.example.com/v1alpha1/Memcached/default/web"
    db = "cache.example.com/v1alpha1/Memcached/default/db"
    older = claim(base, identity=IDENTITY)
    make_run(older.path, web, "1")
    make_run(older.path, web, "2")
    make_run(older.path, db, "3")
    older.release()
    newer = claim(base, identity=IDENTITY)
    make_run(newer.path, web, "2")  # the same ident in both: kept once
    make_run(newer.path, web, "4")
    newer.release()
    own = claim(base, identity=IDENTITY)
    try:
        removed = remove_abandoned(base, identity=IDENTITY, keep_runs_in=own.path)
        assert sorted(removed) == sorted([older.path, newer.path])
        assert process_dirs(base) == [own.path]
        assert sorted(p.name for p in (own.path / web / "artifacts").iterdir()) == [
            "1", "2", "4",
        ]  # fmt: skip
        assert (own.path / db / "artifacts" / "3" / "status").read_text() == "successful"
    finally:
        own.release()


def test_carry_runs_moves_nothing_through_a_link(tmp_path: Path) -> None:
    source, target, elsewhere = tmp_path / "old", tmp_path / "new", tmp_path / "elsewhere"
    make_run(elsewhere, "g/v1/Kind/ns/planted", "9")
    source.mkdir()
    (source / "g").symlink_to(elsewhere / "g")
    assert carry_runs(source, target) == 0
    assert not target.exists()
    assert (elsewhere / "g/v1/Kind/ns/planted/artifacts/9").is_dir()


def test_other_operators_and_other_files_are_never_removed(tmp_path: Path) -> None:
    base = tmp_path / "runner"
    other_operator = claim(base, identity="/projects/other/watches.yaml")
    other_operator.release()  # stopped, but not ours to clean up
    unrelated = base / "operator-notes"
    unrelated.mkdir()  # no lock file: not a process directory
    old_layout = base / "cache.example.com" / "v1alpha1"
    old_layout.mkdir(parents=True)
    link = base / "operator-link"
    mine = claim(base, identity=IDENTITY)
    mine.release()
    link.symlink_to(mine.path)
    assert remove_abandoned(base, identity=IDENTITY) == [mine.path]
    for kept in (other_operator.path, unrelated, old_layout):
        assert kept.is_dir()
    assert link.is_symlink()


@needs_root
def test_a_dead_directory_of_another_user_is_not_removed(tmp_path: Path) -> None:
    base = tmp_path / "runner"
    theirs = claim(base, identity=IDENTITY)
    theirs.release()
    os.chown(theirs.path, OTHER_UID, OTHER_UID)
    assert remove_abandoned(base, identity=IDENTITY) == []
    assert theirs.path.is_dir()


@pytest.mark.parametrize(
    ("permissions", "refused"),
    [
        pytest.param(0o777, "by other users (mode 0777) without the sticky bit", id="0777"),
        pytest.param(0o775, "writable by other users (mode 0775)", id="group-writable"),
        pytest.param(0o722, "writable by other users (mode 0722)", id="others-writable"),
        pytest.param(0o1777, None, id="sticky-like-tmp"),
        pytest.param(0o755, None, id="0755"),
        pytest.param(0o700, None, id="0700"),
    ],
)
def test_a_base_writable_by_others_is_refused(
    tmp_path: Path, permissions: int, refused: str | None
) -> None:
    base = tmp_path / "runner"
    base.mkdir()
    base.chmod(permissions)
    if refused is None:
        own = claim(base, identity=IDENTITY)
        own.release()
        assert mode(own.path) == 0o700
        return
    with pytest.raises(ConfigError) as raised:
        claim(base, identity=IDENTITY)
    message = str(raised.value)
    assert message.startswith(f"run directory base {base}: ")
    assert refused in message
    assert list(base.iterdir()) == []  # nothing was written there


@needs_root
def test_a_base_owned_by_another_user_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "runner"
    base.mkdir(mode=0o700)
    os.chown(base, OTHER_UID, OTHER_UID)
    with pytest.raises(ConfigError) as raised:
        claim(base, identity=IDENTITY)
    message = str(raised.value)
    assert f"run directory base {base}: owned by uid {OTHER_UID}" in message
    assert "ANSIBLE_OPERATOR_RUNNER_DIR" in message
    assert list(base.iterdir()) == []


@needs_root
def test_a_base_inside_another_users_directory_is_refused(tmp_path: Path) -> None:
    """Whoever owns a directory above the base can rename the base and put another there."""
    parent = tmp_path / "shared"
    parent.mkdir()
    os.chown(parent, OTHER_UID, OTHER_UID)
    expected = f"{parent} .above the run directory base.*uid {OTHER_UID}"
    with pytest.raises(ConfigError, match=expected):
        check_base(parent / "runner")


@needs_root
def test_a_users_own_parent_writable_by_others_is_refused(tmp_path: Path) -> None:
    """Checked as that user (`uid`): their own parent, open to everyone, is refused; a
    root-owned one (the system's, like a pod's emptyDir) is accepted."""
    user = OTHER_UID
    parent = tmp_path / "home"
    parent.mkdir()
    base = parent / "runner"
    base.mkdir(mode=0o700)
    os.chown(base, user, user)
    parent.chmod(0o777)
    check_base(base, uid=user)  # root's parent: accepted
    os.chown(parent, user, user)
    with pytest.raises(ConfigError, match="writable by other users"):
        check_base(base, uid=user)
    parent.chmod(0o1777)
    check_base(base, uid=user)


def test_a_base_that_is_a_file_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "runner"
    base.write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        check_base(base)


def test_a_directory_that_cannot_be_set_up_is_not_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that cannot write its directory's files (the disk is full) removes the
    directory before it gives up: without `.lock` and `.operator` nobody else ever would.
    (Found by the chaos soak, docs/soak.md: replicas restarted while their run directory's
    filesystem was full left one such directory each.)"""
    import errno

    from runner.ansible import rundir

    def full(path: Path, text: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    base = tmp_path / "runner"
    monkeypatch.setattr(rundir, "_write_private", full)
    with pytest.raises(ConfigError, match="No space left on device") as raised:
        claim(base, identity=IDENTITY)
    assert str(base) in str(raised.value)
    assert process_dirs(base) == []
