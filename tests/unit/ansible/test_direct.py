"""runner.ansible.hooks.direct: the program that replaces an AnsiballZ payload for direct modules.

The program must run the module the same way whether a new interpreter runs it (what the
`local` connection does when it cannot do better) or the fast backend runs it in process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from runner.ansible import hooks
from runner.ansible.bundledcollection import bundled_collections_path
from runner.ansible.hooks import direct

REQUEUE = "ansible_collections.operator_sdk.util.plugins.modules.requeue_after"
PROFILE = None if hooks.core_line(hooks.installed_core_version() or "") == "2.18" else "legacy"
"""The module's serialization profile (ansible-core 2.18 has none)."""


def requeue_program(time: str) -> bytes:
    return direct.program(
        shebang=f"#!{sys.executable}",
        module_fqn=REQUEUE,
        params=json.dumps(
            {"ANSIBLE_MODULE_ARGS": {"time": time, "_ansible_module_name": "requeue_after"}}
        ),
        profile=PROFILE,
        rlimit_nofile=0,
        collection_paths=[str(bundled_collections_path())],
    )


def test_the_program_names_its_module() -> None:
    program = requeue_program("5s")
    assert program.startswith(f"#!{sys.executable}\n".encode())
    assert direct.module_of(program) == REQUEUE


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"#!/usr/bin/python\nprint('hello')\n", id="plain-module"),
        pytest.param(
            f"{direct.MARKER}{REQUEUE}\n".encode(),
            id="no-shebang",
        ),
        pytest.param(
            f"#!/usr/bin/python\n{direct.MARKER}ansible.modules.command\n".encode(),
            id="not-allowed",
        ),
        pytest.param(
            f"#!/usr/bin/python\n{direct.MARKER}{REQUEUE}; import os\n".encode(),
            id="not-a-name",
        ),
    ],
)
def test_other_sources_are_not_direct_programs(source: bytes) -> None:
    assert direct.module_of(source) is None


def run_new_interpreter(program: bytes) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-"], input=program, capture_output=True, check=False, timeout=60
    )
    return done.returncode, json.loads(done.stdout)


IN_PROCESS = textwrap.dedent(
    """\
    import json, sys
    from runner.ansible.hooks import inprocess
    source = sys.stdin.buffer.read()
    rc, out, err = inprocess.run_direct(source, environment={}, cwd=None, sys_path=sys.path)
    print(json.dumps({"rc": rc, "out": out.decode(), "err": err.decode()}))
    """
)


def run_in_process(program: bytes) -> tuple[int, dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", IN_PROCESS],
        input=program,
        capture_output=True,
        check=True,
        timeout=60,
    )
    outcome = json.loads(done.stdout)
    return outcome["rc"], json.loads(outcome["out"])


@pytest.mark.parametrize(
    ("time", "rc"), [pytest.param("1m30s", 0, id="ok"), pytest.param("soon", 1, id="fails")]
)
def test_the_same_result_in_a_new_interpreter_and_in_process(time: str, rc: int) -> None:
    program = requeue_program(time)
    new = run_new_interpreter(program)
    here = run_in_process(program)
    assert new == here
    assert new[0] == rc
    if rc == 0:
        assert new[1]["period"] == "1m30s"
    else:
        assert new[1]["failed"] is True
