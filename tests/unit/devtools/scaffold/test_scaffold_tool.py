"""The scaffolded Makefile finds `ansible-operator`: on PATH, else in bin/ (installed from
the checkout `init` ran from, or else from the wheel or index it was installed from),
else it says exactly how to get it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from runner.cli.scaffoldcmd import tool_pip, tool_source
from runner.devtools.scaffold.files import toplevel as files_project

REPO = Path(__file__).resolve().parents[4]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def project(tmp_path: Path, source: str, pip: str = "") -> Path:
    (tmp_path / "Makefile").write_text(
        files_project.makefile(
            project_name="web-operator", domain="example.com", tool_source=source, tool_pip=pip
        )
    )
    return tmp_path


def make(directory: Path, *args: str, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=directory,
        env={"PATH": path, "HOME": str(directory)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_init_records_the_checkout_it_runs_from() -> None:
    assert tool_source() == str(REPO)
    text = files_project.makefile(project_name="p", domain="d", tool_source=str(REPO))
    assert f"ANSIBLE_OPERATOR_SOURCE ?= {REPO}\n" in text
    assert tool_pip() == ""  # the checkout is what gets installed


def fake_tool(tmp_path: Path) -> Path:
    tools = tmp_path / "tools"
    tools.mkdir()
    fake = tools / "ansible-operator"
    fake.write_text('#!/bin/sh\necho fake "$@"\n')
    fake.chmod(0o755)
    return tools


def test_the_command_on_path_is_used(tmp_path: Path) -> None:
    tools = fake_tool(tmp_path)
    (tmp_path / "p").mkdir()
    directory = project(tmp_path / "p", "")
    done = make(directory, "ansible-operator", "cluster-up", path=f"{tools}:/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    assert "fake cluster up" in done.stdout
    assert not (directory / "bin").exists()


def test_without_the_command_or_a_checkout_it_says_how(tmp_path: Path) -> None:
    directory = project(tmp_path, "/nonexistent/checkout")
    done = make(directory, "install", path="/usr/bin:/bin")
    assert done.returncode != 0
    assert (
        "ansible-operator is not on PATH, and ANSIBLE_OPERATOR_SOURCE "
        "('/nonexistent/checkout') is no checkout of it. Put it on PATH (in a checkout: "
        "make install-tool), or install it into bin/ with: make ansible-operator "
        "ANSIBLE_OPERATOR_SOURCE=/path/to/checkout"
    ) in done.stderr
    assert not (directory / "bin").exists()


def test_cluster_up_uses_kubeconfig_when_set(tmp_path: Path) -> None:
    tools = fake_tool(tmp_path)
    (tmp_path / "p").mkdir()
    directory = project(tmp_path / "p", "")
    done = subprocess.run(
        ["make", "cluster-up"],
        cwd=directory,
        env={"PATH": f"{tools}:/usr/bin:/bin", "KUBECONFIG": "/some/kubeconfig"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert "KUBECONFIG is set: using that cluster (/some/kubeconfig)" in done.stdout
    assert "fake" not in done.stdout


# `$(PYTHON) -m venv DIR` whose pip records its arguments and "installs" the command.
FAKE_PYTHON = r"""#!/bin/sh
venv="$3"
mkdir -p "$venv/bin"
cat > "$venv/bin/pip" <<END
#!/bin/sh
echo "\$@" > "$venv/pip-args"
printf '#!/bin/sh\necho installed "\$@"\n' > "$venv/bin/ansible-operator"
chmod +x "$venv/bin/ansible-operator"
END
chmod +x "$venv/bin/pip"
"""


def install_into_bin(directory: Path, *variables: str) -> tuple[str, str]:
    """`make ansible-operator` without the command on PATH, with a fake Python: pip's
    arguments, and what bin/ansible-operator then says."""
    python = directory.parent / "fake-python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    done = make(directory, "ansible-operator", f"PYTHON={python}", *variables, path="/usr/bin:/bin")
    assert done.returncode == 0, done.stdout + done.stderr
    ran = subprocess.run(
        [str(directory / "bin" / "ansible-operator"), "version"],
        capture_output=True,
        text=True,
        check=True,
    )
    return (directory / "bin" / "venv" / "pip-args").read_text().strip(), ran.stdout.strip()


def test_without_a_checkout_it_installs_the_wheel_init_came_from(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    wheel = "/wheels/ansible_operator-0.1.0-py3-none-any.whl"
    directory = project(tmp_path / "p", "", wheel)
    assert f"ANSIBLE_OPERATOR_PIP ?= {wheel}\n" in (directory / "Makefile").read_text()
    assert install_into_bin(directory) == (f"install --quiet {wheel}", "installed version")


def test_a_checkout_wins_and_is_installed_editable(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("")
    (tmp_path / "p").mkdir()
    directory = project(tmp_path / "p", "", "ansible-operator==0.1.0")
    args, _ = install_into_bin(directory, f"ANSIBLE_OPERATOR_SOURCE={checkout}")
    assert args == f"install --quiet --editable {checkout}"


def test_the_index_version_with_pipx_s_index(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    pip = "--index-url=https://pypi.example.com/simple ansible-operator==0.1.0"
    directory = project(tmp_path / "p", "", pip)
    assert install_into_bin(directory)[0] == f"install --quiet {pip}"


def test_with_nothing_to_install_from_it_says_how(tmp_path: Path) -> None:
    directory = project(tmp_path, "", "")
    done = make(directory, "install", path="/usr/bin:/bin")
    assert done.returncode != 0
    assert (
        "ansible-operator is not on PATH, and neither ANSIBLE_OPERATOR_SOURCE (a checkout) nor "
        "ANSIBLE_OPERATOR_PIP (pip's arguments) says where to install it from. Put it on PATH "
        "(pipx install ansible_operator-VERSION-py3-none-any.whl), or install it into bin/ "
        "with: make ansible-operator ANSIBLE_OPERATOR_PIP=/path/to/the.whl"
    ) in done.stderr
    assert not (directory / "bin").exists()
