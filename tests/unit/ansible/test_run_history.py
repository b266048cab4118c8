"""runner.ansible.history and the `history` / `logs` commands, on hand-written artifacts."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.artifacts import RunInfo, link_latest, list_runs
from runner.ansible.history import (
    CRDir,
    Target,
    changed_tasks,
    cr_dirs,
    interpret,
    matches,
    parse_target,
    summarize_events,
    summarize_run,
)
from runner.ansible.jobevents import FailedTask
from runner.ansible.rundir import process_dirs
from runner.cli.historycmd import find_cr, format_duration
from runner.cli.main import main

TOKEN = "planted-secret-token-93ad"
T0 = 1_800_000_000.0


# -- event and artifact builders --------------------------------------------------------


def task_event(
    kind: str, task: str, *, changed: bool = False, msg: str | None = None, **data: Any
) -> dict[str, Any]:
    res: dict[str, Any] = {"changed": changed}
    if msg is not None:
        res["msg"] = msg
    return {
        "event": kind,
        "event_data": {"host": "localhost", "task": task, "res": res, **data},
    }


def stats(ok: int, changed: int, failures: int = 0, rescued: int = 0) -> dict[str, Any]:
    return {
        "event": "playbook_on_stats",
        "created": "2027-01-15T08:00:05.000000+00:00",
        "event_data": {
            "ok": {"localhost": ok},
            "changed": {"localhost": changed},
            "failures": {"localhost": failures} if failures else {},
            "rescued": {"localhost": rescued} if rescued else {},
            "skipped": {},
            "dark": {},
        },
    }


SUCCESS = [
    task_event("runner_on_ok", "read config"),
    task_event("runner_on_ok", "create deployment", changed=True),
    task_event("runner_on_ok", "create service", changed=True),
    task_event("runner_on_ok", "create deployment", changed=True),
    stats(ok=4, changed=3),
]
FAILURE = [
    task_event("runner_on_ok", "create deployment", changed=True),
    task_event("runner_on_failed", "optional", msg="ignored", ignore_errors=True),
    task_event("runner_on_failed", "call the API", msg=f"401: Authorization: Bearer {TOKEN}"),
    stats(ok=1, changed=1, failures=1),
]


def write_run(
    data_dir: Path,
    ident: str,
    events: list[dict[str, Any]],
    *,
    started: float,
    seconds: float = 3.0,
    status: str | None = "successful",
    rc: int = 0,
    stdout: str = "",
) -> Path:
    run = data_dir / "artifacts" / ident
    (run / "job_events").mkdir(parents=True)
    (run / "command").write_text("{}")
    for counter, event in enumerate(events, start=1):
        body = {"counter": counter, "uuid": f"u{counter}", **event}
        (run / "job_events" / f"{counter}-u{counter}.json").write_text(json.dumps(body))
    (run / "stdout").write_text(stdout)
    os.utime(run / "command", (started, started))
    if status is not None:
        (run / "status").write_text(status)
        (run / "rc").write_text(str(rc))
        os.utime(run / "status", (started + seconds, started + seconds))
    return run


def make_data_dir(base: Path, relative: str) -> Path:
    path = base / relative
    (path / "artifacts").mkdir(parents=True)
    (path / "env").mkdir()
    (path / "env/extravars").write_text("{}")
    return path


@pytest.fixture(params=["process-directory", "flat"])
def base(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """Runs in an operator process's own directory (`<base>/operator-*/`), or directly in
    the base (an older version's layout, or --runner-dir naming a process's directory)."""
    base = tmp_path / "runner"
    own = base / "operator-x1y2" if request.param == "process-directory" else base
    data_dir = make_data_dir(own, "cache.example.com/v1alpha1/Memcached/default/web")
    write_run(data_dir, "111", SUCCESS, started=T0, stdout="PLAY [first]\n")
    write_run(
        data_dir, "222", FAILURE, started=T0 + 60, seconds=75, status="failed", rc=2,
        stdout=f"TASK [call the API]\nfatal: Authorization: Bearer {TOKEN}\n",
    )  # fmt: skip
    link_latest(data_dir, "222")
    return base


def runs_root(base: Path) -> Path:
    """Where the `base` fixture's runs are: its process directory, or itself."""
    return next(iter(process_dirs(base)), base)


