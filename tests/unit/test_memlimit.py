"""runner.util.memlimit: the cgroup memory limit (v1 and v2), its working set, and the
memory of a process tree from /proc."""

from __future__ import annotations

from pathlib import Path

from test_cpulimit import (
    NAMESPACED_CGROUP,
    NAMESPACED_MOUNTINFO,
    V1_CGROUP,
    V1_MOUNTINFO,
    V2_CGROUP,
    V2_MOUNTINFO,
    fake,
)

from runner.util.memlimit import TreeMemory, cgroup_memory, children, tree_memory

MIB = 1 << 20


def test_v2_the_smallest_limit_above_the_process_binds(tmp_path: Path) -> None:
    proc = fake(
        tmp_path,
        V2_MOUNTINFO,
        V2_CGROUP,
        {
            "kubepods.slice/pod1.slice/c1.scope/memory.max": "max\n",
            "kubepods.slice/pod1.slice/memory.max": f"{512 * MIB}\n",
            "kubepods.slice/pod1.slice/memory.current": f"{300 * MIB}\n",
            "kubepods.slice/pod1.slice/memory.stat": f"anon 1\ninactive_file {100 * MIB}\n",
            "kubepods.slice/pod1.slice/memory.peak": f"{400 * MIB}\n",
            "kubepods.slice/pod1.slice/memory.events": "low 0\nmax 3\noom 1\noom_kill 1\n",
            "kubepods.slice/memory.max": f"{2048 * MIB}\n",
        },
    )
    found = cgroup_memory(proc)
    assert found is not None
    assert (found.version, found.directory.name, found.limit) == (2, "pod1.slice", 512 * MIB)
    assert found.usage() == 200 * MIB, "the working set leaves inactive file cache out"
    assert found.peak() == 400 * MIB
    assert found.oom_kills() == 1


def test_v1_limit_and_usage(tmp_path: Path) -> None:
    base = "memory/kubepods/pod1/c1"
    proc = fake(
        tmp_path,
        V1_MOUNTINFO,
        V1_CGROUP,
        {
            f"{base}/memory.limit_in_bytes": f"{256 * MIB}\n",
            f"{base}/memory.usage_in_bytes": f"{120 * MIB}\n",
            f"{base}/memory.stat": f"cache 5\ntotal_inactive_file {20 * MIB}\n",
            f"{base}/memory.max_usage_in_bytes": f"{130 * MIB}\n",
            f"{base}/memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
            "memory/memory.limit_in_bytes": "9223372036854771712\n",
        },
    )
    found = cgroup_memory(proc)
    assert found is not None
    assert (found.version, found.limit) == (1, 256 * MIB)
    assert found.usage() == 100 * MIB
    assert found.peak() == 130 * MIB
    assert found.oom_kills() == 2


def test_no_limit_anywhere_is_none(tmp_path: Path) -> None:
    proc = fake(tmp_path, NAMESPACED_MOUNTINFO, NAMESPACED_CGROUP, {"memory.max": "max\n"})
    assert cgroup_memory(proc) is None
    assert cgroup_memory(tmp_path / "nowhere") is None


def fake_process(proc: Path, pid: int, *, kids: list[int], rss: int, pss: int, uss: int) -> None:
    task = proc / str(pid) / "task" / str(pid)
    task.mkdir(parents=True)
    (task / "children").write_text(" ".join(map(str, kids)))
    (proc / str(pid) / "smaps_rollup").write_text(
        "00400000-7ffd [rollup]\n"
        f"Rss:   {rss} kB\nPss:   {pss} kB\nPss_Anon: 1 kB\n"
        f"Private_Clean:  {uss // 2} kB\nPrivate_Dirty:  {uss - uss // 2} kB\n"
    )


def test_tree_memory_adds_up_the_tree(tmp_path: Path) -> None:
    fake_process(tmp_path, 10, kids=[11, 12], rss=100, pss=60, uss=40)
    fake_process(tmp_path, 11, kids=[], rss=10, pss=6, uss=4)
    fake_process(tmp_path, 12, kids=[13], rss=20, pss=12, uss=8)
    # 13 ended meanwhile: counts as nothing
    assert tree_memory(10, proc=tmp_path) == TreeMemory(
        rss=130 * 1024, pss=78 * 1024, uss=52 * 1024
    )
    assert tree_memory(99, proc=tmp_path) == TreeMemory()


def test_a_process_that_ends_during_the_walk_has_no_children(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()  # its task directory is gone already
    assert children(7, proc=tmp_path) == []
    assert children(8, proc=tmp_path) == []
