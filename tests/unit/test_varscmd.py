"""`ansible-operator vars` prints what a reconcile passes to Ansible for the same CR.

Each case runs the real `Reconciler.reconcile` (with an in-memory API server stand-in and
a backend that records its request) and compares the request's extra-vars with the
command's output for the same CR.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.fake_api import FakeAPI, RecordingBackend

from runner.cli.main import main
from runner.cli.varscmd import cr_extra_vars, parse_cr, render
from runner.errors import ConfigError
from runner.operator.reconciler import Reconciler, RunSettings
from runner.structs import GVK, NamespacedName
from runner.watches import model as watches_mod
from runner.watches.model import Finalizer, Watch

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "config" / "samples" / "cache_v1alpha1_memcached.yaml"
MEMCACHED = GVK("cache.example.com", "v1alpha1", "Memcached")
FINALIZER = "cache.example.com/finalizer"


async def runtime_extra_vars(watch: Watch, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The extra-vars of the run one reconcile of `obj` starts."""
    api = FakeAPI(obj)
    backend = RecordingBackend()
    meta = obj["metadata"]
    reconciler = Reconciler(
        watch=watch,
        client=api,  # type: ignore[arg-type]
        backend=backend,
        settings=RunSettings(),
        read=lambda _key: copy.deepcopy(api.obj),
    )
    await reconciler.reconcile(NamespacedName(meta.get("namespace") or "", meta["name"]))
    assert len(backend.requests) == 1, "the reconcile did not run Ansible"
    return dict(backend.requests[0].extravars)


class _FixedClock:
    """Stands in for `datetime` in varscmd: `now()` is one fixed time."""

    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self, tz: Any = None) -> datetime:
        return self._now


def sample_watches() -> tuple[Watch, ...]:
    return watches_mod.load("watches.yaml", environ={}, cwd=REPO)


def cr(namespace: str | None = "demo", **meta: Any) -> dict[str, Any]:
    obj = parse_cr(SAMPLE.read_text(), source=str(SAMPLE))
    if namespace:
        obj["metadata"]["namespace"] = namespace
    obj["metadata"].update(meta)
    return obj


SERVER_FIELDS = {
    "uid": "0b3f7e0c-2f7e-4a39-9d1e-3c0c2d7d4a11",
    "resourceVersion": "4711",
    "generation": 2,
    "creationTimestamp": "2025-01-31T12:00:00Z",
}

CASES = [
    pytest.param(sample_watches(), cr(), False, id="sample"),
    pytest.param(sample_watches(), cr(**SERVER_FIELDS), False, id="sample-server-fields"),
    pytest.param(
        sample_watches(),
        cr(finalizers=["other.example.com/keep", FINALIZER]),
        False,
        id="finalizer-already-there",
    ),
    pytest.param(
        sample_watches(),
        cr(
            finalizers=[FINALIZER],
            deletionTimestamp="2025-02-01T08:00:00Z",
            deletionGracePeriodSeconds=0,
        ),
        False,
        id="deletion-in-file",
    ),
    pytest.param(
        (
            Watch(
                gvk=MEMCACHED,
                role=Path("/roles/memcached"),
                vars={"image": "memcached:1.6.38", "state": "present"},
                snake_case_parameters=False,
                mark_unsafe=True,
            ),
        ),
        {
            "apiVersion": MEMCACHED.api_version,
            "kind": "Memcached",
            "metadata": {"name": "m", "namespace": "demo", "labels": {"app": "{{ x }}"}},
            "spec": {"cacheSize": "64Mi", "replicaCount": 2, "tags": ["a", "{{ b }}"]},
        },
        False,
        id="watch-vars-no-snake-case-unsafe",
    ),
    pytest.param(
        (
            Watch(
                gvk=GVK("ops.example.com", "v1", "Backup"),
                role=Path("/roles/backup"),
                finalizer=Finalizer(name="ops.example.com/cleanup", vars={"purge": True}),
            ),
        ),
        {
            "apiVersion": "ops.example.com/v1",
            "kind": "Backup",
            "metadata": {"name": "nightly", "managedFields": [{"manager": "kubectl"}]},
            "spec": {"schedule": "0 3 * * *", "keepLast": 7},
        },
        True,
        id="cluster-scoped-managed-fields-deleting",
    ),
]


