"""Where the bundled `operator_sdk.util` collection lives.

Roles written for the Go operator call `operator_sdk.util.k8s_status` and friends. That
collection is neither on PyPI nor in the `ansible` package, so we ship our own copy inside
this package, under `runner/collections/ansible_collections/operator_sdk/util/`. The
directory returned here is the one to put on `ANSIBLE_COLLECTIONS_PATH` (Ansible looks for
`ansible_collections/<namespace>/<name>` below each entry).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["bundled_collections_path"]


def bundled_collections_path() -> Path:
    """The directory that contains the bundled `ansible_collections` tree.

    Returns the absolute path of `runner/collections`, suitable as one entry of
    `ANSIBLE_COLLECTIONS_PATH`; it holds `ansible_collections/operator_sdk/util`.
    """
    return Path(__file__).resolve().parents[1] / "collections"
