"""The `zygote` hook: a warm ansible-playbook forked per run, its ansible-core side.

The fast backend's zygote process (`runner/ansible/fastbackend/zygoteprocess.py`) imports and
warms once what every run needs, then forks one `ansible-playbook` per run. What that
takes from ansible-core's internals is here, in one place with the other hooks:

- `warm_up()`: ansible-core's CLI, executor and plugin loaders with their
  documentation-derived configuration, the collection finder, `kubernetes` and the
  module_utils of the allow-listed collections imported and resolved; the vars plugin
  loader primed the way ansible-core primes it;
- `install_hooks()`: the other hooks installed into the warm process, each only when it
  was tested with the running ansible-core (`runner.ansible.hooks.enabled`);
- `remember_settings()` and `enter_run()`: in the forked child, the state that depends
  on the environment or on the output being a terminal brought up to date — the ansible
  constants whose variables differ from the zygote's (the roles path, the fact cache), a
  fresh local temp directory, the colour decision, the display's width and dedup sets,
  the job-event context of `awx_display`, the vars plugin loader as a new process has it;
- `playbook()`: `PlaybookCLI.cli_executor(argv)`, what the `ansible-playbook` script runs.

The spots these touch are listed under `zygote` in `runner.ansible.hooks.HOOKS`.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from runner.ansible import hooks
from runner.ansible.hooks import (
    direct,
    events,
    immutables,
    inline,
    kubemodules,
    modexec,
    payloads,
    templates,
)

__all__ = [
    "BEFORE_CALLBACKS",
    "COLD_MODULE_UTILS",
    "PROFILE_ENV",
    "WARM_ACTIONS",
    "WARM_COLLECTIONS",
    "WARM_IMPORTS",
    "WARM_MODULES",
    "enter_run",
    "hold_events_until_callbacks",
    "install_hooks",
    "playbook",
    "quiet",
    "remember_settings",
    "warm_up",
]

PROFILE_ENV = "ANSIBLE_OPERATOR_ZYGOTE_PROFILE"
"""A directory: each run writes a cProfile of its ansible-playbook there (diagnostics;
its tasks and in-process modules are in it)."""

WARM_ACTIONS = (
    "ansible.builtin.normal",
    "ansible.builtin.debug",
    "ansible.builtin.set_fact",
    "ansible.builtin.set_stats",
    "ansible.builtin.assert",
    "ansible.builtin.fail",
    "ansible.builtin.command",
    "ansible.builtin.shell",
    "ansible.builtin.copy",
    "ansible.builtin.template",
    "ansible.builtin.include_vars",
    "ansible.builtin.gather_facts",
    "kubernetes.core.k8s",
    "kubernetes.core.k8s_info",
)
"""Action plugins resolved (imported, their configuration loaded) before any run."""

WARM_MODULES = (
    "ansible.builtin.command",
    "ansible.builtin.copy",
    "ansible.builtin.file",
    "ansible.builtin.stat",
    "ansible.builtin.setup",
    "kubernetes.core.k8s",
    "kubernetes.core.k8s_info",
    "operator_sdk.util.k8s_status",
    "operator_sdk.util.requeue_after",
)
"""Modules whose names are resolved before any run."""

WARM_IMPORTS = (
    "ansible.cli.playbook",
    "ansible.executor.playbook_executor",
    "ansible.executor.task_queue_manager",
    "ansible.executor.task_executor",
    "ansible.executor.process.worker",
    "ansible.executor.module_common",
    "ansible.plugins.strategy.linear",
    "ansible.module_utils.basic",
    "ansible.module_utils._internal._ansiballz._loader",
    "ansible.module_utils._internal._json._profiles._module_legacy_c2m",
    "ansible.module_utils._internal._json._profiles._module_legacy_m2c",
    "ansible.module_utils._internal._json._profiles._module_modern_c2m",
    "ansible.module_utils._internal._json._profiles._module_modern_m2c",
    "encodings.cp437",
    "kubernetes",
    "kubernetes.client",
    "kubernetes.config",
    "kubernetes.dynamic",
    "urllib3",
    "yaml",
)
"""Python modules imported before any run (the ones behind the common tasks)."""

WARM_COLLECTIONS = ("kubernetes.core", "operator_sdk.util")
"""Collections whose `module_utils` are imported before any run."""

COLD_MODULE_UTILS = frozenset({"ansible_collections.kubernetes.core.plugins.module_utils.copy"})
"""`module_utils` of those collections left out of the warm-up: `copy` serves only
`k8s_cp` and imports the generated `CoreV1Api` with some 250 model classes (about 21 MiB
in the zygote and 1.7 s of its start-up); a run that copies imports it in its own fork."""

_settings_by_variable: dict[str, list[str]] = {}
"""Environment variable -> the ansible settings it feeds (see `remember_settings`)."""

_local_tmp_base: str | None = None
"""Where each run's `DEFAULT_LOCAL_TMP` is made, when no per-run variable decides it."""

