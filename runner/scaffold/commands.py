"""The `init` and `create` sub-commands (thin: parse, call the generator, print)."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `init` and `create api` on the top-level parser."""
