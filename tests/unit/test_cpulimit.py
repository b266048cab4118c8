"""runner.util.cpulimit: the default workers per watch follow the cgroup CPU quota."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.util.cpulimit import available_cpus, cgroup_cpu_limit

V1_MOUNTINFO = """\
31 23 0:28 / {root} rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / {root}/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / {root}/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / {root}/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_CGROUP = """\
12:memory:/kubepods/pod1/c1
4:cpu,cpuacct:/kubepods/pod1/c1
0::/kubepods/pod1/c1
"""
V2_MOUNTINFO = "29 23 0:26 / {root} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V2_CGROUP = "0::/kubepods.slice/pod1.slice/c1.scope\n"
# A container with its own cgroup namespace: it sees its cgroup as the top.
NAMESPACED_MOUNTINFO = "29 23 0:26 / {root} ro,nosuid - cgroup2 cgroup2 rw\n"
NAMESPACED_CGROUP = "0::/\n"


def fake(tmp_path: Path, mountinfo: str, cgroup: str, files: dict[str, str]) -> Path:
    """A fake /proc/self (mountinfo, cgroup) and cgroup tree under `tmp_path`."""
    root = tmp_path / "sys-fs-cgroup"
    proc = tmp_path / "proc-self"
    proc.mkdir()
    (proc / "mountinfo").write_text(mountinfo.format(root=root))
    (proc / "cgroup").write_text(cgroup)
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return proc


@pytest.mark.parametrize(
    ("mountinfo", "cgroup", "files", "expected"),
    [
        pytest.param(
            V1_MOUNTINFO,
            V1_CGROUP,
            {
                "cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us": "50000\n",
                "cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us": "100000\n",
            },
            0.5,
            id="v1-500m",
        ),
        pytest.param(
            V1_MOUNTINFO,
            V1_CGROUP,
            {
                "cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us": "-1\n",
                "cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us": "100000\n",
                "cpu,cpuacct/kubepods/pod1/cpu.cfs_quota_us": "300000\n",
                "cpu,cpuacct/kubepods/pod1/cpu.cfs_period_us": "100000\n",
            },
            3.0,
            id="v1-quota-on-the-pod-not-the-container",
        ),
        pytest.param(
            V1_MOUNTINFO,
            V1_CGROUP,
            {
                "cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_quota_us": "-1\n",
                "cpu,cpuacct/kubepods/pod1/c1/cpu.cfs_period_us": "100000\n",
            },
            None,
            id="v1-no-quota",
        ),
        pytest.param(
            V2_MOUNTINFO,
            V2_CGROUP,
            {"kubepods.slice/pod1.slice/c1.scope/cpu.max": "150000 100000\n"},
            1.5,
            id="v2-1500m",
        ),
        pytest.param(
            V2_MOUNTINFO,
            V2_CGROUP,
            {
                "kubepods.slice/pod1.slice/c1.scope/cpu.max": "max 100000\n",
                "kubepods.slice/pod1.slice/cpu.max": "400000 100000\n",
                "kubepods.slice/cpu.max": "200000 100000\n",
            },
            2.0,
            id="v2-smallest-above-wins",
        ),
        pytest.param(
            V2_MOUNTINFO,
            V2_CGROUP,
            {"kubepods.slice/pod1.slice/c1.scope/cpu.max": "max 100000\n"},
            None,
            id="v2-max",
        ),
        pytest.param(
            NAMESPACED_MOUNTINFO, NAMESPACED_CGROUP, {"cpu.max": "25000 50000\n"}, 0.5, id="v2-ns"
        ),
        pytest.param(
            V2_MOUNTINFO,
            V2_CGROUP,
            {"kubepods.slice/pod1.slice/c1.scope/cpu.max": "garbage\n"},
            None,
            id="malformed",
        ),
        pytest.param("", "", {}, None, id="no-cgroups"),
    ],
)
def test_cgroup_cpu_limit(
    tmp_path: Path, mountinfo: str, cgroup: str, files: dict[str, str], expected: float | None
) -> None:
    assert cgroup_cpu_limit(fake(tmp_path, mountinfo, cgroup, files)) == expected


def test_available_cpus_rounds_the_quota_up(tmp_path: Path) -> None:
    proc = fake(
        tmp_path,
        V2_MOUNTINFO,
        V2_CGROUP,
        {"kubepods.slice/pod1.slice/c1.scope/cpu.max": "50000 100000\n"},
    )
    assert available_cpus(proc) == 1


def test_available_cpus_without_a_quota_is_the_cpus_we_may_run_on(tmp_path: Path) -> None:
    proc = fake(tmp_path, "", "", {})
    assert available_cpus(proc) == len(os.sched_getaffinity(0))


def test_a_quota_above_the_cpus_does_not_raise_the_count(tmp_path: Path) -> None:
    proc = fake(tmp_path, NAMESPACED_MOUNTINFO, NAMESPACED_CGROUP, {"cpu.max": "6400000 100000\n"})
    assert available_cpus(proc) == len(os.sched_getaffinity(0))