_event_modules: list[Any] = []
"""The loaded `awx_display` callback modules, whose event context each run renews."""

BEFORE_CALLBACKS = "ansible-operator-before-callbacks"
"""The event context's uuid until the run loads its callbacks (`_fresh_event_context`)."""


def install_hooks(*, store: str, base_path: list[str]) -> list[str]:
    """Install the run-time hooks into this (warm) process: each one tested with the
    running ansible-core, in the order they build on each other. Returns why each hook
    left out is (empty when all are in)."""
    warm_modules = _module_paths(WARM_MODULES)
    warm_paths, warm_fqns = [path for path, _ in warm_modules], [fqn for _, fqn in warm_modules]
    left_out = []
    for name, install in (
        ("modexec", lambda: modexec.install(sys_path=base_path)),
        ("payloads", lambda: payloads.install(os.path.join(store, "payloads"))),
        ("direct", lambda: _both(direct.install, lambda: direct.warm(warm_paths))),
        ("inline", inline.install),
        ("immutables", immutables.install),
        ("templates", lambda: templates.install(_private_dir(store, "templates"))),
        ("events", lambda: events.install(_event_modules)),
        ("kubemodules", lambda: _both(kubemodules.install, lambda: kubemodules.warm(warm_fqns))),
    ):
        reason = _install_hook(name, install)
        if reason is not None:
            left_out.append(reason)
    return left_out


def _private_dir(store: str, name: str) -> str:
    path = os.path.join(store, name)
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _both(first: Callable[[], None], then: Callable[[], None]) -> None:
    first()
    then()


def _install_hook(name: str, install: Callable[[], object]) -> str | None:
    """Install hook `name` if it was tested with this ansible-core (`hooks`); why not, if
    it is not installed. Each hook looks up everything it patches before it patches
    anything, so one that fails leaves ansible-core as it was."""
    if not hooks.enabled(name):
        return f"{name}: not tested with ansible-core {hooks.running_core_version()}"
    try:
        install()
    except Exception as exc:
        return f"{name}: {type(exc).__name__}: {exc}"
    return None


