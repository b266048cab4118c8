"""Runs the `init` / `create` sub-commands the way `ansible-operator` does, but with only
the scaffold commands registered (so these tests do not depend on other sub-commands)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

import pytest

from runner.cli import scaffoldcmd as commands
from runner.errors import AnsibleOperatorError


def _run(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="ansible-operator")
    sub = parser.add_subparsers(dest="command", required=True)
    commands.add_commands(sub)
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except AnsibleOperatorError as err:  # as runner.cli.main.main reports it
        print(f"error: {err}", file=sys.stderr)
        return 1
    return code


@pytest.fixture
def cli() -> Callable[[Sequence[str]], int]:
    return _run
