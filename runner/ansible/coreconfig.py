"""ansible-core settings the runtime turns on so that roles written for the Go operator's
ansible-core line (2.18) run unchanged on the line `pip install` picks (2.19).

One today: `ALLOW_BROKEN_CONDITIONALS`. ansible-core 2.19 makes a conditional whose result
is not a boolean an error ("Conditional result (True) was derived from value of type
'int' ... Conditionals must have a boolean result"): `when: some_list | length`,
`when: some_string_var`, `until: result.resources`. 2.18 evaluated them by truthiness
(with a deprecation warning from 2.18.19 on), and community operators rely on it. With the
setting on, 2.19 evaluates them by truthiness again (`bool(result)`, and an empty
conditional is true), printing its deprecation warning; the results are those of 2.18.

ansible-core reads the setting once, when its templating module is imported, so it is
put into the operator's own environment at start-up: every ansible-playbook, zygote and
warm webhook process inherits it. A user who decided (the variable
`ANSIBLE_ALLOW_BROKEN_CONDITIONALS` set, or `allow_broken_conditionals` in the
`[defaults]` of the ansible.cfg Ansible reads) keeps their choice.
"""

from __future__ import annotations

import configparser
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from runner.ansible.hooks import core_line

__all__ = ["BROKEN_CONDITIONALS_ENV", "allow_broken_conditionals", "config_file"]

BROKEN_CONDITIONALS_ENV = "ANSIBLE_ALLOW_BROKEN_CONDITIONALS"
_INI_KEY = "allow_broken_conditionals"
_FIRST_LINE = (2, 19)
"""The first ansible-core line that refuses non-boolean conditionals."""


def config_file(environ: Mapping[str, str], *, home: Path, etc: Path) -> Path | None:
    """The ansible.cfg a run's ansible-playbook reads: `$ANSIBLE_CONFIG` (a file, or a
    directory holding one), else `~/.ansible.cfg`, else `/etc/ansible/ansible.cfg`.
    (The working directory's ansible.cfg is never one: runs start in their data
    directory's empty `project/`.)"""
    given = environ.get("ANSIBLE_CONFIG")
    candidates: list[Path] = []
    if given:
        path = Path(given).expanduser()
        candidates.append(path / "ansible.cfg" if path.is_dir() else path)
    candidates += [home / ".ansible.cfg", etc / "ansible.cfg"]
    return next((path for path in candidates if path.is_file()), None)


def _set_in(path: Path | None) -> bool:
    if path is None:
        return False
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error, UnicodeDecodeError):
        return False
    return parser.has_option("defaults", _INI_KEY)


def allow_broken_conditionals(
    core_version: str | None,
    environ: MutableMapping[str, str],
    *,
    home: Path | None = None,
    etc: Path = Path("/etc/ansible"),
) -> str | None:
    """Turn `ALLOW_BROKEN_CONDITIONALS` on in `environ` for an ansible-core that refuses
    non-boolean conditionals, unless the user set it; return the start-up notice (one
    line), or None when nothing was changed."""
    line = core_line(core_version) if core_version else None
    if line is None or tuple(int(part) for part in line.split(".")) < _FIRST_LINE:
        return None
    if BROKEN_CONDITIONALS_ENV in environ:
        return None
    if _set_in(config_file(environ, home=home or Path.home(), etc=etc)):
        return None
    environ[BROKEN_CONDITIONALS_ENV] = "true"
    return (
        f"ansible-core {core_version}: conditionals with a non-boolean result (`when: "
        "some_list | length`) are evaluated by truthiness as on 2.18, with a deprecation "
        f"warning ({BROKEN_CONDITIONALS_ENV}=true; set it to false to make them errors)"
    )
