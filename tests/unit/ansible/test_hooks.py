"""runner.ansible.hooks: the registry of ansible-core hooks and the start-up check on it."""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from typing import Any

import pytest

from runner.ansible import hooks
from runner.ansible.fastbackend import FastBackend
from runner.ansible.hooks import builder
from runner.ansible.runnerbackend import RunnerBackend
from runner.cli import versioncmd as version
from runner.operator import run

HOOKS_DIR = Path(hooks.__file__).parent


@pytest.mark.parametrize(
    ("version_text", "line"),
    [
        pytest.param("2.18.19", "2.18", id="release"),
        pytest.param("2.19.0rc1", "2.19", id="pre-release"),
        pytest.param("2.20.0.dev0", "2.20", id="dev"),
        pytest.param("garbage", None, id="unreadable"),
    ],
)
def test_core_line(version_text: str, line: str | None) -> None:
    assert hooks.core_line(version_text) == line


def _resolve(name: str) -> object:
    module, _, attributes = name.partition(":")
    found: object = importlib.import_module(module)
    for attribute in attributes.split(".") if attributes else ():
        found = getattr(found, attribute)
    return found


SPOTS = [
    pytest.param(hook, spot, id=f"{hook.name}:{spot.name}")
    for hook in hooks.HOOKS
    for spot in hook.spots
]


@pytest.mark.parametrize(("hook", "spot"), SPOTS)
def test_every_spot_exists_in_the_running_ansible_core(hook: hooks.Hook, spot: hooks.Spot) -> None:
    """Run on each tested line (make test-core218 too): on a new line, the spots that
    fail here are the first items of the checklist in docs/ansible-core.md."""
    line = hooks.core_line(hooks.running_core_version() or "")
    if line not in hook.tested:
        pytest.skip(f"{hook.name} is not used with ansible-core {line}")
    if spot.lines and line not in spot.lines:
        pytest.skip(f"only on ansible-core {', '.join(spot.lines)}")
    _resolve(spot.name)  # raises when the name is gone


def test_line_specific_spots_name_tested_lines() -> None:
    for hook in hooks.HOOKS:
        for spot in hook.spots:
            assert set(spot.lines) <= set(hook.tested), (hook.name, spot.name)


def test_every_module_of_the_hooks_package_belongs_to_a_hook() -> None:
    claimed = {module for hook in hooks.HOOKS for module in hook.modules}
    found = {
        path.relative_to(HOOKS_DIR).as_posix()
        for path in HOOKS_DIR.rglob("*.py")
        if path.name != "__init__.py"
    }
    assert found == claimed


def test_every_hook_names_its_module_spots_and_both_lines() -> None:
    names = [hook.name for hook in hooks.HOOKS]
    assert len(names) == len(set(names))
    for hook in hooks.HOOKS:
        for module in hook.modules:
            assert (HOOKS_DIR / module).is_file(), (hook.name, module)
        assert hook.spots and hook.does
        # warmrole was checked on 2.19 only: on 2.18 webhooks keep full runs.
        lines = {"2.19"} if hook.name == "warmrole" else {"2.18", "2.19"}
        assert set(hook.tested) == lines, hook.name
        assert set(hook.backends) <= {"fast", "runner", "webhooks"}
    assert hooks.tested_lines(hooks.BACKEND_HOOKS) == ("2.18", "2.19")


@pytest.mark.parametrize("core", ["2.18.19", "2.19.14"])
def test_a_tested_line_enables_every_hook_without_a_warning(core: str) -> None:
    found = hooks.plan(core)
    assert [hook.name for hook in found.left_out] == (
        [] if core.startswith("2.19") else ["warmrole"]
    )
    assert found.warning("fast") is None and found.warning("runner") is None
    assert all(hooks.enabled(hook.name, core) for hook in hooks.BACKEND_HOOKS)
    assert hooks.enabled("warmrole", core) == core.startswith("2.19")


