"""The tool as a user without a checkout gets it: the wheel, installed with pipx (Debian's
package: a fresh virtualenv outside the checkout, filled by pip with the machine's index
settings; without pipx, `python -m venv` and pip directly), run from a temporary
directory with a fresh HOME, nothing of the checkout on PATH or PYTHONPATH.

There `cluster up` starts a private cluster from the shared binary cache (Go is left off
PATH: a cache miss would be an error, not a build), `init` and `create api` make a
project, `make install run` runs it against that cluster, the sample CR becomes
Successful, `cluster down` stops everything. The wheel's cache keys, every sub-command's
--help and `version` are the checkout's; builds are reproducible.

"The same `version`": the install resolves the dependencies to the checkout
virtualenv's versions (pip constraints from its `pip freeze`) on the same interpreter,
so every line is equal except the `installed:` line, which names how each was
installed, and the paths of the collections, which lie inside each installation.
(One install serves every test: it is most of the module's time.)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.dist import REPO, copy_tree, python_build

from runner.devtools.cluster import build
from runner.devtools.cluster.components import components
from runner.devtools.cluster.local import LocalCluster

pytestmark = pytest.mark.timeout(1200)

# The checkout virtualenv's interpreter (not the virtualenv): the fresh ones are made
# with it, so that `version` reports the same Python.
BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SOURCE_DATE_EPOCH = "1700000000"
# Printed by `--help` of every parser and by the cache keys of every component.
HELP_SCRIPT = """
import argparse
from runner.cli.main import build_parser

def walk(parser, path):
    print("=====", " ".join(path))
    print(parser.format_help())
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                walk(sub, [*path, name])

walk(build_parser(), [])
"""
KEYS_SCRIPT = """
from pathlib import Path
from runner.devtools.cluster import build, components as c

groups = [c.components(), {"registry": c.registry(), "kubelet": c.kubelet()}, c.tools(),
          {"go": c.go_ansible_operator()}, c.olm_operators(), c.olm_utilities(),
          c.olm_v1_operators()]
for group in groups:
    for component in group.values():
        print(build.binary_path(component, Path("/cache")))
