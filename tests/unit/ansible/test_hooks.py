"""runner.ansible.hooks: the registry of ansible-core hooks and the start-up check on it."""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import re
import textwrap
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


def _instance_attribute_source(owner: object, attribute: str) -> str | None:
    """Where instances of `owner` (a class, or an instance: its class) get `attribute`,
    or None when nothing in ansible-core gives it to them. Read from the classes, not
    from an object: a hook that ran in this process may have set the attribute itself."""
    cls_of_owner = owner if isinstance(owner, type) else type(owner)
    for cls in cls_of_owner.__mro__:
        if cls is object:
            continue
        if attribute in vars(cls) or attribute in vars(cls).get("__annotations__", {}):
            return f"{cls.__qualname__}: a class attribute"
        if dataclasses.is_dataclass(cls) and attribute in {f.name for f in dataclasses.fields(cls)}:
            return f"{cls.__qualname__}: a dataclass field"
        try:
            source = textwrap.dedent(inspect.getsource(cls))
        except (OSError, TypeError):
            continue
        for node in ast.walk(ast.parse(source)):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and node.args.args
                and _assigns(node, node.args.args[0].arg, attribute)
            ):
                return f"{cls.__qualname__}.{node.name}"
    return None


def _assigns(function: ast.FunctionDef | ast.AsyncFunctionDef, me: str, attribute: str) -> bool:
    """`function` sets `attribute` on its first argument `me`: `me.attribute = ...` (also
    annotated or augmented), `setattr(me, "attribute", ...)` or `object.__setattr__(me,
    "attribute", ...)`."""
    for node in ast.walk(function):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in _unpacked(target)]
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            called = node.func
            if (isinstance(called, ast.Name) and called.id == "setattr") or (
                isinstance(called, ast.Attribute) and called.attr == "__setattr__"
            ):
                on, name = node.args[0], node.args[1]
                if (
                    isinstance(on, ast.Name)
                    and on.id == me
                    and isinstance(name, ast.Constant)
                    and name.value == attribute
                ):
                    return True
        for target in targets:
            if (
                isinstance(target, ast.Attribute)
                and target.attr == attribute
                and isinstance(target.value, ast.Name)
                and target.value.id == me
            ):
                return True
    return False


def _unpacked(target: ast.expr) -> list[ast.expr]:
    """The targets an assignment to `target` binds (`a, (b, *c) = ...`: a, b, c); not
    what they are attributes of (`self._x.y = ...` sets `y`, not `_x`)."""
    if isinstance(target, ast.Tuple | ast.List):
        return [t for element in target.elts for t in _unpacked(element)]
    if isinstance(target, ast.Starred):
        return _unpacked(target.value)
    return [target]


def _check_spot(name: str) -> str:
    """What the running ansible-core has for spot `name` (a `Spot.name`); raises when the
    name is gone."""
    owner, sep, attribute = name.partition("#")
    found = _resolve(owner)
    if not sep:
        return repr(found)
    where = _instance_attribute_source(found, attribute)
    if where is None:
        raise AttributeError(f"{owner} gives its instances no attribute {attribute!r}")
    return where


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
    _check_spot(spot.name)  # raises when the name is gone


def test_the_instance_attribute_check_fails_for_a_renamed_attribute() -> None:
    """What `_check_spot` does when ansible-core renames an attribute its hooks use: an
    attribute assigned under another name, or only read, is not found."""
    from ansible.executor.process.worker import WorkerProcess

    assert _instance_attribute_source(WorkerProcess, "_host") == "WorkerProcess.__init__"
    assert _instance_attribute_source(WorkerProcess, "_host_renamed") is None

    class Worker:
        __slots__ = ("_slot",)
        _default: int = 0

        def __init__(self, host: Any) -> None:
            self._renamed_host = host
            self._host_vars.x = 1  # type: ignore[attr-defined]  # sets x, not _host_vars
            self._first, (self._second, *self._rest) = 1, (2, 3)
            setattr(self, "_by_setattr", host)  # noqa: B010 - the form ansible-core uses
            print(self._read_only)  # type: ignore[attr-defined]

        def later(me) -> None:  # any name for the instance
            me._later = 1

    assert _instance_attribute_source(Worker, "_host") is None
    assert _instance_attribute_source(Worker, "_read_only") is None
    assert _instance_attribute_source(Worker, "_host_vars") is None
    for found in ("_renamed_host", "_by_setattr", "_later", "_slot", "_default", "_rest"):
        assert _instance_attribute_source(Worker, found) is not None, found
    with pytest.raises(AttributeError, match="no attribute '_host_gone'"):
        _check_spot("ansible.executor.process.worker:WorkerProcess#_host_gone")


