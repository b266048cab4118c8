"""runner.ansible.hooks.inprocess: a module run in process sees a new interpreter and leaves
nothing behind."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.ansible.hooks import inprocess

MESSY = textwrap.dedent(
    """\
    import os, signal, sys
    from ansible.module_utils import _internal
    controller = getattr(_internal, "is_controller", False)
    print(os.environ["TASK_VAR"], os.getcwd(), os.environ["PWD"], sys.argv, controller)
    print("to stderr", file=sys.stderr)
    signal.signal(signal.SIGUSR1, lambda *_: None)
    os.umask(0o077)
    os.environ["LEFT_BEHIND"] = "1"
    os.chdir("/")
    sys.path.append("/left/behind")
    sys.exit(3)
    """
).encode()


@pytest.fixture
def controller() -> Iterator[None]:
    """The process as the controller has it: `module_utils` in controller mode (ansible-core
    2.19; 2.18 has no such mode)."""
    from ansible.module_utils import _internal

    if not hasattr(_internal, "is_controller"):
        yield
        return
    saved = _internal.is_controller
    _internal.is_controller = True
    try:
        yield
    finally:
        _internal.is_controller = saved


def process_state() -> tuple[object, ...]:
    """What a module run in process may change and must put back."""
    return (
        dict(os.environ),
        os.getcwd(),
        list(sys.path),
        sys.argv,
        sys.stdout,
        signal.getsignal(signal.SIGUSR1),
    )


def test_the_module_sees_a_new_interpreter_and_everything_is_put_back(
    tmp_path: Path, controller: None
) -> None:
    from ansible.module_utils import _internal

    before = process_state()
    umask = os.umask(0o022)
    os.umask(umask)

    rc, out, err = inprocess.run_direct(
        MESSY,
        environment={"TASK_VAR": "from the task"},
        cwd=str(tmp_path),
        sys_path=[*sys.path, "/module/path"],
    )

    assert rc == 3
    assert out.decode() == f"from the task {tmp_path} {tmp_path} [''] False\n"
    assert err == b"to stderr\n"
    assert process_state() == before
    assert os.umask(umask) == umask
    assert getattr(_internal, "is_controller", True) is True


def test_an_uncaught_exception_is_exit_code_1_with_a_traceback() -> None:
    rc, out, err = inprocess.run_direct(
        b"raise ValueError('boom')\n", environment={}, cwd=None, sys_path=sys.path
    )
    assert (rc, out) == (1, b"")
    assert b"ValueError: boom" in err


def test_an_interrupt_is_the_controllers_and_state_is_restored() -> None:
    environ = dict(os.environ)
    with pytest.raises(KeyboardInterrupt):
        inprocess.run_direct(
            b"import os\nos.environ['DURING'] = '1'\nraise KeyboardInterrupt\n",
            environment={"TASK_VAR": "x"},
            cwd="/",
            sys_path=sys.path,
        )
    assert dict(os.environ) == environ


@pytest.mark.parametrize(
    ("code", "rc", "stderr"),
    [
        pytest.param("sys.exit()", 0, b"", id="none"),
        pytest.param("sys.exit(300)", 300 & 0xFF, b"", id="masked"),
        pytest.param("sys.exit('fatal')", 1, b"fatal\n", id="message"),
    ],
)
def test_exit_codes(code: str, rc: int, stderr: bytes) -> None:
    result = inprocess.run_direct(
        f"import sys\n{code}\n".encode(), environment={}, cwd=None, sys_path=sys.path
    )
    assert result == (rc, b"", stderr)