# -- pure parts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        pytest.param("Memcached/web", None, Target(kind="Memcached", group=None, name="web")),
        pytest.param("memcached", "web", Target(kind="memcached", group=None, name="web")),
        pytest.param(
            "memcached.cache.example.com/web",
            None,
            Target(kind="memcached", group="cache.example.com", name="web"),
        ),
    ],
)
def test_parse_target(text: str, name: str | None, expected: Target) -> None:
    assert parse_target(text, name) == expected


@pytest.mark.parametrize(
    ("text", "name"),
    [
        pytest.param("memcached", None, id="no-name"),
        pytest.param("memcached/", None, id="empty-name"),
        pytest.param("/web", None, id="empty-kind"),
        pytest.param("memcached/web", "web", id="name-twice"),
        pytest.param("memcached/a/b", None, id="too-many-slashes"),
    ],
)
def test_parse_target_errors(text: str, name: str | None) -> None:
    with pytest.raises(ValueError, match=r"KIND/NAME|drop"):
        parse_target(text, name)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        pytest.param(
            ("g.io", "v1", "Kind", "ns", "n"), [("g.io", "v1", "Kind", "ns", "n")], id="full"
        ),
        pytest.param(("v1", "Secret", "n"), [("", "v1", "Secret", "", "n")], id="core-cluster"),
        pytest.param(
            ("v1", "Secret", "ns", "n"), [("", "v1", "Secret", "ns", "n")], id="core-namespaced"
        ),
        pytest.param(
            ("g.io", "v1", "Pool", "n"), [("g.io", "v1", "Pool", "", "n")], id="group-cluster"
        ),
        pytest.param(
            ("a", "b", "c", "d"),
            [("a", "b", "c", "", "d"), ("", "a", "b", "c", "d")],
            id="ambiguous-both",
        ),
        pytest.param(("a", "b"), [], id="too-short"),
    ],
)
def test_interpret(parts: tuple[str, ...], expected: list[tuple[str, ...]]) -> None:
    assert interpret(parts) == expected


CR = CRDir(
    path=Path("/x"),
    group="cache.example.com",
    version="v1alpha1",
    kind="Memcached",
    namespace="default",
    name="web",
)


@pytest.mark.parametrize(
    ("target", "namespace", "expected"),
    [
        pytest.param("Memcached/web", None, True, id="kind"),
        pytest.param("memcached/web", "default", True, id="lower-and-namespace"),
        pytest.param("memcacheds/web", None, True, id="plural"),
        pytest.param("memcached.cache.example.com/web", None, True, id="group"),
        pytest.param("memcached.v1alpha1.cache.example.com/web", None, True, id="version-group"),
        pytest.param("memcached.other.io/web", None, False, id="other-group"),
        pytest.param("memcached/web", "prod", False, id="other-namespace"),
        pytest.param("memcached/api", None, False, id="other-name"),
        pytest.param("mem/web", None, False, id="prefix-is-not-enough"),
    ],
)
def test_matches(target: str, namespace: str | None, expected: bool) -> None:
    assert matches(CR, parse_target(target), namespace=namespace) is expected


def test_changed_tasks_in_order_once() -> None:
    assert changed_tasks(SUCCESS) == ("create deployment", "create service")


def run_info(status: str | None, rc: int | None = 0) -> RunInfo:
    return RunInfo(
        ident="7", path=Path("/x/7"), started=datetime(2027, 1, 15, 8, tzinfo=UTC),
        status=status, rc=rc,
    )  # fmt: skip