def warm_up() -> list[str]:
    """Import and resolve what runs need; returns what failed (warm-up is best effort)."""
    errors: list[str] = []

    def attempt(label: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:
            errors.append(f"{label}: {type(exc).__name__}: {exc}")

    for name in WARM_IMPORTS:
        attempt(name, lambda name=name: _import_if_in_this_line(name))  # type: ignore[misc]
    from ansible import constants
    from ansible.plugins import loader

    attempt("plugin documentation", _parse_documentation_once)
    loader.init_plugin_loader([])
    for plugins in (
        loader.connection_loader,
        loader.shell_loader,
        loader.become_loader,
        loader.callback_loader,
        loader.inventory_loader,
        loader.cache_loader,
        loader.lookup_loader,
        loader.filter_loader,
        loader.test_loader,
    ):
        attempt(plugins.package, lambda plugins=plugins: list(plugins.all(class_only=True)))  # type: ignore[misc]
    # Inventory plugins as a run gets them, by their enabled names (`all()` above went
    # by file name): their documentation is parsed here, not in every run.
    for name in constants.INVENTORY_ENABLED:
        attempt(
            f"inventory {name}",
            lambda name=name: loader.inventory_loader.get(name, class_only=True),  # type: ignore[misc]
        )
    # Vars plugins as a run finds them (ansible-core's own priming: the legacy ones, then
    # the enabled ones such as `host_group_vars`); each run primes again (`enter_run`).
    attempt("vars plugins", _prime_vars_plugins)
    attempt("strategy linear", lambda: loader.strategy_loader.get("linear", class_only=True))
    for name in WARM_ACTIONS:
        attempt(name, lambda name=name: loader.action_loader.get(name, class_only=True))  # type: ignore[misc]
    for name in WARM_MODULES:
        attempt(name, lambda name=name: loader.module_loader.find_plugin_with_context(name))  # type: ignore[misc]
    for collection in WARM_COLLECTIONS:
        errors += _import_module_utils(collection)
    return errors


def _parse_documentation_once() -> None:
    """A plugin's documentation is parsed once per zygote, also when it declares no options.

    `PluginLoader._load_config_defs` parses a plugin's `DOCUMENTATION` each time the
    plugin is loaded unless its options were registered; a plugin without options has
    none to register, so every run parsed the YAML of `host_list`, `auto`, `ini` and
    `toml` again (and of the callbacks without options): about 3 % of a small role's
    run. What the parse gives is a function of the documentation alone, and with no
    options it has no effect: a (plugin type, name, path, documentation) seen to have
    none is skipped from then on, in the zygote and the runs forked after."""
    from ansible import constants
    from ansible.plugins import loader

    real = loader.PluginLoader._load_config_defs
    if getattr(real, "_runner_once", False):
        return
    without_options: set[tuple[str, str, str, str]] = set()

    def _load_config_defs(self: Any, name: str, module: Any, path: str) -> None:
        documentation = getattr(module, "DOCUMENTATION", "")
        key = (str(self.class_name), name, str(path), documentation)
        if isinstance(documentation, str) and key in without_options:
            return
        real(self, name, module, path)
        if not self.class_name or not isinstance(documentation, str):
            return
        type_name = loader.get_plugin_class(self.class_name)
        if type_name in constants.CONFIGURABLE_PLUGINS and not (
            constants.config.has_configuration_definition(type_name, name)
        ):
            without_options.add(key)

    _load_config_defs._runner_once = True  # type: ignore[attr-defined]
    loader.PluginLoader._load_config_defs = _load_config_defs


def _import_if_in_this_line(name: str) -> None:
    """Import `name`, unless it is a module of ansible-core that the running ansible-core
    line does not have (`WARM_IMPORTS` holds 2.19's `_internal` modules, 2.18 has none):
    nothing to warm then, and nothing wrong."""
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not (missing.startswith("ansible.") and (name + ".").startswith(missing + ".")):
            raise


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """stdout and stderr to /dev/null (the fds: Ansible's display writes to them)."""
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def _module_paths(names: Iterable[str]) -> list[tuple[str, str]]:
    """(file, Python name) of these modules, as the module loader resolves them (those it
    finds)."""
    from ansible.executor import module_common
    from ansible.plugins import loader

    found_modules = []
    for name in names:
        try:
            found = loader.module_loader.find_plugin_with_context(name)
            if not found.resolved or not found.plugin_resolved_path:
                continue
            path = str(found.plugin_resolved_path)
            found_modules.append((path, module_common._get_ansible_module_fqn(path)))
        except Exception:  # warm-up is best effort
            continue
    return found_modules


def _import_module_utils(collection: str) -> list[str]:
    package = f"ansible_collections.{collection}.plugins.module_utils"
    try:
        spec = importlib.util.find_spec(package)
    except ImportError as exc:
        return [f"{package}: {exc}"]
    if spec is None or not spec.submodule_search_locations:
        return []
    errors = []
    for root in spec.submodule_search_locations:
        for path in sorted(Path(root).rglob("*.py")):
            relative = path.relative_to(root).with_suffix("")
            parts = [part for part in relative.parts if part != "__init__"]
            name = ".".join([package, *parts])
            if name in COLD_MODULE_UTILS:
                continue
            try:
                importlib.import_module(name)
            except Exception as exc:
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
    return errors


def enter_run(env: Mapping[str, str], cwd: str) -> None:
    """The run's environment, directory, and the warm state that depends on them."""
    from ansible import constants
    from ansible.utils.display import Display, _synchronize_textiowrapper

    # Python's start-up adds LC_CTYPE=C.UTF-8 to its environment under the C locale (PEP
    # 538): the zygote's start-up did what ansible-playbook's would have done.
    coerced = os.environ.get("LC_CTYPE") if "LC_CTYPE" not in env else None
    changed = {key for key in set(env) | set(os.environ) if env.get(key) != os.environ.get(key)}
    os.environ.clear()
    os.environ.update(env)
    if coerced is not None:
        os.environ["LC_CTYPE"] = coerced
        changed.discard("LC_CTYPE")
    os.chdir(cwd)
    _refresh_constants(constants, changed)
    display = Display()
    sys.stdin, sys.stdout, sys.stderr = _tty_stdio()
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]
    for stream in (sys.stdout, sys.stderr):
        _synchronize_textiowrapper(stream, display._lock)
    display._set_column_width()
    for seen in (display._deprecations, display._warns, display._errors):
        seen.clear()
    importlib.reload(importlib.import_module("ansible.utils.color"))  # stdout is a tty now
    _fresh_event_context()
    _fresh_vars_plugins()
    # CLI.run installs the collection finder again; the zygote's is the same one.
    warnings.filterwarnings("ignore", message="AnsibleCollectionFinder has already been configured")


def _refresh_constants(constants: Any, changed: Iterable[str]) -> None:
    """Recompute the constants read from `changed` variables, and the local temp dir.

    `DEFAULT_LOCAL_TMP` is created when it is computed: each run gets its own, removed at
    its exit, as each ansible-playbook process does. (Which settings each variable feeds,
    and the directory the temp dir goes in, were worked out once by `remember_settings`.)
    """
    from ansible.config.manager import ensure_type

    config = constants.config
    settings = {setting for name in changed for setting in _settings_by_variable.get(name, ())}
    if _local_tmp_base is None:
        settings.add("DEFAULT_LOCAL_TMP")
    for setting in sorted(settings):
        value = config.get_config_value(setting, variables=vars(constants))
        constants.set_constant(setting, value)
    if "DEFAULT_LOCAL_TMP" not in settings:
        constants.set_constant("DEFAULT_LOCAL_TMP", ensure_type(_local_tmp_base, "tmppath"))