NOT_ANSIBLE_CORE = {
    "_exit": "os._exit",
    "_clear": "atexit._clear",
    "_run_exitfuncs": "atexit._run_exitfuncs",
    "_replace": "a urllib.parse.SplitResult (a named tuple)",
    "_ciphertext": (
        "warm/frames.py: a value whose yaml_tag is '!vault', 2.18's AnsibleVaultEncryptedUnicode;"
        " the warm runner runs on 2.19 only (warmrole), whose vaulted values have no yaml_tag"
    ),
}
"""Private names the hooks and the warm runner use that are not ansible-core's; besides,
names starting `_runner_` are the marks our hooks leave on what they patched."""


def _private_names_used(path: Path) -> dict[str, int]:
    """Each private name (`_x`, not `__x__`) `path` reads or writes as an attribute
    (`thing._x`, `getattr(thing, "_x")`, ...) with the first line it is on; `self._x` in
    a class of ours (one with no base imported from ansible) is not counted."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    from_ansible = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible")
        for alias in node.names
    }
    own_instance: set[int] = set()  # the `self` names of our classes' methods
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and not any(
            not isinstance(base, ast.Name) or base.id in from_ansible for base in cls.bases
        ):
            for method in cls.body:
                if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method.args.args:
                    me = method.args.args[0].arg
                    own_instance |= {
                        id(node)
                        for node in ast.walk(method)
                        if isinstance(node, ast.Name) and node.id == me
                    }
    used: dict[str, int] = {}
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute) and id(node.value) not in own_instance:
            name = node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and id(node.args[0]) not in own_instance
        ):
            name = node.args[1].value
        if name and name.startswith("_") and not name.startswith("__"):
            used.setdefault(name, node.lineno)
    return used


def test_every_private_name_the_hooks_use_is_a_spot() -> None:
    """A private attribute of an ansible-core object (or module) read or written anywhere
    in the hooks or the warm runner is named by some hook's spot, so that the per-line
    check above covers it; docs/ansible-core.md says how to add one."""
    in_spots = {
        part
        for hook in hooks.HOOKS
        for spot in hook.spots
        for part in re.split(r"[:.#]", spot.name)
    }
    missing = [
        f"{path.relative_to(HOOKS_DIR.parent)}:{line}: {name}"
        for root in (HOOKS_DIR, HOOKS_DIR.parent / "warm")
        for path in sorted(root.rglob("*.py"))
        for name, line in _private_names_used(path).items()
        if name not in in_spots and name not in NOT_ANSIBLE_CORE and not name.startswith("_runner_")
    ]
    assert missing == []


def test_the_private_name_scan_sees_each_form() -> None:
    module = HOOKS_DIR.parent / "warm" / "frames.py"
    assert "_ciphertext" in _private_names_used(module)
    inline = _private_names_used(HOOKS_DIR / "inline.py")
    assert {"_host", "_callback_lock", "_save_stdin", "_runner_inline", "_uuid"} <= set(inline)
    warm = _private_names_used(HOOKS_DIR / "warmrole.py")
    assert {"_ds", "_implicit", "_extra_vars", "_vault", "_return_data"} <= set(warm)
    assert "_tasks" not in warm  # WarmPlay's own
    plugin = _private_names_used(HOOKS_DIR / "callback_plugins" / "ansible_operator_payloads.py")
    assert "_display" in plugin  # CallbackBase's, on self


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
        assert set(hook.backends) <= {"fast", "runner", "webhooks", "plan"}
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


def test_the_hook_table_of_the_docs_counts_each_lines_spots() -> None:
    """docs/ansible-core.md lists every hook with the number of spots checked on each
    line; a spot added or removed changes the count to write there."""
    docs = (HOOKS_DIR.parents[2] / "docs" / "ansible-core.md").read_text()
    rows = {}
    for line in docs.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = (cells[3], cells[4])
    for hook in hooks.HOOKS:
        expected = tuple(
            str(sum(1 for spot in hook.spots if not spot.lines or line in spot.lines))
            if line in hook.tested
            else "not tested"
            for line in ("2.18", "2.19")
        )
        assert rows.get(hook.name) == expected, hook.name