def test_summarize_success() -> None:
    ended = datetime(2027, 1, 15, 8, 0, 5, tzinfo=UTC)
    summary = summarize_events(run_info("successful"), SUCCESS, ended=ended)
    assert summary.outcome == "successful"
    assert (summary.ok, summary.changed, summary.failures) == (4, 3, 0)
    assert summary.changed_tasks == ("create deployment", "create service")
    assert summary.duration == 5.0


def test_summarize_failure_keeps_reconciler_rules() -> None:
    summary = summarize_events(run_info("failed", 2), FAILURE, ended=None)
    assert summary.outcome == "failed"
    assert summary.failed_tasks == (
        FailedTask(task="call the API", msg=f"401: Authorization: Bearer {TOKEN}"),
    )
    assert summary.duration == 5.0  # from the stats event


@pytest.mark.parametrize(
    ("status", "stdout", "error"),
    [
        pytest.param(
            "failed", "[ERROR]: the role 'x' was not found\n", "the role 'x' was not found"
        ),
        pytest.param("canceled", "", "the run was stopped"),
        pytest.param("failed", "", "ansible-playbook exited with code 4"),
    ],
)
def test_summarize_without_stats_is_an_error(status: str, stdout: str, error: str) -> None:
    summary = summarize_events(run_info(status, 4), [], ended=None, stdout=stdout)
    assert summary.outcome == "error"
    assert summary.error == error


def test_summarize_unfinished() -> None:
    summary = summarize_events(run_info(None, None), SUCCESS[:2], ended=None)
    assert summary.outcome == "unfinished"
    assert summary.duration is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.42, "0.4s"), (59.94, "59.9s"), (75, "1m15s"), (3725, "1h02m")],
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


# -- reading directories --------------------------------------------------------------


def test_cr_dirs_and_summarize_run(base: Path) -> None:
    (found,) = cr_dirs(base)
    assert (found.group, found.version, found.kind, found.namespace, found.name) == (
        "cache.example.com", "v1alpha1", "Memcached", "default", "web",
    )  # fmt: skip
    newest = summarize_run(list_runs(found.path)[0])
    assert newest.ident == "222"
    assert newest.outcome == "failed"
    assert newest.duration == 75


# -- the commands ---------------------------------------------------------------------


def test_history_spans_the_directories_of_several_operator_processes(tmp_path: Path) -> None:
    base = tmp_path / "runner"
    relative = "cache.example.com/v1alpha1/Memcached/default/web"
    write_run(make_data_dir(base / "operator-old", relative), "111", SUCCESS, started=T0)
    write_run(make_data_dir(base / "operator-new", relative), "222", SUCCESS, started=T0 + 60)
    cr, runs = find_cr(base, Target(kind="memcached", group=None, name="web"))
    assert cr.name == "web"
    assert [run.ident for run in runs] == ["222", "111"]


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_history_command(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "history", "--runner-dir", str(base), "memcached/web")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Memcached default/web (Memcached.cache.example.com/v1alpha1)"
    header = ["STARTED", "(UTC)", "DURATION", "RESULT", "OK", "CHANGED", "FAILED", "RUN"]
    assert lines[1].split() == header
    assert lines[2].split() == ["2027-01-15", "08:01:00", "1m15s", "failed", "1", "1", "1", "222"]
    assert lines[3] == "    changed: create deployment"
    assert lines[4] == "    failed: call the API: 401: Authorization: Bearer <redacted>"
    oldest = ["2027-01-15", "08:00:00", "3.0s", "successful", "4", "3", "0", "111"]
    assert lines[5].split() == oldest
    assert lines[6] == "    changed: create deployment, create service"
    assert TOKEN not in out


