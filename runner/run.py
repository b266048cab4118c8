"""`ansible-operator run`: wires watches, engine, Ansible and servers together."""

from __future__ import annotations

import argparse
import sys


def run(args: argparse.Namespace) -> int:
    print(
        "ansible-operator run: the reconcile runtime is not implemented yet "
        f"(watches file: {args.watches_file})",
        file=sys.stderr,
    )
    return 2
