"""README's "New operator projects", walked as a newcomer would: every command of its
code blocks, as written, in a fresh home and a fresh directory, with PATH holding only
the system's directories and what the README's install step puts there.

The cluster is the tests' cluster, through KUBECONFIG (the README's `make cluster-up`
then uses it instead of starting one). Set besides: ANSIBLE_OPERATOR_CACHE and
PIP_CACHE_DIR (the machine's caches: the fresh home has none) and RUN_ARGS (other
operators run on this machine: no fixed ports for metrics, probes and the proxy).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.devtools.cluster import build

REPO = Path(__file__).resolve().parents[2]
SECTION = "## New operator projects"


def readme_blocks() -> list[list[str]]:
    """The commands of each ```sh block of the section, comments dropped."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    return [
        [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
        for block in blocks
    ]


def test_the_section_has_install_project_and_sample_steps() -> None:
    install, project, sample = readme_blocks()
    assert install == ["make install-tool"]
    assert project[0] == "mkdir web-operator && cd web-operator"
    assert project[-1] == "make install run"
    assert sample[0].startswith("ansible-operator cluster kubectl apply")


@pytest.fixture
def newcomer(tmp_path: Path, kubeconfig: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    system = "/usr/local/bin:/usr/bin:/bin"
    python = shutil.which("python3.11")  # only for `make venv` when .venv is not there yet
    path = f"{home}/.local/bin:{system}" + (f":{Path(python).parent}" if python else "")
    keep = ("LANG", "LC_ALL", "TERM", "TMPDIR", "GOPATH", "GOMODCACHE", "GOCACHE")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    return {
        **env,
        "HOME": str(home),
        "PATH": path,
        "KUBECONFIG": str(kubeconfig),
        "ANSIBLE_OPERATOR_CACHE": str(build.cache_root()),
        "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip"),
        "RUN_ARGS": "--metrics-bind-address=0 --health-probe-bind-address=0 --proxy-port=0"
        " --user-metrics-bind-address=127.0.0.1:0",
    }


def sh(command: str, *, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture
def walked(tmp_path: Path, newcomer: dict[str, str]) -> Iterator[tuple[Path, Path]]:
    """The first two blocks run: the tool installed, the project made, `make install run`
    in the background. Yields the project and the operator's log; cleans up after."""
    install, project_steps = readme_blocks()[:2]
    for command in install:
        sh(command, cwd=REPO, env=newcomer)
    work = tmp_path / "work"
    work.mkdir()
    project = work / "web-operator"
    log = tmp_path / "make-run.log"
    *steps, last = project_steps
    script = " && ".join(steps) + f" && exec {last}"
    with log.open("w") as out:
        running = subprocess.Popen(
            ["bash", "-c", script],
            cwd=work,
            env=newcomer,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while "Kind=Site with" not in log.read_text(errors="replace"):
            assert running.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.5)
        yield project, log
    finally:
        if project.is_dir():
            subprocess.run(
                [
                    "bash",
                    "-c",
                    "ansible-operator cluster kubectl delete --ignore-not-found "
                    "--wait=true --timeout=60s -k config/samples",
                ],
                cwd=project,
                env=newcomer,
                capture_output=True,
                timeout=120,
                check=False,
            )
        os.killpg(running.pid, signal.SIGTERM)
        try:
            running.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(running.pid, signal.SIGKILL)
            running.wait()
        if project.is_dir():
            subprocess.run(
                ["make", "uninstall", "ignore-not-found=true"],
                cwd=project,
                env=newcomer,
                capture_output=True,
                timeout=120,
                check=False,
            )


def test_readme_walk_reconciles_the_sample(
    walked: tuple[Path, Path], newcomer: dict[str, str]
) -> None:
    project, log = walked
    assert (project / "Makefile").is_file()
    sample_steps = readme_blocks()[2]
    for command in sample_steps:  # the last one waits for condition Successful
        sh(command, cwd=project, env=newcomer, timeout=180)
    status = sh(
        "ansible-operator cluster kubectl get sites -o "
        "jsonpath='{.items[0].status.conditions[?(@.type==\"Successful\")].status}'",
        cwd=project,
        env=newcomer,
    )
    assert status == "True"
    text = log.read_text(errors="replace")
    assert "reconcile Site default/site-sample: succeeded" in text
    assert "Traceback" not in text
