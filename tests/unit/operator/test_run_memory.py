"""runner.operator.memory: runs are found in the operator's process tree by their project
directory, their peaks become their controller's estimate, and one more run is admitted
only while the working set plus what admitted runs still need fits the budget."""

from __future__ import annotations

from pathlib import Path

from runner.operator.memory import DEFAULT_RUN_ESTIMATE, RunMemory, memory_limiter
from runner.structs import GVK
from runner.util.memlimit import CgroupMemory, TreeMemory

MIB = 1 << 20
KIND = GVK("cache.example.com", "v1alpha1", "Memcached")
OTHER = GVK("", "v1", "Other")


class FakeTree:
    """A fake /proc: processes with children, a working directory and memory (MiB)."""

    def __init__(self, root: Path) -> None:
        self.proc = root / "proc"
        self.base = root / "runs"

    def process(
        self, pid: int, *, kids: tuple[int, ...] = (), cwd: Path | None = None, uss: int = 0
    ) -> None:
        task = self.proc / str(pid) / "task" / str(pid)
        task.mkdir(parents=True, exist_ok=True)
        (task / "children").write_text(" ".join(map(str, kids)))
        target = cwd or Path("/")
        link = self.proc / str(pid) / "cwd"
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        kib = uss * 1024
        (self.proc / str(pid) / "smaps_rollup").write_text(
            f"Rss: {kib * 2} kB\nPss: {kib + 1} kB\nPrivate_Clean: 0 kB\nPrivate_Dirty: {kib} kB\n"
        )

    def project(self, gvk: GVK, name: str) -> Path:
        path = self.base / gvk.group / gvk.version / gvk.kind / "default" / name / "project"
        path.mkdir(parents=True, exist_ok=True)
        return path


def cgroup(tmp_path: Path, *, limit_mib: int, usage_mib: int) -> CgroupMemory:
    directory = tmp_path / "cg"
    directory.mkdir(exist_ok=True)
    (directory / "memory.current").write_text(f"{usage_mib * MIB}\n")
    (directory / "memory.stat").write_text("inactive_file 0\n")
    return CgroupMemory(2, directory, limit_mib * MIB)


def test_runs_are_found_by_their_project_directory_and_peaks_become_estimates(
    tmp_path: Path,
) -> None:
    tree = FakeTree(tmp_path)
    # operator 1 -> zygote 2 -> runs 3 (with a worker 4) and 5; 6 is something else.
    tree.process(1, kids=(2, 6), uss=100)
    tree.process(2, kids=(3, 5), uss=80)
    tree.process(3, kids=(4,), cwd=tree.project(KIND, "a"), uss=20)
    tree.process(4, cwd=tree.project(KIND, "a"), uss=10)
    tree.process(5, cwd=tree.project(OTHER, "b"), uss=7)
    tree.process(6, uss=50)
    memory = RunMemory(
        tree.base,
        cgroup=cgroup(tmp_path, limit_mib=512, usage_mib=200),
        fraction=0.85,
        pid=1,
        proc=tree.proc,
    )
    memory.watch("memcached", KIND)
    memory.watch("other", OTHER)

    found = memory.sample()
    assert found == {
        3: ("memcached", TreeMemory(rss=60 * MIB, pss=(30 * 1024 + 2) * 1024, uss=30 * MIB)),
        5: ("other", TreeMemory(rss=14 * MIB, pss=(7 * 1024 + 1) * 1024, uss=7 * MIB)),
    }
    memory.update(found)
    tree.process(3, kids=(4,), cwd=tree.project(KIND, "a"), uss=45)  # grows to 55 MiB
    memory.update(memory.sample())
    assert memory.estimate("memcached") == DEFAULT_RUN_ESTIMATE, "not before the run ends"

    memory.update({})  # both ended
    assert memory.estimates == {"memcached": 55 * MIB, "other": 7 * MIB}
    memory.update({9: ("memcached", TreeMemory(uss=15 * MIB))})
    memory.update({})
    assert memory.estimates["memcached"] == 47 * MIB, "down a fifth of the way"
    memory.update({9: ("memcached", TreeMemory(uss=60 * MIB))})
    memory.update({})
    assert memory.estimates["memcached"] == 60 * MIB, "up at once"


def test_an_unmeasured_controller_borrows_the_largest_estimate(tmp_path: Path) -> None:
    memory = RunMemory(tmp_path, cgroup=cgroup(tmp_path, limit_mib=512, usage_mib=0), fraction=1)
    assert memory.estimate("x") == DEFAULT_RUN_ESTIMATE
    memory.estimates.update(a=10 * MIB, b=30 * MIB)
    assert memory.estimate("x") == 30 * MIB
    assert memory.estimate("a") == 10 * MIB


def test_admits_while_working_set_and_expected_runs_fit_the_budget(tmp_path: Path) -> None:
    group = cgroup(tmp_path, limit_mib=500, usage_mib=200)
    memory = RunMemory(tmp_path, cgroup=group, fraction=0.8)  # a budget of 400 MiB
    memory.estimates["m"] = 50 * MIB
    assert memory.admits("m", {"m": 1}), "200 + 50 expected + 50 <= 400"
    assert memory.admits("m", {"m": 3}), "200 + 150 + 50 <= 400"
    assert not memory.admits("m", {"m": 4}), "200 + 200 + 50 > 400"
    assert "200 MiB in use" in memory.why_not("m") and "400 MiB" in memory.why_not("m")
    # Two runs have grown to 40 MiB each (counted in the working set): 10 MiB each to come.
    memory.update({3: ("m", TreeMemory(uss=40 * MIB)), 4: ("m", TreeMemory(uss=40 * MIB))})
    (group.directory / "memory.current").write_text(f"{280 * MIB}\n")
    assert memory.admits("m", {"m": 2}), "280 + 20 + 50 <= 400"
    assert not memory.admits("m", {"m": 4}), "280 + 120 + 50 > 400"


def test_no_limiter_without_a_limit_or_with_fraction_zero(tmp_path: Path) -> None:
    group = cgroup(tmp_path, limit_mib=512, usage_mib=0)
    assert memory_limiter(tmp_path, fraction=0, cgroup=group) is None
    limited = memory_limiter(tmp_path, fraction=0.85, cgroup=group)
    assert limited is not None
    limiter, memory = limited
    assert memory.budget == int(512 * MIB * 0.85)
    assert memory.in_flight() == limiter.running == 0
