"""The test tree's own rule: pytest imports test modules by their file name (the
directories are not packages), so two test files of one name anywhere under tests/ stop
the collection of the whole run. This catches it in the fast tier."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_module_names_are_unique() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "fixtures" not in path.relative_to(TESTS).parts:
            places[path.name].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in places.items() if len(paths) > 1} == {}