"""
TIMINGS: dict[str, float] = {}


def timed(name: str, started: float) -> None:
    TIMINGS[name] = round(time.monotonic() - started, 1)


@pytest.fixture(scope="module", autouse=True)
def report_timings() -> Iterator[None]:
    yield
    print("wheel install timings (s): " + ", ".join(f"{k} {v}" for k, v in TIMINGS.items()))


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The sdist and the wheel, built as `python -m build` builds them (the wheel from
    the sdist), from a copy of the tree."""
    started = time.monotonic()
    source = copy_tree(tmp_path_factory.mktemp("tree-a"), 1_600_000_000)
    built = python_build(
        source, tmp_path_factory.mktemp("dist"), environ={"SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    )
    timed("build", started)
    return built


@pytest.fixture(scope="module")
def wheel(dist: list[Path]) -> Path:
    (found,) = [p for p in dist if p.suffix == ".whl"]
    return found


@pytest.fixture(scope="module")
def constraints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkout virtualenv's dependency versions, as pip constraints."""
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    kept = [line for line in frozen if line and not line.startswith(("-e", "ansible-operator"))]
    path = tmp_path_factory.mktemp("pip") / "constraints.txt"
    path.write_text("\n".join(kept) + "\n")
    return path


def clean_env(home: Path, bin_dir: Path, **extra: str) -> dict[str, str]:
    """A user's environment without the checkout: a fresh HOME; PATH has the install's
    bin directory and the system's (no Go); pip's own settings and caches kept."""
    home.mkdir(parents=True, exist_ok=True)
    kept = {
        k: v
        for k, v in os.environ.items()
        if k.startswith("PIP_") or k in ("LANG", "LC_ALL", "TERM", "TMPDIR", "SSL_CERT_FILE")
    }
    return {
        **kept,
        "HOME": str(home),
        "PATH": f"{bin_dir}:{SYSTEM_PATH}",
        "ANSIBLE_OPERATOR_CACHE": str(build.cache_root()),
        "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip"),
        **extra,
    }


def run(
    argv: list[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        argv, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done


PIPX = Path("/usr/bin/pipx")


@dataclass(frozen=True)
class Installed:
    tool: str  # pipx or pip
    venv: Path  # the virtualenv holding the package
    bin_dir: Path  # where its `ansible-operator` command is


@pytest.fixture(scope="module")
def installed(
    tmp_path_factory: pytest.TempPathFactory, wheel: Path, constraints: Path
) -> Installed:
    """The wheel in a fresh virtualenv outside the checkout: by pipx, else by pip."""
    top = tmp_path_factory.mktemp("user")
    started = time.monotonic()
    pip_options = ["--quiet", "--no-compile", "-c", str(constraints)]
    if PIPX.is_file():
        found = Installed("pipx", top / "pipx" / "venvs" / "ansible-operator", top / "bin")
        env = clean_env(
            top / "home", found.bin_dir, PIPX_HOME=str(top / "pipx"), PIPX_BIN_DIR=str(top / "bin")
        )
        pip_args = " ".join(pip_options)
        install = [str(PIPX), "install", "--python", BASE_PYTHON, "--pip-args", pip_args]
        run([*install, str(wheel)], cwd=top, env=env, timeout=900)
    else:
        found = Installed("pip", top / "venv", top / "venv" / "bin")
        env = clean_env(top / "home", found.bin_dir)
        run([BASE_PYTHON, "-m", "venv", str(found.venv)], cwd=top, env=env)
        pip = [str(found.venv / "bin" / "pip"), "install", *pip_options, str(wheel)]
        run(pip, cwd=top, env=env, timeout=900)
    timed(f"{found.tool} install", started)
    return found


@pytest.fixture
def user(tmp_path: Path, installed: Installed) -> dict[str, str]:
    return clean_env(tmp_path / "home", installed.bin_dir)


def test_builds_are_reproducible(dist: list[Path], tmp_path: Path) -> None:
    """Another copy of the tree (another path, other file times) builds the same sdist and
    wheel; so does the tree itself, wheel alone."""
    again = python_build(
        copy_tree(tmp_path / "tree-b", 1_750_000_000),
        tmp_path / "out",
        environ={"SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH},
    )
    assert [p.name for p in again] == [p.name for p in dist]
    for first, second in zip(dist, again, strict=True):
        assert first.read_bytes() == second.read_bytes(), first.name
    epoch = {"SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
    (direct,) = python_build(REPO, tmp_path / "direct", "--wheel", environ=epoch)
    assert direct.read_bytes() == dist[0].read_bytes()


def test_the_tool_runs_from_its_virtualenv(
    installed: Installed, wheel: Path, user: dict[str, str]
) -> None:
    python = str(installed.venv / "bin" / "python")
    where = run(
        [python, "-c", "import runner; print(runner.__file__)"], cwd=installed.venv, env=user
    )
    assert Path(where.stdout.strip()).is_relative_to(installed.venv)
    shown = run(["ansible-operator", "version"], cwd=installed.venv, env=user).stdout
    described = f"installed: {installed.tool} in {installed.venv}, from the wheel {wheel}"
    assert shown.splitlines()[1] == described


def _comparable(lines: list[str]) -> list[str]:
    """`version`'s lines without the `installed:` line and the collections' paths."""
    return [
        re.sub(r" \(/[^)]*\)$", "", line) for line in lines if not line.startswith("installed:")
    ]


def test_version_is_the_checkouts(
    installed: Installed, user: dict[str, str], tmp_path: Path
) -> None:
    from_wheel = run(["ansible-operator", "version"], cwd=tmp_path, env=user).stdout.splitlines()
    checkout = [str(Path(sys.executable).parent / "ansible-operator"), "version"]
    here = run(checkout, cwd=tmp_path, env=user).stdout.splitlines()
    assert here[1].startswith("installed: editable in ")
    assert _comparable(from_wheel) == _comparable(here)
    for line in from_wheel:
        if "collection version:" in line:
            assert f"({installed.venv}/" in line, line


def test_cache_keys_and_help_are_the_checkouts(installed: Installed, user: dict[str, str]) -> None:
    python = str(installed.venv / "bin" / "python")
    for script in (KEYS_SCRIPT, HELP_SCRIPT):
        env = {**user, "COLUMNS": "100"}
        from_wheel = run([python, "-c", script], cwd=installed.venv, env=env).stdout
        here = run([sys.executable, "-c", script], cwd=REPO, env=env).stdout
        assert from_wheel == here
    assert here.count("=====") > 30  # every sub-command's --help


@pytest.fixture
def private_cluster(tmp_path: Path) -> Iterator[Path]:
    """The state directory the wheel's `cluster up` uses; stopped by the checkout's code
    if the test ends before its own `cluster down` did."""
    state = tmp_path / "state"
    try:
        yield state
    finally:
        if state.exists():
            LocalCluster(state).down(progress=print)


def test_cluster_init_create_run_without_a_checkout(
    tmp_path: Path, wheel: Path, user: dict[str, str], private_cluster: Path
) -> None:
    cached = [c for c in components().values() if build.missing([c], build.cache_root())]
    if cached:
        pytest.skip(f"the binary cache lacks {[c.name for c in cached]} (make binaries)")
    env = {
        **user,
        "ANSIBLE_OPERATOR_CLUSTER_DIR": str(private_cluster),
        # Other operators run on this machine: no fixed ports for metrics, probes, proxy.
        "RUN_ARGS": "--metrics-bind-address=0 --health-probe-bind-address=0 --proxy-port=0",
    }
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    up = run(["ansible-operator", "cluster", "up"], cwd=work, env=env)
    timed("cluster up", started)
    assert "building" not in up.stdout + up.stderr
    project = work / "web-operator"
    project.mkdir()
    run(["ansible-operator", "init", "--domain", "example.com"], cwd=project, env=env)
    create = ["create", "api", "--group", "web", "--version", "v1alpha1", "--kind", "Site"]
    run(["ansible-operator", *create], cwd=project, env=env)
    makefile = (project / "Makefile").read_text()
    assert "ANSIBLE_OPERATOR_SOURCE ?= \n" in makefile
    assert f"ANSIBLE_OPERATOR_PIP ?= {wheel}\n" in makefile
    log = tmp_path / "make-run.log"
    started = time.monotonic()
    with log.open("w") as out:
        operator = subprocess.Popen(
            ["make", "install", "run"],
            cwd=project,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while "Kind=Site with" not in log.read_text(errors="replace"):
            assert operator.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.5)
        kubectl = ["ansible-operator", "cluster", "kubectl"]
        run([*kubectl, "apply", "-k", "config/samples"], cwd=project, env=env)
        wait = ["wait", "sites", "--all", "--for=condition=Successful", "--timeout=180s"]
        run([*kubectl, *wait], cwd=project, env=env, timeout=240)
        timed("make install run to Successful", started)
    finally:
        os.killpg(operator.pid, signal.SIGTERM)
        try:
            operator.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(operator.pid, signal.SIGKILL)
            operator.wait()
    text = log.read_text(errors="replace")
    assert "reconcile Site default/site-sample: succeeded" in text
    assert "Traceback" not in text
    started = time.monotonic()
    run(["ansible-operator", "cluster", "down"], cwd=work, env=env)
    timed("cluster down", started)
    assert not private_cluster.exists()
