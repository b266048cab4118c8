"""runner.ansible.hooks.modcommand: which commands the `modexec` hook may run itself."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from ansible.executor import module_common

from runner.ansible.hooks.modcommand import (
    ModuleCommand,
    WrapperArgs,
    in_process_allowed,
    parse_module_command,
    parse_wrapper,
)

PYTHON = "/opt/venv/bin/python3"
K8S = "ansible_collections.kubernetes.core.plugins.modules.k8s"


def wrapper(**args: Any) -> bytes:
    """An AnsiballZ wrapper as `module_common._find_module_utils` writes one."""
    code = "def _ansiballz_main(**kwargs):\n    pass\n"
    args_string = "\n".join(f"{key}={value!r}," for key, value in args.items())
    return (
        f'{code}\n\nif __name__ == "__main__":\n    _ansiballz_main(\n{args_string}\n)\n'
    ).encode()


def shell(inner: str) -> str:
    return f"/bin/sh -c {shlex.quote(inner)}"


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        pytest.param(
            shell(f"{PYTHON} && sleep 0"), ModuleCommand(PYTHON, {}), id="pipelined-module"
        ),
        pytest.param(
            shell(f"FOO=bar QUOTED='a b' {PYTHON} && sleep 0"),
            ModuleCommand(PYTHON, {"FOO": "bar", "QUOTED": "a b"}),
            id="task-environment",
        ),
        pytest.param(shell(f"FOO=$HOME {PYTHON} && sleep 0"), None, id="shell-expansion"),
        pytest.param(shell(f"FOO=~ {PYTHON} && sleep 0"), None, id="tilde-expansion"),
        pytest.param(shell(f"{PYTHON}  && sleep 0"), None, id="not-as-ansible-writes-it"),
        pytest.param(shell(f"{PYTHON} && sleep 1"), None, id="other-suffix"),
        pytest.param(shell(f"{PYTHON}"), None, id="no-suffix"),
        pytest.param(shell("python3 && sleep 0"), None, id="relative-interpreter"),
        pytest.param(shell(f"{PYTHON} /tmp/AnsiballZ_k8s.py && sleep 0"), None, id="script"),
        pytest.param(shell(f"{PYTHON} > /dev/null && sleep 0"), None, id="redirection"),
        pytest.param(shell(f"sudo -H -S -n -u root {PYTHON} && sleep 0"), None, id="become"),
        pytest.param(shell("echo ~ && sleep 0"), None, id="shell-command"),
        pytest.param(f"/bin/bash -c '{PYTHON} && sleep 0'", None, id="other-executable"),
        pytest.param(f"/bin/sh -c '{PYTHON} && sleep 0", None, id="bad-quoting"),
        pytest.param([PYTHON], None, id="not-a-string"),
    ],
)
def test_parse_module_command(cmd: object, expected: ModuleCommand | None) -> None:
    assert parse_module_command(cmd, executable="/bin/sh") == expected


def test_parse_wrapper_finds_the_module_and_its_payload() -> None:
    source = wrapper(
        ansible_module="k8s",
        module_fqn=K8S,
        profile="legacy",
        params='{"ANSIBLE_MODULE_ARGS": {}}',
        zip_data="UEsDBA==",
    )
    parsed = parse_wrapper(source)
    assert parsed == WrapperArgs(module_fqn=K8S, zip_data="UEsDBA==")
    assert parsed.module_member == "ansible_collections/kubernetes/core/plugins/modules/k8s.py"


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"print('not a wrapper')\n", id="no-main-call"),
        pytest.param(wrapper(module_fqn=K8S), id="no-payload"),
        pytest.param(wrapper(zip_data="UEsDBA=="), id="no-module"),
        pytest.param(
            wrapper(module_fqn=K8S, zip_data="UEsDBA==").replace(b"'UEsDBA=='", b"data()"),
            id="not-a-literal",
        ),
        pytest.param(wrapper(module_fqn=K8S, zip_data="x")[:-10], id="truncated"),
    ],
)
def test_parse_wrapper_rejects_what_it_does_not_understand(source: bytes) -> None:
    assert parse_wrapper(source) is None


@pytest.mark.parametrize(
    ("fqn", "allowed"),
    [
        pytest.param(K8S, True, id="kubernetes.core"),
        pytest.param(
            "ansible_collections.kubernetes.core.plugins.modules.k8s_info", True, id="info"
        ),
        pytest.param(
            "ansible_collections.operator_sdk.util.plugins.modules.k8s_status", True, id="osdk"
        ),
        pytest.param("ansible.modules.command", True, id="builtin"),
        pytest.param("ansible.legacy.requeue_after", False, id="library-module"),
        pytest.param("ansible_collections.community.general.plugins.modules.x", False, id="other"),
        pytest.param("ansible.modules.a-b", False, id="not-an-identifier"),
        pytest.param("ansible.modulesx.command", False, id="prefix-only"),
    ],
)
def test_in_process_allow_list(fqn: str, allowed: bool) -> None:
    assert in_process_allowed(fqn) is allowed


WRAPPER_2_18 = """\
#!/usr/bin/python
def _ansiballz_main():
    import os
    ZIPDATA = %(zipdata)r

    def invoke_module(modlib_path, temp_path, json_params):
        from ansible.module_utils import basic
        basic._ANSIBLE_ARGS = json_params
        runpy.run_module(mod_name=%(module_fqn)r, init_globals=dict(_module_fqn=%(module_fqn)r, _modlib_path=modlib_path),
                         run_name='__main__', alter_sys=True)

    def debug(command, zipped_mod, json_params):
        if command == 'execute':
            runpy.run_module(mod_name=%(module_fqn)r, init_globals=None, run_name='__main__', alter_sys=True)

if __name__ == '__main__':
    _ansiballz_main()
"""  # noqa: E501
"""The lines of ansible-core 2.18's AnsiballZ wrapper that say what it runs."""


def test_parse_wrapper_reads_the_2_18_wrapper() -> None:
    source = (WRAPPER_2_18 % {"zipdata": "UEsDBA==", "module_fqn": K8S}).encode()
    assert parse_wrapper(source) == WrapperArgs(module_fqn=K8S, zip_data="UEsDBA==")
    assert parse_wrapper(source.replace(b"'UEsDBA=='", b"data()")) is None
    assert parse_wrapper(source[:-5]) is None


@pytest.mark.skipif(not hasattr(module_common, "ACTIVE_ANSIBALLZ_TEMPLATE"), reason="2.18 only")
def test_parse_wrapper_reads_ansible_core_2_18s_own_template() -> None:
    source = module_common.ACTIVE_ANSIBALLZ_TEMPLATE % {
        "zipdata": "UEsDBA==",
        "ansible_module": "k8s",
        "module_fqn": K8S,
        "params": repr('{"ANSIBLE_MODULE_ARGS": {}}'),
        "shebang": "#!/usr/bin/python",
        "coding": "# -*- coding: utf-8 -*-",
        "date_time": (2026, 1, 1, 0, 0, 0),
        "coverage": "",
        "rlimit": "",
    }
    assert parse_wrapper(source.encode()) == WrapperArgs(module_fqn=K8S, zip_data="UEsDBA==")