@pytest.mark.parametrize("core", ["2.20.0", "2.17.9", None])
def test_an_untested_line_leaves_every_hook_out_with_one_warning(core: str | None) -> None:
    found = hooks.plan(core)
    assert found.enabled == ()
    fast = found.warning("fast")
    assert fast is not None
    assert f"ansible-core {core or 'no ansible-core'} is not a version" in fast
    assert "2.18, 2.19" in fast
    assert "runs go through plain ansible-runner" in fast
    for hook in hooks.BACKEND_HOOKS:
        assert hook.name in fast
    for hook in hooks.HOOKS:
        assert not hooks.enabled(hook.name, core or "")
    runner = found.warning("runner")
    assert runner is not None and "payloads" in runner and "zygote" not in runner


@pytest.mark.parametrize(
    ("requested", "core", "backend", "shares"),
    [
        pytest.param("fast", "2.18.19", FastBackend, True, id="fast-2.18"),
        pytest.param("fast", "2.19.14", FastBackend, True, id="fast-2.19"),
        pytest.param("runner", "2.18.19", RunnerBackend, True, id="runner-2.18"),
        pytest.param("fast", "2.20.1", RunnerBackend, False, id="fast-untested"),
        pytest.param("runner", "2.20.1", RunnerBackend, False, id="runner-untested"),
    ],
)
def test_the_backend_follows_the_check(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    requested: str,
    core: str,
    backend: type[RunnerBackend | FastBackend],
    shares: bool,
) -> None:
    monkeypatch.setattr(hooks, "installed_core_version", lambda: core)
    chosen, share_payloads = run._backend_choice(requested)
    assert (chosen, share_payloads) == (backend, shares)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == (0 if shares else 1)


def test_the_payload_plugin_does_nothing_on_an_untested_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ansible.executor import module_common

    from runner.ansible.hooks import payloads
    from runner.ansible.hooks.callback_plugins import ansible_operator_payloads

    monkeypatch.setenv(payloads.STORE_ENV, str(tmp_path / "store"))
    monkeypatch.setattr(hooks, "running_core_version", lambda: "2.99.0")
    before = module_common._find_module_utils
    ansible_operator_payloads.CallbackModule()
    assert module_common._find_module_utils is before
    assert not (tmp_path / "store").exists()


def test_version_prints_the_running_core_and_the_collections() -> None:
    lines = version.version_lines({"ANSIBLE_COLLECTIONS_PATH": "/nonexistent"})
    core = hooks.installed_core_version()
    assert f"ansible-core version: {core} (supported)" in lines
    by_name = {line.partition(":")[0]: line.partition(": ")[2] for line in lines}
    assert by_name["operator_sdk.util collection version"].startswith("0.5.0 (")
    assert by_name["kubernetes.core collection version"][0].isdigit()


def test_version_reports_the_collection_found_first(tmp_path: Path) -> None:
    collection = tmp_path / "ansible_collections" / "kubernetes" / "core"
    collection.mkdir(parents=True)
    (collection / "MANIFEST.json").write_text('{"collection_info": {"version": "3.1.0"}}')
    lines = version.version_lines({"ANSIBLE_COLLECTIONS_PATH": str(tmp_path)})
    assert f"kubernetes.core collection version: 3.1.0 ({collection})" in lines


def test_module_builder_arguments_by_name_through_stacked_wrappers() -> None:
    """`direct` wraps `payloads`, which wraps ansible-core's builder: each sees the call's
    arguments by the builder's own names (2.18 passes seven of them by position)."""

    def real(module_name: str, b_module_data: bytes, *, become: bool = False) -> None:
        return None

    @functools.wraps(real)
    def inner(*args: Any, **kwargs: Any) -> None:
        return None

    @functools.wraps(inner)
    def outer(*args: Any, **kwargs: Any) -> None:
        return None

    called = builder.arguments(outer, ("k8s", b"data"), {"become": True})
    assert called == {"module_name": "k8s", "b_module_data": b"data", "become": True}
    assert builder.becomes(called)
    assert not builder.becomes({"become_plugin": None})
