"""Lint the Dockerfiles without a container engine: the runtime image (top-level
Dockerfile), the one `init` scaffolds and the memcached sample's (sample.Dockerfile).

dockerfile-parse reads them (instructions, continuation lines, comments, the ENV and ARG
in effect at each instruction, Docker's quoting and variable rules); the rules here are
hadolint-style ones that matter for an operator image: pinned base images, a non-root
numeric USER, exec-form ENTRYPOINT, absolute WORKDIR, no ADD of URLs, `pip install
--no-cache-dir`, files for the non-root user copied with `--chown`.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser
from dockerfile_parse.util import WordSplitter

from runner import __version__
from runner.devtools.scaffold.files.toplevel import RUNTIME_IMAGE, RUNTIME_UID, dockerfile

REPO = Path(__file__).resolve().parents[2]
_FLAGGED = ("COPY", "ADD", "FROM", "RUN")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    """The arguments after any `--flags`, continuation lines joined (runs of blanks as one)."""
    line: int
    env: dict[str, str]
    """The environment in effect at this instruction (inherited + this stage's ENV)."""
    flags: dict[str, str] = field(default_factory=dict)
    base: str = ""
    """FROM only: the image with build arguments expanded."""

    @property
    def exec_form(self) -> list[str] | None:
        if not self.args.startswith("["):
            return None
        value = json.loads(self.args)
        assert isinstance(value, list)
        return [str(item) for item in value]

    @property
    def words(self) -> list[str]:
        """The arguments split as Docker splits them, variables of `env` expanded."""
        return list(WordSplitter(self.args, args=self.env).split())


def parse(text: str, inherited: dict[str, str] | None = None) -> list[Instruction]:
    """The instructions of `text` (comments dropped), each with the environment it sees;
    `inherited` is the environment of the base image."""
    parser = DockerfileParser(fileobj=io.BytesIO(), parent_env=dict(inherited or {}))
    parser.content = text
    bases = iter(parser.parent_images)
    instructions: list[Instruction] = []
    for entry, context in zip(parser.structure, parser.context_structure, strict=True):
        keyword = str(entry["instruction"]).upper()
        if keyword == "COMMENT":
            continue
        rest = " ".join(str(entry["value"]).split())
        flags: dict[str, str] = {}
        while keyword in _FLAGGED and rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            name, _, value = flag[2:].partition("=")
            flags[name] = value
        base = next(bases) if keyword == "FROM" else ""
        line = int(entry["startline"]) + 1
        instructions.append(Instruction(keyword, rest, line, dict(context.envs), flags, base))
    return instructions


def expand(text: str, env: dict[str, str]) -> str:
    return str(WordSplitter(text, args=env).dequote())


def lint(text: str, *, inherited: dict[str, str] | None = None) -> list[str]:
    """Problems as `<rule>: line N: what`, empty when the Dockerfile is fine."""
    inherited_env = dict(inherited or {})
    user = inherited_env.pop("__user__", "")
    instructions = parse(text, inherited_env)
    problems: list[str] = []
    shell_pipefail = False
    for ins in instructions:
        where = f"line {ins.line}"
        env = ins.env
        if ins.keyword == "FROM":
            image = ins.base
            last = image.split("/")[-1]
            tag = last.partition(":")[2] if "@" not in last else "digest"
            if not tag:
                problems.append(f"DL3006: {where}: base image {image} has no tag")
            elif tag == "latest":
                problems.append(f"DL3007: {where}: base image {image} uses latest")
        elif ins.keyword == "USER":
            user = expand(ins.args, env)
        elif ins.keyword == "WORKDIR":
            if not expand(ins.args, env).startswith("/"):
                problems.append(f"DL3000: {where}: WORKDIR {ins.args} is not absolute")
        elif ins.keyword == "ADD":
            if re.search(r"\bhttps?://", ins.args):
                problems.append(f"DL3020: {where}: ADD of a URL; download in RUN and verify it")
            else:
                problems.append(f"DL3020: {where}: use COPY for files, not ADD")
        elif ins.keyword == "COPY":
            destination = ins.words[-1]
            home = env.get("HOME", "")
            if home and destination.startswith(home) and "chown" not in ins.flags:
                problems.append(f"chown: {where}: COPY into {home} without --chown")
        elif ins.keyword == "SHELL":
            shell_pipefail = "pipefail" in ins.args
        elif ins.keyword == "RUN":
            problems += _run_problems(ins, where, shell_pipefail=shell_pipefail)
        elif ins.keyword in ("ENTRYPOINT", "CMD"):
            if ins.exec_form is None:
                problems.append(f"DL3025: {where}: {ins.keyword} in shell form; use JSON")
            problems += _user_problems(user, where)
        elif ins.keyword == "MAINTAINER":
            problems.append(f"DL4000: {where}: MAINTAINER is deprecated; use a LABEL")
    if not any(ins.keyword in ("ENTRYPOINT", "CMD") for ins in instructions):
        problems += _user_problems(user, "end")
    return problems


def _user_problems(user: str, where: str) -> list[str]:
    name = user.partition(":")[0]
    if not name:
        return [f"DL3002: {where}: runs as root (no USER)"]
    if not name.isdigit():
        return [f"user: {where}: USER {user} is not numeric (runAsNonRoot cannot check it)"]
    if int(name) == 0:
        return [f"DL3002: {where}: USER is root"]
    return []


def _run_problems(ins: Instruction, where: str, *, shell_pipefail: bool) -> list[str]:
    problems = []
    for command in re.split(r"&&|\|\||;", ins.args):
        words = command.split()
        if words[:1] == ["cd"]:
            problems.append(f"DL3003: {where}: use WORKDIR instead of cd")
        if words[:1] == ["sudo"]:
            problems.append(f"DL3004: {where}: do not use sudo")
        if "pip" in words[:3] and "install" in words and "--no-cache-dir" not in words:
            problems.append(f"DL3042: {where}: pip install without --no-cache-dir")
        if (
            words[:1] == ["apt-get"]
            and "install" in words
            and "--no-install-recommends" not in words
        ):
            problems.append(f"DL3015: {where}: apt-get install without --no-install-recommends")
    if re.search(r"(?<!\|)\|(?!\|)", ins.args) and not shell_pipefail:
        problems.append(f"DL4006: {where}: a pipe in RUN needs SHELL with -o pipefail")
    return problems


RUNTIME = (REPO / "Dockerfile").read_text()
SCAFFOLDED = dockerfile("web-operator")
SAMPLE = (REPO / "sample.Dockerfile").read_text()
# What an image built FROM the runtime inherits from it.
BASE_ENV = parse(RUNTIME)[-1].env
BASE = {**BASE_ENV, "__user__": str(RUNTIME_UID)}


@pytest.mark.parametrize(
    ("text", "inherited"),
    [
        pytest.param(RUNTIME, {}, id="runtime"),
        pytest.param(SCAFFOLDED, BASE, id="scaffolded"),
        pytest.param(SAMPLE, BASE, id="sample"),
    ],
)
def test_dockerfile_passes_the_rules(text: str, inherited: dict[str, str]) -> None:
    assert lint(text, inherited=inherited) == []


def test_runtime_image() -> None:
    everything = parse(RUNTIME)
    froms = [ins.args for ins in everything if ins.keyword == "FROM"]
    assert froms == ["${BASE_IMAGE} AS collections", "${BASE_IMAGE}"]
    parser = DockerfileParser(fileobj=io.BytesIO())
    parser.content = RUNTIME
    args = parser.args  # the defaults given before the first FROM
    for ins in everything:
        if ins.keyword == "FROM":
            assert re.fullmatch(r"docker\.io/library/python:3\.11\.\d+-slim-bookworm", ins.base)
    assert args["ANSIBLE_CORE"] in ("2.18", "2.19")
    # the final stage: everything after its FROM
    last_from = max(i for i, ins in enumerate(everything) if ins.keyword == "FROM")
    instructions = everything[last_from:]
    env = instructions[-1].env
    assert env["HOME"] == "/opt/ansible"
    assert env["ANSIBLE_ROLES_PATH"] == "/opt/ansible/roles"
    # every path Ansible and the runner write to at run time is under /tmp (an emptyDir)
    for key in ("ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TEMP", "ANSIBLE_OPERATOR_RUNNER_DIR"):
        assert env[key].startswith("/tmp/"), key
    workdirs = [ins.args for ins in instructions if ins.keyword == "WORKDIR"]
    assert workdirs == [env["HOME"]]
    users = [ins.args for ins in instructions if ins.keyword == "USER"]
    assert users == [str(RUNTIME_UID)]
    keywords = [ins.keyword for ins in instructions]
    assert keywords.index("USER") < keywords.index("ENTRYPOINT")
    (entrypoint,) = [ins for ins in instructions if ins.keyword == "ENTRYPOINT"]
    assert entrypoint.exec_form == [
        "/usr/bin/tini",
        "--",
        "ansible-operator",
        "run",
        "--watches-file=./watches.yaml",
    ]
    runs = " ".join(ins.args for ins in instructions if ins.keyword == "RUN")
    assert "pip install --no-cache-dir" in runs
    assert f"chown -R {RUNTIME_UID}:0 /opt/ansible" in runs
    # tini's upstream version is pinned, never a Debian revision (they disappear)
    assert "tini=" not in runs
    assert "Upstream-Version}' tini)\" = 0.19.0" in runs
    # pip gets the host's access through build secrets, for its step only
    for ins in everything:
        if ins.keyword == "RUN" and "pip install" in ins.args:
            assert ins.flags.get("mount", "").startswith("type=secret"), ins.line
            assert ". /tmp/image/pip-env.sh" in ins.args, ins.line
    labels = " ".join(ins.args for ins in instructions if ins.keyword == "LABEL")
    assert f'org.opencontainers.image.version="{__version__}"' in labels


@pytest.mark.parametrize(
    "text", [pytest.param(SCAFFOLDED, id="scaffolded"), pytest.param(SAMPLE, id="sample")]
)
def test_operator_image(text: str) -> None:
    instructions = parse(text, BASE_ENV)
    assert instructions[0].keyword == "FROM"
    assert instructions[0].args == f"{RUNTIME_IMAGE}:{__version__}"
    copies = [
        (ins.words[0], ins.words[-1], ins.flags.get("chown"))
        for ins in instructions
        if ins.keyword == "COPY"
    ]
    owner = f"{RUNTIME_UID}:0"
    assert copies == [
        ("requirements.yml", "/opt/ansible/requirements.yml", owner),
        ("watches.yaml", "/opt/ansible/watches.yaml", owner),
        ("roles/", "/opt/ansible/roles/", owner),
        ("playbooks/", "/opt/ansible/playbooks/", owner),
    ]
    runs = [ins.args for ins in instructions if ins.keyword == "RUN"]
    assert any("ansible-galaxy collection install -r ${HOME}/requirements.yml" in r for r in runs)
    assert not [ins for ins in instructions if ins.keyword in ("USER", "ENTRYPOINT", "CMD")]


def test_sample_dockerfile_is_the_scaffolded_one() -> None:
    assert dockerfile("memcached-operator") == SAMPLE


def test_sample_has_what_its_dockerfile_copies() -> None:
    for source in ("requirements.yml", "watches.yaml", "roles", "playbooks"):
        assert (REPO / source).exists(), source


def test_dockerignore_keeps_what_the_images_copy() -> None:
    ignored = {
        line.strip().rstrip("/")
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    needed = {"pyproject.toml", "README.md", "runner", "requirements.yml", "watches.yaml"}
    needed |= {"roles", "playbooks"}
    assert not needed & ignored
    assert {".venv", ".cluster", "tests", ".git"} <= ignored


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        pytest.param("FROM python\nUSER 1001\n", "DL3006", id="untagged"),
        pytest.param("FROM python:latest\nUSER 1001\n", "DL3007", id="latest"),
        pytest.param("FROM registry:5000/python\nUSER 1001\n", "DL3006", id="port-not-tag"),
        pytest.param("FROM python:3.11.14-slim\n", "DL3002", id="no-user"),
        pytest.param("FROM python:3.11.14-slim\nUSER 0\n", "DL3002", id="root"),
        pytest.param("FROM python:3.11.14-slim\nUSER ansible\n", "user:", id="named-user"),
        pytest.param(
            'FROM python:3.11.14-slim\nENTRYPOINT ["x"]\nUSER 1001\n', "DL3002", id="user-late"
        ),
        pytest.param(
            "FROM python:3.11.14-slim\nUSER 1001\nENTRYPOINT ansible-operator run\n",
            "DL3025",
            id="shell-form",
        ),
        pytest.param(
            "FROM python:3.11.14-slim\nWORKDIR opt\nUSER 1001\n", "DL3000", id="relative-workdir"
        ),
        pytest.param(
            "FROM python:3.11.14-slim\nADD https://example.com/x.tgz /x\nUSER 1001\n",
            "DL3020",
            id="add-url",
        ),
        pytest.param(
            "FROM python:3.11.14-slim\nRUN pip install \\\n  ansible\nUSER 1001\n",
            "DL3042",
            id="pip-cache",
        ),
        pytest.param("FROM python:3.11.14-slim\nRUN cd /x && make\nUSER 1001\n", "DL3003", id="cd"),
        pytest.param(
            "FROM python:3.11.14-slim\nRUN curl x | sh\nUSER 1001\n", "DL4006", id="pipefail"
        ),
        pytest.param(
            "FROM python:3.11.14-slim\nENV HOME=/opt/a\nCOPY roles/ ${HOME}/roles/\nUSER 1001\n",
            "chown:",
            id="copy-without-chown",
        ),
    ],
)
def test_the_rules_catch_problems(text: str, rule: str) -> None:
    assert any(problem.startswith(rule) for problem in lint(text)), lint(text)


def test_parser_joins_continuations_and_skips_comments() -> None:
    text = "FROM a:1\nRUN one \\\n# a comment inside\n    && two\nCOPY --chown=1:0 --link x /y\n"
    run, copy = parse(text)[1:]
    assert (run.keyword, run.args, run.line) == ("RUN", "one && two", 2)
    assert run.env == {}
    assert copy.flags == {"chown": "1:0", "link": ""}
    assert copy.words == ["x", "/y"]