@pytest.mark.parametrize(("watches", "obj", "deleting"), CASES)
async def test_same_as_the_reconciler(
    watches: tuple[Watch, ...],
    obj: dict[str, Any],
    deleting: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    namespace = obj["metadata"].get("namespace", "")
    now = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
    # The Running condition's time: the reconcile's clock is the one `vars` is given.
    monkeypatch.setattr("runner.operator.reconciler._now", lambda: now)
    printed = cr_extra_vars(watches, obj, namespace=namespace, deleting=deleting, now=now)
    runtime_obj = copy.deepcopy(obj)
    if deleting:
        # What the API server would hold once the CR is being deleted.
        runtime_obj["metadata"].update(
            deletionTimestamp="2025-03-01T09:30:00Z",
            deletionGracePeriodSeconds=0,
            finalizers=[watches[0].finalizer.name],  # type: ignore[union-attr]
        )
    runtime_obj["metadata"].pop("managedFields", None)  # the informer's store drops them
    assert printed == await runtime_extra_vars(watches[0], runtime_obj)


def test_cli_json_and_yaml(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    now = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
    monkeypatch.setattr("runner.cli.varscmd.datetime", _FixedClock(now))
    expected = cr_extra_vars(sample_watches(), cr(), namespace="demo")
    for output, load in (("json", json.loads), ("yaml", yaml.safe_load)):
        args = ["vars", "--watches-file", "watches.yaml", "-n", "demo", "-o", output]
        assert main([*args, str(SAMPLE.relative_to(REPO))]) == 0
        assert load(capsys.readouterr().out) == expected
    # JSON is what the run's env/extravars file holds: sorted keys.
    assert list(json.loads(render(expected, "json"))) == sorted(expected)


def test_cli_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    monkeypatch.chdir(REPO)
    monkeypatch.setattr("sys.stdin", io.StringIO(SAMPLE.read_text()))
    assert main(["vars", "-n", "demo", "-o", "json", "-"]) == 0
    assert json.loads(capsys.readouterr().out)["ansible_operator_meta"] == {
        "name": "memcached-sample",
        "namespace": "demo",
    }


def test_timestamps_stay_strings() -> None:
    obj = parse_cr(
        "apiVersion: cache.example.com/v1alpha1\nkind: Memcached\n"
        "metadata: {name: m, namespace: d, creationTimestamp: 2025-01-31T12:00:00Z}\n"
        "spec: {since: 2024-12-24}\n",
        source="x.yaml",
    )
    printed = cr_extra_vars(sample_watches(), obj, namespace=None)
    # The sample's watch sets markUnsafe: spec values arrive wrapped as unsafe text.
    assert printed["since"] == {"__ansible_unsafe": "2024-12-24"}
    meta = printed["_cache_example_com_memcached"]["metadata"]
    assert meta["creationTimestamp"] == {"__ansible_unsafe": "2025-01-31T12:00:00Z"}


@pytest.mark.parametrize(
    ("text", "namespace", "deleting", "message"),
    [
        pytest.param(
            SAMPLE.read_text(), None, False, "has no metadata.namespace; pass --namespace", id="ns"
        ),
        pytest.param(
            SAMPLE.read_text().replace("name: memcached-sample", "name: m\n  namespace: a"),
            "b",
            False,
            "is in namespace a, not b",
            id="ns-mismatch",
        ),
        pytest.param(
            SAMPLE.read_text().replace("v1alpha1", "v1"),
            "a",
            False,
            "no watch for cache.example.com/v1, Kind=Memcached",
            id="no-watch",
        ),
        pytest.param(
            SAMPLE.read_text() * 2, "a", False, "expected one custom resource, found 2", id="two"
        ),
        pytest.param("kind: Memcached\n", "a", False, "has no apiVersion", id="no-api-version"),
        pytest.param(
            "apiVersion: v1\nkind: X\nmetadata: {}\n", "a", False, "no metadata.name", id="name"
        ),
        pytest.param("a: [\n", "a", False, "not valid YAML", id="yaml"),
    ],
)
def test_errors(text: str, namespace: str | None, deleting: bool, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^x\.yaml: .*" + message.replace(".", r"\.")):
        cr_extra_vars(
            sample_watches(),
            parse_cr(text, source="x.yaml"),
            namespace=namespace,
            deleting=deleting,
            source="x.yaml",
        )


def test_deleting_without_finalizer() -> None:
    watches = (Watch(gvk=MEMCACHED, role=Path("/roles/memcached")),)
    with pytest.raises(ConfigError, match="no finalizer in the watches file"):
        cr_extra_vars(watches, cr(), namespace="demo", deleting=True)


def test_cli_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    assert main(["vars", str(SAMPLE.relative_to(REPO))]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: config/samples/cache_v1alpha1_memcached.yaml: Memcached ")
    assert "--namespace" in err


@pytest.mark.parametrize(
    ("environ", "roles", "collections", "expected_roles", "expected_collections"),
    [
        pytest.param(
            {}, "", "", None, "/usr/share/ansible/collections:~/.ansible/collections", id="defaults"
        ),
        pytest.param(
            {"ANSIBLE_COLLECTIONS_PATH": "/c", "ANSIBLE_ROLES_PATH": "/r"},
            "",
            "",
            "/r",
            "/c",
            id="environment",
        ),
        pytest.param(
            {"ANSIBLE_COLLECTIONS_PATH": "/c"},
            "/flag-r",
            "/flag-c",
            "/flag-r",
            "/flag-c",
            id="flags",
        ),
    ],
)
def test_watches_are_loaded_with_the_paths_run_uses(
    environ: dict[str, str],
    roles: str,
    collections: str,
    expected_roles: str | None,
    expected_collections: str,
) -> None:
    from runner.ansible.bundledcollection import bundled_collections_path
    from runner.cli.varscmd import watches_environ

    result = watches_environ(environ, roles_path=roles, collections_path=collections)
    assert result.get("ANSIBLE_ROLES_PATH") == expected_roles
    assert result["ANSIBLE_COLLECTIONS_PATH"] == (
        f"{expected_collections}:{bundled_collections_path()}"
    )
