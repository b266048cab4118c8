"""The differential suite: the same fixture operators on the Go ansible-operator (v1.42.0)
and on ours (both backends), everything a role could observe or do recorded, and every
difference a failure unless `allowlist.yaml` lists it with its reason (each entry is
explained in docs/differential.md).

One phase per operator, one after the other on the shared cluster (the Go operator last,
under the machine-wide Go-operator lock): a fresh namespace per fixture and one for the
recorder, one operator process serving every fixture (one project of all their
watches), the fixtures' scenarios driven at once. Fixtures are directories under
`fixtures/` (see `support/differential/fixtures.py`); the recorder role every fixture
role includes is `fixtures/_shared/roles/rec`. What is recorded and how it is normalised:
`support/differential/recorder.py`.

Both operators run Ansible from the same virtualenv: `$ANSIBLE_OPERATOR_TEST_PYTHON`'s
(make test's second pass: ansible-core 2.18, the Go image's line), else the tests' own
(2.19). While writing a fixture: `DIFF_FIXTURES=a,b` runs only those, and
`DIFF_REUSE_GO=<records-go.json of an earlier run>` (each phase leaves its records in the
test's directory) compares with the Go operator's records of that run instead of running
it again.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from support.differential import fixtures as fx
from support.differential import operators, recorder
from support.differential.compare import (
    Difference,
    Entry,
    differences,
    load_allowlist,
    unexplained,
)
from support.differential.mirror import RunMirror
from support.differential.scenario import Driver, Phase
from support.kube import release_custom_resources
from support.operator import crd, install_crd

from runner.ansible.hooks import core_line

pytestmark = [pytest.mark.timeout(3600)]

SUITE = Path(__file__).resolve().parent
ALLOWLIST = SUITE / "allowlist.yaml"
DOCS = SUITE.parents[1] / "docs" / "differential.md"
ONLY = [name for name in os.environ.get("DIFF_FIXTURES", "").split(",") if name]
REUSE_GO = os.environ.get("DIFF_REUSE_GO", "")
FIXTURES = [f for f in fx.load_all() if not ONLY or f.name in ONLY]
BACKENDS = ("runner", "fast")
AT_ONCE = 4
"""Fixtures driven at once in a phase."""


@dataclass
class Suite:
    core: str
    records: dict[str, dict[str, Any]]
    """operator -> fixture name -> its normalised record."""
    logs: dict[str, str]
    entries: list[Entry]
    left: dict[tuple[str, str], list[Difference]] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)


def _client(kubeconfig: Path) -> Any:
    from kubernetes import config
    from kubernetes.dynamic import DynamicClient

    return DynamicClient(config.new_client_from_config(config_file=str(kubeconfig)))


def _namespace_names(kind: str) -> tuple[str, dict[str, str]]:
    token = uuid.uuid4().hex[:5]
    fixture_spaces = {
        f.name: f"d-{kind}-{f.name.replace('_', '-')}"[:56] + f"-{token}" for f in FIXTURES
    }
    return f"d-{kind}-recorder-{token}", fixture_spaces


def _phase(
    kind: str, *, kubeconfig: Path, project: Path, work: Path, python: Path, dyn: Any
) -> tuple[dict[str, Any], str]:
    """Run every fixture on the `kind` operator; (fixture -> normalised record, log)."""
    recorder_ns, spaces = _namespace_names(kind)
    core = dyn.resources.get(api_version="v1", kind="Namespace")
    for name in (recorder_ns, *spaces.values()):
        core.create(body={"metadata": {"name": name}})
    op: operators.Operator | None = None
    if kind == "go":
        operators.clear_go_runs(fx.GROUP, list(spaces.values()))
        mirror = RunMirror(operators.GO_RUNNER_DIR, work / kind / "mirror", skip=0)
    else:
        mirror = RunMirror(work / kind / "runner", work / kind / "mirror", skip=1)
    phase = Phase(
        data_base=lambda: mirror.mirror,
        namespaces=spaces,
        recorder_namespace=recorder_ns,
        busy=lambda controllers: op.busy(controllers) if op else True,
    )
    drivers = [Driver(_client(kubeconfig), phase, fixture) for fixture in FIXTURES]
    mirror.start()
    try:
        for driver in drivers:
            driver.setup()
        env = operators.environment(
            python=python,
            kubeconfig=kubeconfig,
            namespaces=list(spaces.values()),
            recorder_namespace=recorder_ns,
            work=work / kind,
        )
        op = operators.start(kind, project=project, env=env, work=work / kind, python=python)
        op.wait_ready()
        # A few fixtures at a time: each ends by removing its CRs, so that the operator
        # never runs more than a few fixtures' Ansible at once on a small machine.
        with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
            try:
                raw = list(pool.map(lambda driver: driver.run(), drivers))
            except BaseException:  # a timeout, ^C: the drivers stop waiting at once
                phase.stopping.set()
                raise
        print(f"--- {kind}: " + ", ".join(f"{d.fixture.name} {d.seconds:.0f} s" for d in drivers))
        names = {
            str(work / kind): "<work>",  # the operator's data directories, in messages
            str(work): "<work>",
            recorder_ns: "<recorder-ns>",
            **{ns: "<ns>" for ns in spaces.values()},
        }
        records = {
            fixture.name: recorder.normalise(record, names=names, random=fixture.random)
            for fixture, record in zip(FIXTURES, raw, strict=True)
        }
        # Kept with the test's files, for a look at what a failing comparison saw.
        (work / f"records-{kind}.json").write_text(json.dumps(records, indent=1, sort_keys=True))
        return records, op.log()
    finally:
        mirror.stop()
        if op is not None:
            op.stop()
            print(f"--- {kind} operator log (tail)\n{op.log()[-3000:]}")
        for driver in drivers:
            driver.release()
        for name in (recorder_ns, *spaces.values()):
            release_custom_resources(dyn, name)
            core.delete(name=name)
        if kind == "go":
            operators.clear_go_runs(fx.GROUP, list(spaces.values()))


@pytest.fixture(scope="module")
def suite(kubeconfig: Path, dyn: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Suite]:
    python = operators.test_python()
    operators.check_runner_http(python)
    operators.go_binary()
    line = core_line(operators.core_version(python)) or "unknown"
    for fixture in FIXTURES:
        for kind, scope in fixture.kinds.items():
            install_crd(dyn, crd(group=fx.GROUP, kind=kind, scope=scope))
    work = tmp_path_factory.mktemp("differential")
    project = fx.build_project(work / "project", FIXTURES)
    records: dict[str, dict[str, Any]] = {}
    logs: dict[str, str] = {}
    for kind in operators.KINDS:
        options = {"kubeconfig": kubeconfig, "project": project, "work": work, "python": python}
        started = time.monotonic()
        if kind == "go" and REUSE_GO:
            records[kind] = json.loads(Path(REUSE_GO).read_text())
            logs[kind] = ""
        elif kind == "go":
            with operators.go_lock():
                records[kind], logs[kind] = _phase(kind, dyn=dyn, **options)  # type: ignore[arg-type]
        else:
            records[kind], logs[kind] = _phase(kind, dyn=dyn, **options)  # type: ignore[arg-type]
        print(f"--- {kind} phase: {time.monotonic() - started:.0f} s")
    result = Suite(core=line, records=records, logs=logs, entries=load_allowlist(ALLOWLIST))
    for fixture in FIXTURES:
        for backend in BACKENDS:
            found = list(
                differences(records["go"].get(fixture.name), records[backend].get(fixture.name))
            )
            result.left[(fixture.name, backend)] = unexplained(
                found,
                result.entries,
                fixture=fixture.name,
                backend=backend,
                core=line,
                used=result.used,
            )
    yield result


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fixture", [f.name for f in FIXTURES])
def test_same_as_go(suite: Suite, fixture: str, backend: str) -> None:
    left = suite.left[(fixture, backend)]
    assert not left, (
        f"{len(left)} difference(s) from the Go operator not in allowlist.yaml "
        f"(ansible-core {suite.core}, {backend} backend):\n" + "\n".join(map(str, left[:40]))
    )


def test_every_allowlist_entry_still_differs(suite: Suite) -> None:
    """An entry that explains nothing any more is stale: the difference is gone."""
    if ONLY:
        pytest.skip("only some fixtures ran (DIFF_FIXTURES)")
    stale = [
        entry.id
        for entry in suite.entries
        if not entry.sometimes
        and entry.id not in suite.used
        and (not entry.core or suite.core in entry.core)
    ]
    assert not stale, f"allow-list entries that matched no difference: {stale}"


def test_ours_says_when_it_allows_non_boolean_conditionals(suite: Suite) -> None:
    notice = "conditionals with a non-boolean result"
    for backend in BACKENDS:
        said = notice in suite.logs[backend]
        assert said is (suite.core != "2.18"), f"{backend}: {said} on {suite.core}"


def test_the_allowlist_is_explained_in_the_docs() -> None:
    text = DOCS.read_text()
    entries = load_allowlist(ALLOWLIST)
    missing = [entry.id for entry in entries if f"`{entry.id}`" not in text]
    assert not missing, f"docs/differential.md does not explain: {missing}"
