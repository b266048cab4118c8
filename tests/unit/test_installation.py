"""How the tool was installed, as `version` reports it and as a new project's Makefile
installs it again: from direct_url.json and the marks pipx and uv leave."""

from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import runner
from runner.cli import installation
from runner.cli.installation import Installation, detect, index_options
from runner.cli.versioncmd import version_lines

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(runner.__file__).resolve().parent


class FakeDist(metadata.Distribution):
    """An installed distribution with the given direct_url.json (None: no such file)."""

    def __init__(self, direct: dict[str, Any] | None, package: Path = PACKAGE) -> None:
        self.direct = direct
        self.package = package

    def read_text(self, filename: str) -> str | None:
        if filename == "direct_url.json" and self.direct is not None:
            return json.dumps(self.direct)
        return None

    def locate_file(self, path: str | Path) -> Path:
        return self.package.parent / path


def installed(monkeypatch: pytest.MonkeyPatch, dist: metadata.Distribution | None) -> None:
    def distribution(name: str) -> metadata.Distribution:
        if dist is None:
            raise metadata.PackageNotFoundError(name)
        return dist

    monkeypatch.setattr(installation.metadata, "distribution", distribution)


WHEEL = "/tmp/x/ansible_operator-0.1.0-py3-none-any.whl"


def test_this_checkout_is_an_editable_install() -> None:
    found = detect()
    assert found == Installation("editable", str(REPO), sys.prefix)
    assert found.checkout == str(REPO)
    assert found.describe() == f"editable in {sys.prefix}, from the checkout {REPO}"


@pytest.mark.parametrize(
    ("direct", "origin", "words"),
    [
        pytest.param(
            {"url": f"file://{WHEEL}", "archive_info": {}}, WHEEL, f"the wheel {WHEEL}", id="wheel"
        ),
        pytest.param(None, "", "a package index", id="index"),
        pytest.param({"url": "file:///src/ao", "dir_info": {}}, "/src/ao", "the directory /src/ao"),
        pytest.param(
            {"url": "https://example.com/ao.tar.gz", "archive_info": {}},
            "https://example.com/ao.tar.gz",
            "the archive https://example.com/ao.tar.gz",
            id="url",
        ),
        pytest.param(
            {"url": "https://example.com/ao.git", "vcs_info": {"vcs": "git", "commit_id": "a"}},
            "git+https://example.com/ao.git",
            "git+https://example.com/ao.git",
            id="vcs",
        ),
    ],
)
def test_pip_installs(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    direct: dict[str, Any] | None,
    origin: str,
    words: str,
) -> None:
    installed(monkeypatch, FakeDist(direct))
    found = detect(str(tmp_path))
    assert found == Installation("pip", origin, str(tmp_path))
    assert found.describe() == f"pip in {tmp_path}, from {words}"
    assert found.checkout == ""


def test_pipx_and_its_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    installed(monkeypatch, FakeDist(None))
    args = ["--no-compile", "-i", "https://pypi.example.com/simple", "--extra-index-url=x://u:p@h/"]
    record = {"main_package": {"package_or_url": "ansible-operator", "pip_args": args}}
    (tmp_path / "pipx_metadata.json").write_text(json.dumps(record))
    found = detect(str(tmp_path))
    assert found.tool == "pipx"
    assert found.index_args == ("--index-url=https://pypi.example.com/simple",)
    assert found.pip_install_args("1.2.3") == (
        "--index-url=https://pypi.example.com/simple ansible-operator==1.2.3"
    )


def test_uv_tool(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    installed(monkeypatch, FakeDist({"url": f"file://{WHEEL}", "archive_info": {}}))
    (tmp_path / "uv-receipt.toml").write_text("[tool]\n")
    found = detect(str(tmp_path))
    assert (found.tool, found.pip_install_args("0.1.0")) == ("uv tool", WHEEL)


def test_not_installed_is_the_source_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    installed(monkeypatch, None)
    found = detect()
    assert found == Installation("source tree", str(PACKAGE.parent))
    assert found.describe() == f"not installed: imported from the source tree {PACKAGE.parent}"
    assert found.checkout == str(PACKAGE.parent)


def test_another_copy_on_the_path_is_what_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The distribution installed elsewhere (a wheel) while this tree is imported."""
    installed(monkeypatch, FakeDist(None, tmp_path / "site-packages" / "runner"))
    assert detect().tool == "source tree"


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        pytest.param(WHEEL, WHEEL, id="wheel"),
        pytest.param("/my dir/a.whl", "'/my dir/a.whl'", id="quoted"),
        pytest.param("", "ansible-operator==0.3.0", id="index"),
    ],
)
def test_what_pip_installs_again(origin: str, expected: str) -> None:
    assert Installation("pip", origin).pip_install_args("0.3.0") == expected


def test_index_options_leave_credentials_out() -> None:
    args = ["--index-url", "https://u:secret@h/simple", "--extra-index-url", "https://h2/simple"]
    assert index_options([*args, "--pre", "--index-url=https://h3/"]) == (
        "--extra-index-url=https://h2/simple",
        "--index-url=https://h3/",
    )


def test_version_names_the_installation() -> None:
    lines = version_lines({"ANSIBLE_COLLECTIONS_PATH": "/nonexistent"})
    assert lines[0] == f"ansible-operator version: {runner.__version__}"
    assert lines[1] == f"installed: {detect().describe()}"