def test_history_limit_namespace_and_env_default(
    base: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANSIBLE_OPERATOR_RUNNER_DIR", str(base))
    code, out, _ = run_cli(
        capsys, "history", "-n", "default", "--limit", "1", "Memcached.cache.example.com", "web"
    )
    assert code == 0
    assert "222" in out and "111" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["memcached/nothere"],
            "no runs of memcached nothere under {base}; is --runner-dir right? "
            "Objects of that kind with runs: default/web",
            id="unknown-name",
        ),
        pytest.param(
            ["widget/web"],
            "no runs of widget web under {base}; is --runner-dir right? "
            "Kinds with runs there: Memcached.cache.example.com",
            id="unknown-kind",
        ),
        pytest.param(
            ["-n", "prod", "memcached/web"],
            "no runs of memcached prod/web under {base}",
            id="other-namespace",
        ),
        pytest.param(["memcached"], "expected KIND/NAME", id="bad-target"),
    ],
)
def test_history_not_found(
    base: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run_cli(capsys, "history", "--runner-dir", str(base), *argv)
    assert code == 1
    assert out == ""
    assert message.format(base=base) in err


def test_history_missing_runner_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "history", "--runner-dir", str(tmp_path / "no"), "x/y")
    assert code == 1
    assert f"--runner-dir {tmp_path / 'no'} does not exist;" in err


def test_history_ambiguous_namespace_and_kind(
    base: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = make_data_dir(runs_root(base), "cache.example.com/v1alpha1/Memcached/prod/web")
    write_run(other, "333", SUCCESS, started=T0)
    code, _, err = run_cli(capsys, "history", "--runner-dir", str(base), "memcached/web")
    assert code == 1
    assert "memcached web exists in several namespaces (default, prod): pick --namespace" in err

    elsewhere = make_data_dir(runs_root(base), "other.io/v1/Memcached/default/web")
    write_run(elsewhere, "444", SUCCESS, started=T0)
    code, _, err = run_cli(
        capsys, "history", "--runner-dir", str(base), "-n", "default", "memcached/web"
    )
    assert code == 1
    assert "several kinds (Memcached.cache.example.com, Memcached.other.io)" in err
    code, out, _ = run_cli(
        capsys, "history", "--runner-dir", str(base), "-n", "default", "memcached.other.io/web"
    )
    assert code == 0 and "444" in out


def test_history_merges_api_versions(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    newer = make_data_dir(runs_root(base), "cache.example.com/v1beta1/Memcached/default/web")
    write_run(newer, "999", SUCCESS, started=T0 + 3600)
    code, out, _ = run_cli(capsys, "history", "--runner-dir", str(base), "memcached/web")
    assert code == 0
    idents = [line.split()[-1] for line in out.splitlines()[2:] if not line.startswith(" ")]
    assert idents == ["999", "222", "111"]


def test_history_of_a_cr_without_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "runner"
    data_dir = make_data_dir(base, "v1/Secret/ns/s")
    code, _, err = run_cli(capsys, "history", "--runner-dir", str(base), "secret/s")
    assert code == 1
    assert f"no runs of Secret ns/s in {data_dir}" in err


def test_logs_newest_run_masked(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "logs", "--runner-dir", str(base), "memcached/web")
    assert code == 0
    assert out == "TASK [call the API]\nfatal: Authorization: Bearer <redacted>\n"


def test_logs_given_run_and_raw(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(
        capsys, "logs", "--runner-dir", str(base), "memcached/web", "--run", "111"
    )
    assert (code, out) == (0, "PLAY [first]\n")
    code, out, _ = run_cli(capsys, "logs", "--runner-dir", str(base), "memcached/web", "--raw")
    assert TOKEN in out


def test_logs_unknown_run(base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "logs", "--runner-dir", str(base), "memcached/web", "--run", "5")
    assert code == 1
    assert "no run 5 of Memcached default/web; its runs: 222, 111" in err


def test_logs_of_a_run_without_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "runner"
    data_dir = make_data_dir(base, "v1/Secret/ns/s")
    write_run(data_dir, "1", [], started=T0, status=None)
    code, out, err = run_cli(capsys, "logs", "--runner-dir", str(base), "secret/s")
    assert (code, out) == (0, "")
    assert "run 1 of Secret ns/s is still running" in err
