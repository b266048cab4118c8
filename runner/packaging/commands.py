"""The `bundle` and `catalog` sub-commands (thin: parse, call the builders, print)."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `bundle generate|validate` and `catalog generate` on the top-level parser."""
