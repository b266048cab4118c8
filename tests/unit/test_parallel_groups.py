"""The groups of a parallel run (support.parallel) name modules that exist: a renamed
module would otherwise drop out of its group silently and run beside the tests it
cannot share the machine or the cluster with."""

from __future__ import annotations

from pathlib import Path

from support import parallel

TESTS = Path(__file__).resolve().parents[1]


def test_every_grouped_module_exists() -> None:
    grouped = [module for modules in parallel.SHARED.values() for module in modules]
    assert [module for module in grouped if not (TESTS / module).is_file()] == []


def test_every_slow_group_is_a_group_or_a_module() -> None:
    unknown = [
        group
        for group in parallel.SLOWEST_FIRST
        if group not in parallel.SHARED and not (TESTS / group).is_file()
    ]
    assert unknown == []


def test_modules_of_a_group_share_a_scope_and_the_slowest_come_first() -> None:
    faults = parallel.group_of(parallel.module_of("tests/e2e/test_faults.py::test_x[a]"))
    modes = parallel.group_of(parallel.module_of("tests/integration/test_failure_modes.py::t"))
    assert faults == modes == "faults-crds"
    assert parallel.group_of("unit/test_vars.py") == "unit/test_vars.py"
    order = sorted(
        ["unit/test_vars.py", "integration/test_informer.py", "e2e/test_olm_images.py"],
        key=parallel.rank,
    )
    assert order == ["e2e/test_olm_images.py", "integration/test_informer.py", "unit/test_vars.py"]
