"""`ansible-operator completion --install`: each shell finds the saved script by itself
(bash through bash-completion, zsh through compinit and $fpath, fish by its completions
directory) and completes sub-commands at the first TAB."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runner.cli.completioninstall import install_path, shell_of
from runner.cli.main import main
from runner.errors import ConfigError

BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")


@pytest.mark.parametrize(
    ("shell", "environ", "expected"),
    [
        pytest.param(
            "bash", {}, "h/.local/share/bash-completion/completions/ansible-operator", id="bash"
        ),
        pytest.param(
            "bash",
            {"XDG_DATA_HOME": "/d"},
            "/d/bash-completion/completions/ansible-operator",
            id="bash-xdg",
        ),
        pytest.param(
            "bash",
            {"BASH_COMPLETION_USER_DIR": "/b", "XDG_DATA_HOME": "/d"},
            "/b/completions/ansible-operator",
            id="bash-user-dir",
        ),
        pytest.param("zsh", {}, "h/.local/share/zsh/site-functions/_ansible-operator", id="zsh"),
        pytest.param("fish", {}, "h/.config/fish/completions/ansible-operator.fish", id="fish"),
        pytest.param(
            "fish",
            {"XDG_CONFIG_HOME": "relative"},  # not absolute: ignored, as the spec says
            "h/.config/fish/completions/ansible-operator.fish",
            id="fish-relative-xdg",
        ),
    ],
)
def test_where_each_shell_looks(shell: str, environ: dict[str, str], expected: str) -> None:
    home = "/home/u"
    found = install_path(shell, {"HOME": home, **environ})
    assert str(found) == expected.replace("h/", f"{home}/", 1)


def test_the_shell_comes_from_shell() -> None:
    assert shell_of({"SHELL": "/usr/bin/zsh"}) == "zsh"
    with pytest.raises(ConfigError, match=r"\$SHELL is /bin/tcsh; name the shell"):
        shell_of({"SHELL": "/bin/tcsh"})


def installed(home: Path, shell: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    for variable in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "BASH_COMPLETION_USER_DIR"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SHELL", f"/bin/{shell}")
    assert main(["completion", "--install"]) == 0
    return install_path(shell, {"HOME": str(home)})


def test_install_writes_the_script_and_says_what_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = installed(tmp_path, "zsh", monkeypatch)
    out = capsys.readouterr().out
    assert main(["completion", "zsh"]) == 0
    assert target.read_text() == capsys.readouterr().out
    assert f"installed the zsh completion: {target}\n" in out
    assert f"fpath=({target.parent} $fpath)" in out
    assert main(["completion", "--install", "fish", "--dir", str(tmp_path / "sys")]) == 0
    assert (tmp_path / "sys" / "ansible-operator.fish").is_file()


def test_install_into_an_unwritable_place_is_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["completion", "--install", "bash", "--dir", str(blocker / "sub")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: completion --install bash: cannot write {blocker}/sub/")


@pytest.mark.skipif(not BASH_COMPLETION.is_file(), reason="bash-completion is not installed")
def test_bash_completion_loads_it_on_demand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed(tmp_path, "bash", monkeypatch)
    script = (
        f"source {BASH_COMPLETION}; _completion_loader ansible-operator; "
        "complete -p ansible-operator; "
        'COMP_WORDS=(ansible-operator cluster ""); COMP_CWORD=2; _ansible_operator; '
        'echo "${COMPREPLY[@]}"'
    )
    done = subprocess.run(
        ["bash", "--norc", "-c", script],
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "-F _ansible_operator ansible-operator" in done.stdout
    assert {"up", "down", "status"} <= set(done.stdout.split())


# A real zsh on a pseudo-terminal; compinit finds the script on $fpath by itself.
ZSH_SESSION = """
zmodload zsh/zpty
zpty z 'env PS1="> " HOME="$1" TERM=dumb zsh -f -i'
zpty -w z "fpath=($2 \\$fpath); autoload -U compinit && compinit -u -D"
zpty -w -n z $'ansible-operator cluster \\t'
out=""
for i in {1..300}; do
  while zpty -r -t z chunk; do out+=$chunk; done
  [[ $out == *kubeconfig* && $out == *--state-dir* ]] && break
  sleep 0.1
done
print -r -- "$out"
zpty -d z
"""


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_autoloads_it_and_completes_the_first_tab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = installed(tmp_path, "zsh", monkeypatch)
    done = subprocess.run(
        ["zsh", "-f", "-c", ZSH_SESSION, "zsh", str(tmp_path), str(target.parent)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert {"up", "down", "status", "kubeconfig", "--state-dir"} <= set(done.stdout.split())


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_loads_it_from_its_completions_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed(tmp_path, "fish", monkeypatch)
    tools = tmp_path / "bin"  # fish loads a command's completions once the command exists
    tools.mkdir()
    (tools / "ansible-operator").write_text("#!/bin/sh\n")
    (tools / "ansible-operator").chmod(0o755)
    done = subprocess.run(
        ["fish", "-c", "complete -C 'ansible-operator cluster '"],
        env={"HOME": str(tmp_path), "PATH": f"{tools}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    offered = {line.split("\t")[0] for line in done.stdout.splitlines()}
    assert {"up", "down", "status"} <= offered, done.stdout
