"""runner.ansible.hooks.localshell: the temporary-directory commands, answered without a shell.

The commands are the ones ansible-core's own `sh` shell plugin writes; each recognized
command is also run through `/bin/sh` and must give the same output and leave the same
files behind.
"""

from __future__ import annotations

import os
import pwd
import shlex
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.hooks import localshell
from runner.ansible.hooks.localshell import ExpandHome, MakeTemp, Remove

SH = "/bin/sh"


@pytest.fixture(scope="module")
def shell() -> Any:
    """ansible-core's `sh` shell plugin, as the `local` connection uses it."""
    from ansible.plugins.loader import init_plugin_loader, shell_loader

    init_plugin_loader([])
    return shell_loader.get("sh")


def as_run(shell: Any, command: str) -> str:
    """What `ActionBase._low_level_execute_command` hands the connection (no become)."""
    return f"{SH} -c {shlex.quote(shell.append_command(command, 'sleep 0'))}"


def mkdtemp(shell: Any, **kwargs: Any) -> str:
    """The temp-dir command of the `sh` plugin (ansible-core 2.19: `_mkdtemp2(...).command`;
    2.18: `mkdtemp(...)`, the same text)."""
    if hasattr(shell, "_mkdtemp2"):
        return str(shell._mkdtemp2(**kwargs).command)
    return str(shell.mkdtemp(**kwargs))


def expand_user(shell: Any, path: str, **kwargs: Any) -> str:
    """The home-directory command (2.19: `_expand_user2(...).command`; 2.18: `expand_user`)."""
    if hasattr(shell, "_expand_user2"):
        return str(shell._expand_user2(path, **kwargs).command)
    return str(shell.expand_user(path, **kwargs))


def user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def test_recognizes_the_commands_of_the_sh_plugin(shell: Any) -> None:
    base, name = "/root/.ansible/tmp", "ansible-tmp-1795564332.68-1053-125937921669121"
    cases = {
        as_run(shell, expand_user(shell, "~")): ExpandHome(),
        as_run(shell, expand_user(shell, "~", username="root")): ExpandHome("root"),
        as_run(shell, mkdtemp(shell, basefile=name, system=False, tmpdir=base)): MakeTemp(
            base=base, name=name
        ),
        as_run(shell, shell.remove(f"{base}/{name}/", recurse=True)): Remove(f"{base}/{name}/"),
    }
    for command, expected in cases.items():
        assert localshell.parse(command, executable=SH) == expected, command


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("/bin/sh -c 'echo ~'", id="no-sleep-0"),
        pytest.param("/bin/bash -c 'echo ~ && sleep 0'", id="other-executable"),
        pytest.param("/bin/sh -c 'echo ~ ; rm -rf / && sleep 0'", id="more-than-the-command"),
        pytest.param("/bin/sh -c 'echo ~$USER && sleep 0'", id="expansion-in-user"),
        pytest.param("/bin/sh -c 'rm -f -r /tmp/a b > /dev/null 2>&1 && sleep 0'", id="two-paths"),
        pytest.param(
            "/bin/sh -c 'rm -f -r '\"'\"'/tmp/$HOME'\"'\"' > /dev/null 2>&1 && sleep 0'",
            id="dollar-in-path",
        ),
        pytest.param("/bin/sh -c 'rm -f -r tmp/x > /dev/null 2>&1 && sleep 0'", id="relative"),
        pytest.param("/bin/sh -c 'rm -f -r /tmp/../etc > /dev/null 2>&1 && sleep 0'", id="dotdot"),
        pytest.param("/bin/sh -c 'rm -f /tmp/x > /dev/null 2>&1 && sleep 0'", id="not-recursive"),
        pytest.param(
            "/bin/sh -c 'sudo -H -S -n  -u root /bin/sh -c '\"'\"'echo BECOME; echo ~'\"'\"' "
            "&& sleep 0'",
            id="become",
        ),
        pytest.param(None, id="not-a-string"),
    ],
)
def test_anything_else_goes_to_the_shell(command: object) -> None:
    assert localshell.parse(command, executable=SH) is None


def test_a_temp_dir_under_an_unusual_base_goes_to_the_shell(shell: Any) -> None:
    command = mkdtemp(shell, basefile="ansible-tmp-1", system=False, tmpdir="/tmp/my tmp")
    assert localshell.parse(as_run(shell, command), executable=SH) is None


def through_sh(command: str) -> tuple[int, bytes, bytes]:
    done = subprocess.run(command, shell=True, capture_output=True, check=False)
    return done.returncode, done.stdout, done.stderr


def test_home_as_the_shell_expands_it(shell: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/operator")
    for username in ("", user()):
        command = as_run(shell, expand_user(shell, "~", username=username))
        parsed = localshell.parse(command, executable=SH)
        assert parsed is not None
        assert localshell.run(parsed, os.environ) == through_sh(command)


@pytest.mark.parametrize(
    ("command", "environ"),
    [
        pytest.param(ExpandHome(), {}, id="home-unset"),
        pytest.param(ExpandHome(), {"HOME": "relative"}, id="home-relative"),
        pytest.param(ExpandHome(), {"HOME": "/with space"}, id="home-with-space"),
        pytest.param(ExpandHome("no-such-user-here"), {"HOME": "/root"}, id="unknown-user"),
    ],
)
def test_unusual_homes_go_to_the_shell(command: ExpandHome, environ: dict[str, str]) -> None:
    assert localshell.run(command, environ) is None


def test_temp_dir_as_the_shell_makes_it(shell: Any, tmp_path: Path) -> None:
    outputs, made = [], []
    for how in ("shell", "here"):
        base = tmp_path / how / "missing" / "tmp"
        command = as_run(shell, mkdtemp(shell, basefile="ansible-tmp-1.5-7-9", tmpdir=str(base)))
        parsed = localshell.parse(command, executable=SH)
        assert isinstance(parsed, MakeTemp)
        done = through_sh(command) if how == "shell" else localshell.run(parsed, os.environ)
        assert done is not None
        outputs.append((done[0], done[1].replace(str(tmp_path / how).encode(), b"<dir>"), done[2]))
        made.append(
            {
                str(path.relative_to(tmp_path / how)): stat.S_IMODE(path.stat().st_mode)
                for path in sorted((tmp_path / how).rglob("*"))
            }
        )
    assert outputs[0] == outputs[1]
    assert made[0] == made[1]
    assert made[1]["missing/tmp/ansible-tmp-1.5-7-9"] == 0o700


def test_a_temp_dir_that_exists_goes_to_the_shell(tmp_path: Path) -> None:
    (tmp_path / "ansible-tmp-1").mkdir()
    assert localshell.run(MakeTemp(base=str(tmp_path), name="ansible-tmp-1"), {}) is None


def test_removal_as_the_shell_does_it(tmp_path: Path) -> None:
    tree = tmp_path / "ansible-tmp-1"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "file").write_text("x")
    single = tmp_path / "single"
    single.write_text("x")
    for target in (f"{tree}/", str(single), str(tmp_path / "missing")):
        assert localshell.run(Remove(target), {}) == (0, b"", b"")
    assert sorted(os.listdir(tmp_path)) == []


def test_command_text_round_trips() -> None:
    for command in (ExpandHome(), ExpandHome("ops"), MakeTemp("/a/b", "c"), Remove("/a/b/c/")):
        text = f"{SH} -c {shlex.quote(localshell.command_text(command) + ' && sleep 0')}"
        assert localshell.parse(text, executable=SH) == command