def remember_settings(per_run_env: Collection[str]) -> None:
    """What `_refresh_constants` and `_fresh_event_context` need, computed in the zygote;
    `per_run_env`: the variables that differ between its runs."""
    from ansible import constants

    config = constants.config
    _settings_by_variable.clear()
    for setting, definition in config.get_configuration_definitions().items():
        for entry in definition.get("env") or ():
            name = entry.get("name")
            if name:
                _settings_by_variable.setdefault(str(name), []).append(setting)
    global _local_tmp_base
    # The temp dir's parent: fixed by variables that are the same for all of a zygote's
    # runs (those that are not go through `config` again).
    feeding = {
        name for name, settings in _settings_by_variable.items() if "DEFAULT_LOCAL_TMP" in settings
    }
    if feeding.isdisjoint(per_run_env) and isinstance(constants.DEFAULT_LOCAL_TMP, str):
        _local_tmp_base = os.path.dirname(constants.DEFAULT_LOCAL_TMP)
    _event_modules[:] = [
        module
        for module in list(sys.modules.values())
        if str(getattr(module, "__file__", "") or "").endswith("awx_display.py")
        and getattr(module, "EventContext", None) is not None
    ]


def _tty_stdio() -> tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper]:
    """`sys.std*` as Python makes them for a terminal, with the display's error handler."""
    errors = "_replacing_warning_handler"
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
        encoding="utf-8",
        errors=errors,
        line_buffering=True,
    )
    stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding="utf-8",
        errors=errors,
        line_buffering=True,
    )
    return stdin, stdout, stderr


def _fresh_event_context() -> None:
    """`awx_display` reads the run's artifact directory when its event context is made.

    A new ansible-playbook imports `awx_display` only when it loads its callbacks
    (`TaskQueueManager.load_callbacks`): what it displays before (the version banner at
    `-v`, "Using ... as config file", an error in the playbook) is plain output, which
    ansible-runner turns into one `verbose` event per line. In the zygote `awx_display`
    is imported already and its `Display.display` wrapper would make each of those
    displays one event: until the run loads its callbacks, the event context holds a
    uuid of its own (`BEFORE_CALLBACKS`), with which the wrapper writes plain output."""
    for module in _event_modules:
        context = module.EventContext()
        context.add_global(uuid=BEFORE_CALLBACKS)
        vars(module)["event_context"] = context


def hold_events_until_callbacks() -> None:
    """Make `TaskQueueManager.load_callbacks` take `BEFORE_CALLBACKS` away (see
    `_fresh_event_context`); once, in the zygote."""
    from ansible.executor.task_queue_manager import TaskQueueManager

    real = TaskQueueManager.load_callbacks
    if getattr(real, "_runner_events_held", False):
        return

    def load_callbacks(self: Any) -> Any:
        for module in _event_modules:
            context = module.event_context
            if context.get_global().get("uuid") == BEFORE_CALLBACKS:
                context.remove_global(uuid=None)
        return real(self)

    load_callbacks._runner_events_held = True  # type: ignore[attr-defined]
    TaskQueueManager.load_callbacks = load_callbacks


def _prime_vars_plugins() -> None:
    from ansible.vars import plugins

    plugins._prime_vars_loader()


def _fresh_vars_plugins() -> None:
    """The vars plugin loader as a new process has it: with no plugin instances and no
    search paths yet, so that the run's first lookup of vars primes it with the run's own
    settings (`VARIABLE_PLUGINS_ENABLED`, the plugin paths). Left warm, its instance cache
    would be the zygote's: a loader whose paths are known is never primed again, and one
    primed by anything but ansible-core's `_prime_vars_loader` lacks the enabled plugins
    (`host_group_vars`, without which no `group_vars`/`host_vars` are read). The plugins'
    modules stay imported; priming again costs well under a millisecond."""
    from ansible.plugins.loader import vars_loader

    vars_loader._plugin_instance_cache = {}
    vars_loader._paths = None


def playbook(argv: list[str]) -> int:
    from ansible.cli.playbook import PlaybookCLI

    profile_dir = os.environ.get(PROFILE_ENV)
    profiler = None
    if profile_dir:
        import cProfile
        import time

        # CPU time, not wall time: on a shared machine the wall clock counts other
        # processes' turns on the CPU against whatever function was running.
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
    try:
        PlaybookCLI.cli_executor(argv)
    except SystemExit as exc:
        if profiler is not None and profile_dir:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"run-{os.getpid()}.prof"))
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    return 0
