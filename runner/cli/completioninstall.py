"""`ansible-operator completion --install`: the completion script, saved where its shell
looks for it, for the current user.

  bash  $BASH_COMPLETION_USER_DIR/completions/ansible-operator, by default
        ~/.local/share/bash-completion/completions/ (bash-completion 2 loads it on the
        first TAB after the command's name; Debian's ~/.bashrc enables bash-completion)
  zsh   ~/.local/share/zsh/site-functions/_ansible-operator (compinit autoloads it once
        that directory is on $fpath: the one line to add is printed)
  fish  ~/.config/fish/completions/ansible-operator.fish (fish loads it by itself)

$XDG_DATA_HOME and $XDG_CONFIG_HOME replace ~/.local/share and ~/.config when set.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from runner.cli.completion import SHELLS
from runner.errors import ConfigError

__all__ = ["install", "install_path", "shell_of", "what_next"]

_PROG = "ansible-operator"


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def _xdg(environ: Mapping[str, str], variable: str, default: str) -> Path:
    value = environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else _home(environ) / default


def install_path(shell: str, environ: Mapping[str, str]) -> Path:
    """Where `shell` looks for the completion of ansible-operator, for this user."""
    data = _xdg(environ, "XDG_DATA_HOME", ".local/share")
    if shell == "bash":
        configured = environ.get("BASH_COMPLETION_USER_DIR", "")
        base = Path(configured) if configured else data / "bash-completion"
        return base / "completions" / _PROG
    if shell == "zsh":
        return data / "zsh" / "site-functions" / f"_{_PROG}"
    if shell == "fish":
        config = _xdg(environ, "XDG_CONFIG_HOME", ".config")
        return config / "fish" / "completions" / f"{_PROG}.fish"
    raise ConfigError(f"completion: no shell {shell!r}; choose from {', '.join(SHELLS)}")


def file_name(shell: str) -> str:
    """The script's file name in a directory the shell reads completions from."""
    return install_path(shell, {"HOME": "/"}).name


def shell_of(environ: Mapping[str, str]) -> str:
    """The user's shell, from $SHELL, if it is one with completion here."""
    shell = Path(environ.get("SHELL", "")).name
    if shell not in SHELLS:
        shown = environ.get("SHELL") or "not set"
        raise ConfigError(
            f"completion --install: $SHELL is {shown}; name the shell: "
            f"ansible-operator completion --install {'|'.join(SHELLS)}"
        )
    return shell


def install(shell: str, script: str, target: Path) -> Path:
    """Write `script` to `target` (its directory made if needed); return the path."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_text(script, encoding="utf-8")
        partial.replace(target)
    except OSError as exc:
        raise ConfigError(f"completion --install {shell}: cannot write {target}: {exc}") from exc
    return target


def what_next(shell: str, target: Path) -> str:
    """What the user does for the shell to find the script (printed after installing)."""
    if shell == "bash":
        return (
            "bash-completion loads it on the first TAB in a new shell (Debian's ~/.bashrc "
            "enables bash-completion; apt-get install bash-completion if it is missing). "
            f"Without bash-completion, add to ~/.bashrc: source {target}"
        )
    if shell == "zsh":
        return (
            "zsh loads it from $fpath: unless that directory is there already, add to "
            f"~/.zshrc, before compinit runs:\n  fpath=({target.parent} $fpath)\n"
            "  autoload -U compinit && compinit"
        )
    return "fish loads it in new shells."
