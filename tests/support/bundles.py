"""Helpers for the packaging tests: the guestbook fixture project, bundle options, edits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from runner.devtools.packaging.csv import BundleOptions

REPO = Path(__file__).resolve().parents[2]
GUESTBOOK = REPO / "tests" / "fixtures" / "packaging" / "guestbook-operator"
GUESTBOOK_CSV = "manifests/guestbook-operator.clusterserviceversion.yaml"


def options(**overrides: Any) -> BundleOptions:
    values: dict[str, Any] = {"version": "1.2.3", "package": "guestbook-operator"}
    values.update(overrides)
    return BundleOptions(**values)


def edit_yaml(path: Path, change: Callable[[Any], None]) -> None:
    """Load `path`, let `change` modify the data in place, write it back."""
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))
