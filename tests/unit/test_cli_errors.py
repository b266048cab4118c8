"""Every sub-command, given bad arguments or bad files, says what is wrong in one line and
exits non-zero, without a Python traceback.

Each case runs the installed `ansible-operator` in a fresh directory with no cluster: HOME
has no ~/.kube/config, KUBECONFIG is unset unless the case sets it, and this is no pod.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.cli.main import main

OPERATOR = str(Path(sys.executable).with_name("ansible-operator"))

FILES = {
    "empty.yaml": "",
    "list.yaml": "- a\n- b\n",
    "scalar.yaml": "just text\n",
    "invalid.yaml": "clusters: [\n",
    "no-context.yaml": "apiVersion: v1\nkind: Config\ncontexts:\n- name: dev\n  context: {}\n",
    "watches.yaml": "- version: v1\n  group: web.example.com\n  kind: Site\n  playbook: site.yml\n",
    "site.yml": "- hosts: localhost\n  tasks: []\n",
    "bad-watches.yaml": "- version: v1\n  kind: Site\n  playbook: site.yml\n"
    "  reconcilePeriod: 30\n",
    "cr.yaml": "apiVersion: web.example.com/v1\nkind: Site\nmetadata:\n  name: a\n",
    "other-cr.yaml": "apiVersion: other.example.com/v1\nkind: Thing\nmetadata:\n  name: a\n",
}

NO_CLUSTER = "no Kubernetes cluster found: KUBECONFIG is not set"
CURE = "start a local cluster with `ansible-operator cluster up`"

CASES = [
    # (argv, extra environment, text the one error line contains)
    pytest.param([], {}, "the following arguments are required: COMMAND", id="no-command"),
    pytest.param(["frobnicate"], {}, "invalid choice: 'frobnicate'", id="unknown-command"),
    pytest.param(["version", "extra"], {}, "unrecognized arguments: extra", id="version-extra"),
    # run: flag values
    pytest.param(
        ["run", "--zap-log-level", "loud"],
        {},
        "argument --zap-log-level: invalid level 'loud'; use debug, info, error or an "
        "integer above 0",
        id="run-log-level",
    ),
    pytest.param(["run", "--zap-log-level", "0"], {}, "invalid level '0'", id="run-log-level-zero"),
    pytest.param(
        ["run", "--max-concurrent-reconciles", "-1"],
        {},
        "argument --max-concurrent-reconciles: must be at least 1, got -1",
        id="run-max-concurrent-negative",
    ),
    pytest.param(
        ["run", "--max-concurrent-reconciles", "0"],
        {},
        "argument --max-concurrent-reconciles: must be at least 1, got 0",
        id="run-max-concurrent-zero",
    ),
    pytest.param(
        ["run", "--max-concurrent-reconciles", "many"],
        {},
        "argument --max-concurrent-reconciles: expected an integer, got 'many'",
        id="run-max-concurrent-text",
    ),
    pytest.param(
        ["run", "--max-workers", "-2"],
        {},
        "argument --max-workers: must be at least 0, got -2; 0 means no global limit",
        id="run-max-workers",
    ),
    pytest.param(
        ["run", "--memory-limit-fraction", "1.5"],
        {},
        "argument --memory-limit-fraction: must be from 0 to 1, got 1.5",
        id="run-memory-fraction",
    ),
    pytest.param(
        ["run", "--proxy-port", "70000"],
        {},
        "argument --proxy-port: must be from 0 to 65535, got 70000; 0 picks a free port",
        id="run-proxy-port",
    ),
    pytest.param(
        ["run", "--ansible-verbosity", "12"],
        {},
        "argument --ansible-verbosity: must be from 0 to 7, got 12",
        id="run-verbosity",
    ),
    pytest.param(
        ["run", "--zap-time-encoding", "weird"],
        {},
        "argument --zap-time-encoding: invalid value 'weird'; choose from epoch, millis, "
        "nanos, iso8601, rfc3339, rfc3339nano",
        id="run-time-encoding",
    ),
    pytest.param(
        ["run", "--zap-stacktrace-level", "nope"],
        {},
        "argument --zap-stacktrace-level: invalid value 'nope'; choose from info, error, panic",
        id="run-stacktrace-level",
    ),
    pytest.param(
        ["run", "--zap-encoder", "xml"],
        {},
        "argument --zap-encoder: invalid value 'xml'; choose from json, console",
        id="run-encoder",
    ),
    pytest.param(
        ["run", "--reconcile-period", "30"],
        {},
        'argument --reconcile-period: missing unit in duration "30"',
        id="run-reconcile-period-bare-number",
    ),
    pytest.param(
        ["run", "--leader-elect-lease-duration", "5x"],
        {},
        "argument --leader-elect-lease-duration: unknown unit",
        id="run-lease-duration-without-leader-elect",
    ),
    pytest.param(
        ["run", "--graceful-shutdown-timeout", "soon"],
        {},
        'argument --graceful-shutdown-timeout: invalid duration "soon"',
        id="run-graceful-timeout",
    ),
    pytest.param(
        [
            "run",
            "--leader-elect",
            "--leader-election-namespace=x",
            "--leader-elect-lease-duration=5s",
        ],
        {},
        "--leader-elect-lease-duration must be longer than --leader-elect-renew-deadline "
        "(lease 5s, renew deadline 10s, retry period 2s)",
        id="run-lease-shorter-than-renew",
    ),
    pytest.param(
        [
            "run",
            "--leader-elect",
            "--leader-election-namespace=x",
            "--leader-elect-retry-period=9s",
        ],
        {},
        "--leader-elect-renew-deadline must be longer than 1.2 x --leader-elect-retry-period",
        id="run-retry-too-long",
    ),
    pytest.param(
        ["run", "--metrics-require-rbac"],
        {},
        "--metrics-require-rbac needs --metrics-secure",
        id="run-rbac-without-secure",
    ),
    pytest.param(
        ["run", "--max-artifacts-bytes", "lots"],
        {},
        "argument --max-artifacts-bytes: invalid size 'lots'",
        id="run-artifacts-size",
    ),
    pytest.param(
        ["run", "--inject-owner-ref=maybe"],
        {},
        "argument --inject-owner-ref: invalid boolean value 'maybe'",
        id="run-bool",
    ),
    # run: files
    pytest.param(
        ["run", "--watches-file", "missing.yaml"],
        {},
        "missing.yaml: watches file not found",
        id="run-watches-missing",
    ),
    pytest.param(
        ["run", "--watches-file", "invalid.yaml"],
        {},
        "invalid.yaml: invalid YAML at line 2, column 1",
        id="run-watches-invalid-yaml",
    ),
    pytest.param(
        ["run", "--watches-file", "bad-watches.yaml"],
        {},
        "bad-watches.yaml: entry 1 (/v1, Kind=Site): reconcilePeriod: expected a duration "
        'string such as "30s", got the number 30 (a bare number has no unit) (line 4)',
        id="run-watches-bad-entry",
    ),
    pytest.param(["run"], {}, NO_CLUSTER, id="run-no-cluster"),
    pytest.param(
        ["run"],
        {"KUBECONFIG": "empty.yaml"},
        f"KUBECONFIG=empty.yaml: the file is empty; point KUBECONFIG at a working "
        f"kubeconfig, or {CURE}",
        id="run-kubeconfig-empty",
    ),
    pytest.param(
        ["run"],
        {"KUBECONFIG": "list.yaml"},
        "KUBECONFIG=list.yaml: not a kubeconfig (expected a mapping with clusters, users, "
        'contexts and current-context, got list ["a", "b"])',
        id="run-kubeconfig-list",
    ),
    pytest.param(
        ["run"],
        {"KUBECONFIG": "scalar.yaml"},
        "KUBECONFIG=scalar.yaml: not a kubeconfig",
        id="run-kubeconfig-scalar",
    ),
    pytest.param(
        ["run"],
        {"KUBECONFIG": "invalid.yaml"},
        "KUBECONFIG=invalid.yaml: not valid YAML at line 2, column 1",
        id="run-kubeconfig-invalid-yaml",
    ),
    pytest.param(
        ["run"],
        {"KUBECONFIG": "/nonexistent/kubeconfig"},
        f"KUBECONFIG=/nonexistent/kubeconfig: no such file; point KUBECONFIG at a working "
        f"kubeconfig, or {CURE}",
        id="run-kubeconfig-missing",
    ),
    pytest.param(
        ["run"],
        {"KUBECONFIG": "/"},
        "KUBECONFIG=/: is a directory, not a kubeconfig file",
        id="run-kubeconfig-directory",
    ),
    pytest.param(
        ["run"],
        {"KUBECONFIG": "no-context.yaml"},
        "KUBECONFIG=no-context.yaml: sets no current-context "
        "(`kubectl config use-context NAME`); its contexts: dev",
        id="run-kubeconfig-no-context",
    ),
    # cluster
    pytest.param(["cluster"], {}, "the following arguments are required: ACTION", id="cluster"),
    pytest.param(["cluster", "bogus"], {}, "invalid choice: 'bogus'", id="cluster-bogus"),
    pytest.param(
        ["cluster", "up", "--apiserver-port", "x"],
        {},
        "argument --apiserver-port: invalid int value: 'x'",
        id="cluster-up-port",
    ),
    pytest.param(
        ["cluster", "--state-dir", "/etc/passwd", "kubeconfig"],
        {},
        "no cluster in /etc/passwd; start one with `ansible-operator cluster up`",
        id="cluster-kubeconfig-no-cluster",
    ),
    # scaffolding and packaging
    pytest.param(
        ["init", "--plugins", "go/v4"],
        {},
        "--plugins 'go/v4': unknown plugin 'go/v4'; known: ansible, "
        "ansible.sdk.operatorframework.io/v1, grafana.kubebuilder.io/v1-alpha",
        id="init-unknown-plugin",
    ),
    pytest.param(
        ["init", "--domain", "bad domain"],
        {},
        "--domain 'bad domain': the domain must be a DNS-1123 subdomain",
        id="init-bad-domain",
    ),
    pytest.param(
        ["create", "api", "--kind", "Site"],
        {},
        "the following arguments are required: --group, --version",
        id="create-api-missing",
    ),
    pytest.param(["create"], {}, "the following arguments are required: WHAT", id="create"),
    pytest.param(
        ["bundle", "generate"],
        {},
        "the following arguments are required: --version",
        id="bundle-generate",
    ),
    pytest.param(
        ["bundle", "validate", "/etc/passwd"], {}, "/etc/passwd: not a directory", id="validate"
    ),
    pytest.param(
        [
            "catalog",
            "generate",
            "--bundle",
            "/nonexistent",
            "--package",
            "p",
            "--bundle-image",
            "i",
            "--channel",
            "c",
            "--output",
            "out",
        ],
        {},
        "--bundle /nonexistent does not exist; give a bundle directory",
        id="catalog-missing-bundle",
    ),
    pytest.param(
        ["olm", "run-bundle", "/nonexistent"],
        {},
        "olm run-bundle: --namespace is required",
        id="olm-run-bundle",
    ),
    # history, logs, vars
    pytest.param(["history", "noslash"], {}, "'noslash': expected KIND/NAME", id="history-target"),
    pytest.param(
        ["logs", "--runner-dir", "/etc/passwd", "site/a"],
        {},
        "--runner-dir /etc/passwd is not a directory; it is the operator's runner directory",
        id="logs-runner-dir-file",
    ),
    pytest.param(
        ["history", "--runner-dir", "/nonexistent", "site/a"],
        {},
        "--runner-dir /nonexistent does not exist",
        id="history-runner-dir-missing",
    ),
    pytest.param(
        ["history", "--limit", "x", "site/a"],
        {},
        "argument --limit: invalid int value: 'x'",
        id="history-limit",
    ),
    pytest.param(
        ["completion", "tcsh"], {}, "argument SHELL: invalid choice: 'tcsh'", id="completion"
    ),
    pytest.param(["completion"], {}, "completion: name the shell (bash, zsh or fish)", id="shell"),
    pytest.param(
        ["completion", "--install"],
        {"SHELL": "/bin/tcsh"},
        "completion --install: $SHELL is /bin/tcsh; name the shell",
        id="install-shell",
    ),
    pytest.param(["vars", "missing.yaml"], {}, "missing.yaml", id="vars-missing-cr"),
    pytest.param(["vars", "invalid.yaml"], {}, "invalid.yaml", id="vars-invalid-cr"),
    pytest.param(["vars", "other-cr.yaml"], {}, "Thing", id="vars-unwatched-kind"),
    pytest.param(
        ["vars", "--watches-file", "missing.yaml", "cr.yaml"],
        {},
        "missing.yaml: watches file not found",
        id="vars-missing-watches",
    ),
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "web-operator"  # a valid project name for `init`
    directory.mkdir()
    for name, text in FILES.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


_CLEARED = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")


def clean_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in _CLEARED and not key.startswith("ANSIBLE_OPERATOR_")
    }
    return {**env, "HOME": str(home), **extra}


@pytest.fixture
def isolated(project: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The process as a fresh shell would give it: cwd in the project, no cluster, and
    logging and environment restored afterwards (`run` configures both)."""
    monkeypatch.chdir(project)
    for key in [*_CLEARED, "ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_ROLES_PATH"] + [
        key for key in os.environ if key.startswith("ANSIBLE_OPERATOR_")
    ]:
        monkeypatch.setenv(key, "")  # recorded, so whatever a command sets is undone
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(project))
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield project
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Exit code and stderr of `ansible-operator ARGV`, run in this process; an exception
    escaping main() is what a user would see as a traceback."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:
        pytest.fail(f"traceback: {exc!r}")
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "env", "message"), CASES)
def test_bad_input_is_one_line(
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, err = run_main(argv, capsys)
    assert code != 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error" in lines[0]
    assert message in lines[0]


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        pytest.param(["run", "--zap-log-level", "loud"], {}, "invalid level 'loud'", id="flag"),
        pytest.param(["run"], {}, NO_CLUSTER, id="no-cluster"),
        pytest.param(["run"], {"KUBECONFIG": "empty.yaml"}, "the file is empty", id="empty"),
    ],
)
def test_bad_input_in_a_real_process(
    project: Path, argv: list[str], env: dict[str, str], message: str
) -> None:
    """The same, through the installed script: nothing is printed at interpreter exit."""
    done = subprocess.run(
        [OPERATOR, *argv],
        cwd=project,
        env=clean_env(project, env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["init", "--domain", "example.com"], id="init"),
        pytest.param(["version"], id="version"),
        pytest.param(["run", "--help"], id="run-help"),
    ],
)
def test_closed_pipe_is_quiet(project: Path, argv: list[str]) -> None:
    """`ansible-operator init | head -1`: the reader is gone; the command still does its
    work and exits without a BrokenPipeError."""
    workdir = project / "new"
    workdir.mkdir()
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [OPERATOR, *argv],
            cwd=workdir,
            env=clean_env(project, {}),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 0
    if argv[0] == "init":
        assert (workdir / "PROJECT").is_file()
        assert (workdir / "Makefile").is_file()


