"""`ansible-operator completion bash|zsh|fish`: valid scripts that complete sub-commands,
options and option values, generated from the argparse tree."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runner.cli.completion import command_tree, render
from runner.cli.main import build_parser, main

BASH_COMPLETE = """
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
_ansible_operator
printf '%s\\n' "${COMPREPLY[@]}"
"""


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("completion")
    files = {}
    for shell in ("bash", "zsh", "fish"):
        files[shell] = directory / f"ansible-operator.{shell}"
        files[shell].write_text(render(shell, build_parser()))
    return files


def test_cli_prints_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out == render("bash", build_parser())


def test_bash_script_is_valid(scripts: dict[str, Path]) -> None:
    done = subprocess.run(["bash", "-n", str(scripts["bash"])], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def complete(script: Path, *words: str) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", BASH_COMPLETE, "complete", str(script), "ansible-operator", *words],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.split()


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        pytest.param([""], ["run", "version", "cluster", "init", "completion", "--help"], id="top"),
        pytest.param(["cl"], ["cluster"], id="prefix"),
        pytest.param(["cluster", ""], ["up", "down", "status", "kubectl", "--state-dir"], id="sub"),
        pytest.param(["cluster", "--state-dir", "up", ""], ["up", "down"], id="option-value"),
        pytest.param(["create", "api", "--g"], ["--group", "--generate-role"], id="sub-sub"),
        pytest.param(["run", "--zap-enc"], ["--zap-encoder"], id="run-option"),
        pytest.param(["run", "--zap-encoder", ""], ["json", "console"], id="typed-choices"),
        pytest.param(["run", "--ansible-log-events", "e"], ["everything"], id="choices"),
        pytest.param(["completion", ""], ["bash", "zsh", "fish"], id="positional-choices"),
        pytest.param(["olm", "run-"], ["run-bundle"], id="olm"),
        pytest.param(["pl"], ["plan"], id="plan"),
        pytest.param(
            ["plan", "--"],
            ["--cr", "--set", "--patch", "--delete", "--show-secrets", "--allow-side-effects"],
            id="plan-options",
        ),
        pytest.param(["plan", "--output", ""], ["text", "yaml", "json"], id="plan-output"),
        pytest.param(["plan", "--ansible-backend", ""], ["fast", "runner"], id="plan-backend"),
    ],
)
def test_bash_completes(scripts: dict[str, Path], words: list[str], expected: list[str]) -> None:
    offered = complete(scripts["bash"], *words)
    assert set(expected) <= set(offered), offered


def test_bash_offers_nothing_it_does_not_have(scripts: dict[str, Path]) -> None:
    assert complete(scripts["bash"], "cluster", "zz") == []


def test_every_sub_command_is_in_the_tree() -> None:
    tree = command_tree(build_parser())
    assert set(tree.subcommands) >= {
        "run",
        "version",
        "cluster",
        "init",
        "create",
        "bundle",
        "plan",
    }
    assert set(tree.subcommands) >= {"catalog", "olm", "history", "logs", "vars", "completion"}
    assert "--watches-file" in tree.subcommands["run"].options


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_script_is_valid(scripts: dict[str, Path]) -> None:
    done = subprocess.run(["zsh", "-n", str(scripts["zsh"])], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_script_is_valid_and_completes(scripts: dict[str, Path]) -> None:
    check = subprocess.run(
        ["fish", "--no-execute", str(scripts["fish"])], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    done = subprocess.run(
        ["fish", "-c", f"source {scripts['fish']}; complete -C 'ansible-operator cluster '"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    offered = [line.split("\t")[0] for line in done.stdout.splitlines()]
    assert {"up", "down", "status"} <= set(offered)


ZSH_SESSION = """
zmodload zsh/zpty
zpty z 'env PS1="> " HOME="$1" TERM=dumb zsh -f -i'
zpty -w z "autoload -U compinit && compinit -u -D; source $2"
zpty -w -n z $'ansible-operator cluster \\t'
# Read until the listing's last entries arrived (a loaded machine takes seconds), or 30 s.
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
def test_zsh_completes_in_an_interactive_shell(scripts: dict[str, Path], tmp_path: Path) -> None:
    """A real zsh (on a pseudo-terminal) with compinit: TAB lists cluster's actions."""
    done = subprocess.run(
        ["zsh", "-f", "-c", ZSH_SESSION, "zsh", str(tmp_path), str(scripts["zsh"])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    listed = done.stdout.split()
    assert {"up", "down", "status", "kubeconfig", "--state-dir"} <= set(listed), done.stdout


WATCHES = """\
- version: v1alpha1
  group: cache.example.com
  kind: Memcached
  role: memcached
-   kind: "BarBaz"
    group: x.example.com
    version: v1
    playbook: play.yml
"""


def test_bash_completes_plan_kinds_from_the_watches_file(
    scripts: dict[str, Path], tmp_path: Path
) -> None:
    (tmp_path / "w.yaml").write_text(WATCHES)
    assert complete(
        scripts["bash"], "plan", "--watches-file", str(tmp_path / "w.yaml"), "--cr", ""
    ) == ["memcached/", "barbaz/"]
    assert complete(
        scripts["bash"], "plan", f"--watches-file={tmp_path / 'w.yaml'}", "--cr", "b"
    ) == ["barbaz/"]
    assert complete(scripts["bash"], "plan", "--watches-file", "/nonexistent", "--cr", "") == []


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_plan_kinds_from_the_watches_file(
    scripts: dict[str, Path], tmp_path: Path
) -> None:
    (tmp_path / "watches.yaml").write_text(WATCHES)
    done = subprocess.run(
        ["fish", "-c", f"source {scripts['fish']}; complete -C 'ansible-operator plan --cr '"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        cwd=tmp_path,
    )
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == [
        "barbaz/",
        "memcached/",
    ]