def test_run_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for shown in (
        "path to watches.yaml (default: ./watches.yaml)",
        "(default: 10h)",
        "(default: 8888)",
        "(default: :8443)",
        "(default: :6789)",
        "(default: 15s)",
        "(default: 10s)",
        "(default: 30s)",
        "(default: info)",
        "(default: epoch)",
        "(default: tasks)",
        "-v count, 0-7 (ANSIBLE_VERBOSITY_<KIND>_<GROUP> overrides it per watch) (default: 2)",
    ):
        assert shown in text


def test_broken_project_files_are_one_line(
    isolated: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`create api` and `bundle generate` in a project whose files were hand-edited
    into invalid YAML."""
    project = isolated / "site-operator"
    project.mkdir()
    monkeypatch.chdir(project)
    assert main(["init", "--domain", "example.com"]) == 0
    assert main(["create", "api", "--group", "web", "--version", "v1", "--kind", "Site"]) == 0
    capsys.readouterr()
    crd = project / "config" / "crd" / "bases" / "web.example.com_sites.yaml"
    crd.write_text("- [\n")
    code, err = run_main(["bundle", "generate", "--version", "0.0.1"], capsys)
    assert code == 1
    assert err == (
        f"error: {crd}: not valid YAML at line 2, column 1: while parsing a flow node; "
        "expected the node content, but found '<stream end>'\n"
    )
    (project / "PROJECT").write_text("domain: [\n")
    code, err = run_main(
        ["create", "api", "--group", "web", "--version", "v1", "--kind", "Shop"], capsys
    )
    assert code == 1
    assert err.startswith("error: PROJECT: invalid YAML at line 2, column 1: ")
    assert err.count("\n") == 1
