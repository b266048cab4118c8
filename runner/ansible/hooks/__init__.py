"""Every place where ansible-operator hooks into ansible-core internals, and what was tested.

Both backends go faster than plain ansible-runner by changing what some private parts of
ansible-core do: the fast backend forks its runs from a warm zygote and patches the task
queue, the `local` connection and the module builder inside those runs; the runner
backend loads a callback plugin that patches the module builder to share payloads. None
of that is a public API: each ansible-core line moves it. So each hook is listed here,
with the spots it patches or reads and the ansible-core lines (major.minor) it was
checked against, and this list is what the start-up check reads (`plan`): a hook not
tested with the running ansible-core is left out — the run goes the plain ansible-runner
way for it — with one warning that says why. Each hook also checks itself before it
installs (`enabled`), so a run in another interpreter never gets an untested hook either.

Every module of this package belongs to one or more of the hooks (`Hook.modules`), and
nothing outside it touches ansible-core's internals: the backends
(`runner.ansible.runnerbackend`, `runner.ansible.fastbackend`) only install what is here.
Moving to a new ansible-core line is the checklist in docs/ansible-core.md: for each hook
below, read its spots in the new line's source, adapt its modules, run the hooks' unit
tests and the backend-equivalence and sample-operator tests on that line, then add the
line to `tested`.

This module imports nothing of ansible (the operator reads it before any run).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from importlib import metadata

__all__ = [
    "BACKEND_HOOKS",
    "HOOKS",
    "Hook",
    "Plan",
    "Spot",
    "core_line",
    "enabled",
    "installed_core_version",
    "plan",
    "running_core_version",
    "tested_lines",
]


@dataclass(frozen=True)
class Spot:
    """One name in ansible-core (or a library it runs) that a hook patches or relies on."""

    name: str
    """Where it is, in one of three forms a test checks against the running ansible-core:

    - `module` or `module:attribute.path`: importable (a module, function, class, class
      attribute, method or property, or an attribute of a module-level object);
    - `module:Class#attribute`: an attribute the class's instances get, found as a class
      attribute (slot, property, default) of the class or a base, a dataclass field, or an
      assignment `self.attribute = ...` / `setattr(self, "attribute", ...)` in the source
      of the class or a base;
    - `module:object#attribute`: the same for the class of a module-level object.
    """
    note: str = ""
    """What the hook does with it."""
    lines: tuple[str, ...] = ()
    """The ansible-core lines that have it, when not all the hook was tested with."""

    @property
    def instance_attribute(self) -> tuple[str, str] | None:
        """(`module:Class`, `attribute`) of a `module:Class#attribute` spot, else None."""
        owner, sep, attribute = self.name.partition("#")
        return (owner, attribute) if sep else None

    def __str__(self) -> str:
        where = f" (ansible-core {', '.join(self.lines)})" if self.lines else ""
        return f"{self.name}{where}: {self.note}" if self.note else f"{self.name}{where}"


@dataclass(frozen=True)
class Hook:
    """One way we change or rely on ansible-core internals."""

    name: str
    """The module that installs it: `runner/ansible/hooks/<name>.py`."""
    does: str
    """What it is for, in a few words (for the warning)."""
    spots: tuple[Spot, ...]
    """The ansible-core (or collection) names it patches or depends on."""
    tested: tuple[str, ...]
    """ansible-core lines (major.minor) it was checked against."""
    backends: tuple[str, ...]
    """The backends that use it (`fast`, `runner`; `webhooks`: the webhooks' warm
    runner, which without it leaves webhooks to full runs; `plan`: the runs of
    `ansible-operator plan`, which without it refuses to run)."""
    helpers: tuple[str, ...] = ()
    """Other files of this package it is made of (relative to it), beside `<name>.py`."""

    @property
    def modules(self) -> tuple[str, ...]:
        """Its files, relative to `runner/ansible/hooks/`."""
        return (f"{self.name}.py", *self.helpers)


_BOTH = ("2.18", "2.19")
_MODULE_COMMON = "ansible.executor.module_common"
_AWX_DISPLAY = "ansible_runner.display_callback.callback.awx_display"
_WORKER = "ansible.executor.process.worker:WorkerProcess"
_COLLECTION_FINDER = "ansible.utils.collection_loader._collection_finder"
_RAW_RESULT = "ansible.executor.task_result:_RawTaskResult"

HOOKS: tuple[Hook, ...] = (
    Hook(
        name="zygote",
        does="runs forked from a warm ansible-playbook",
        spots=(
            Spot("ansible.cli.playbook:PlaybookCLI.cli_executor", "called in the forked run"),
            Spot("ansible.plugins.loader:init_plugin_loader", "loaders warmed before the fork"),
            Spot("ansible.plugins.loader:action_loader", "actions resolved at warm-up"),
            Spot(
                "ansible.plugins.loader:inventory_loader",
                "the enabled inventory plugins loaded by name at warm-up",
            ),
            Spot(
                "ansible.plugins.loader:PluginLoader._load_config_defs",
                "wrapped: documentation without options parsed once",
            ),
            Spot("ansible.plugins.loader:get_plugin_class", "a plugin type's name"),
            Spot("ansible.constants:CONFIGURABLE_PLUGINS", "which types have options"),
            Spot("ansible.constants:INVENTORY_ENABLED", "the inventory plugins a run loads"),
            Spot(
                "ansible.config.manager:ConfigManager.has_configuration_definition",
                "whether a plugin registered options",
            ),
            Spot("ansible.plugins.loader:module_loader", "modules resolved at warm-up"),
            Spot("ansible.vars.plugins:_prime_vars_loader", "primed at warm-up"),
            Spot("ansible.plugins.loader:vars_loader", "reset per run, as a new process has it"),
            Spot("ansible.plugins.loader:vars_loader#_plugin_instance_cache", "emptied per run"),
            Spot("ansible.plugins.loader:vars_loader#_paths", "unset per run: primed again"),
            Spot("ansible.constants:set_constant", "per-run settings recomputed from config"),
            Spot("ansible.config.manager:ensure_type", "each run's DEFAULT_LOCAL_TMP"),
            Spot("ansible.utils.display:Display._set_column_width", "called per run"),
            Spot("ansible.utils.display:Display#_deprecations", "cleared per run"),
            Spot("ansible.utils.display:Display#_warns", "cleared per run"),
            Spot("ansible.utils.display:Display#_errors", "cleared per run"),
            Spot("ansible.utils.display:_synchronize_textiowrapper", "the run's terminal stdio"),
            Spot("ansible.utils.display:Display#_lock", "what that stdio is synchronized on"),
            Spot("ansible.utils.color", "reloaded in each run: stdout is a terminal"),
            Spot(
                "ansible_runner.display_callback.callback.awx_display:EventContext",
                "renewed per run, with a uuid of its own until the callbacks are loaded",
            ),
            Spot(
                "ansible_runner.display_callback.callback.awx_display:display_with_context",
                "writes plain output while the event context has a uuid",
            ),
            Spot(
                "ansible.executor.task_queue_manager:TaskQueueManager.load_callbacks",
                "wrapped: the event context's own uuid taken away",
            ),
        ),
        tested=_BOTH,
        backends=("fast",),
    ),
    Hook(
        name="inline",
        does="tasks executed in the run's process",
        spots=(
            Spot(
                "ansible.executor.task_queue_manager:TaskQueueManager.__init__",
                "wrapped: its callback lock kept",
            ),
            Spot(
                "ansible.executor.task_queue_manager:TaskQueueManager#_callback_lock",
                "held while a module runs in process (callback_lock)",
            ),
            Spot(f"{_WORKER}.start", "replaced: the task runs in the run's process"),
            *(
                Spot(f"{_WORKER}#{name}", "handed to TaskExecutor as the worker's run does")
                for name in (
                    "_task",
                    "_host",
                    "_task_vars",
                    "_play_context",
                    "_loader",
                    "_shared_loader_obj",
                    "_final_q",
                    "_variable_manager",
                )
            ),
            Spot(f"{_WORKER}._save_stdin", "the worker's stdin, opened as a fork would", ("2.18",)),
            Spot(f"{_WORKER}#_new_stdin", "that stdin, closed after the task", ("2.18",)),
            Spot("ansible.executor.task_executor:TaskExecutor.run", "called as a worker does"),
            Spot("ansible.playbook.task:Task#_uuid", "the task's id in the result sent", ("2.18",)),
            Spot("ansible.executor.task_result:TaskResult", "what a worker sends", ("2.18",)),
            Spot("ansible.executor.task_result:_RawTaskResult", "what a worker sends", ("2.19",)),
            Spot(
                "ansible.executor.task_queue_manager:FinalQueue.send_task_result",
                "builds what a task's result puts on the queue (called on DirectQueue)",
            ),
            Spot(
                "ansible.executor.task_queue_manager:FinalQueue.send_callback",
                "builds what a loop item's callback puts on the queue (called on DirectQueue)",
            ),
            Spot(
                "ansible.plugins.strategy:StrategyBase.__init__",
                "wrapped: the strategy whose results DirectQueue adds to",
            ),
            Spot(
                "ansible.plugins.strategy:results_thread_main",
                "called per item put on DirectQueue, in the run's thread",
            ),
            Spot("ansible.plugins.strategy:StrategySentinel", "ends that call"),
            Spot(
                "multiprocessing.reduction:ForkingPickler",
                "the copy the queue's pipe makes, made by DirectQueue",
            ),
            Spot(
                "ansible.playbook.task:Task.copy",
                "exclude_tasks=True: parent blocks copied without their task lists",
            ),
            Spot(
                "ansible.executor.process.worker:WorkerQueue",
                "replaced by one made when first used (a forked worker's prompts only)",
            ),
        ),
        tested=_BOTH,
        backends=("fast",),
    ),
    Hook(
        name="modexec",
        does="modules run in a fork or in process, temp-dir commands without a shell",
        spots=(
            Spot(
                "ansible.plugins.connection.local:Connection.exec_command",
                "replaced: modules forked or in process, temp-dir commands answered",
            ),
            Spot(
                "ansible.plugins.connection:ConnectionBase#_play_context",
                "a command's host (for the display) and shell executable",
            ),
            Spot(
                "ansible.plugins.connection:ConnectionBase.is_pipelining_enabled",
                "pipelining on for the local connection",
                ("2.19",),
            ),
            Spot(
                "ansible.plugins.action:ActionBase._is_pipelining_enabled",
                "pipelining on for the local connection",
                ("2.18",),
            ),
            Spot(
                "ansible.plugins.action:ActionBase#_connection",
                "whether the action's connection is the local one",
                ("2.18",),
            ),
            Spot(
                "ansible.plugins.shell.sh:ShellModule",
                "its mkdtemp / rm / expand_user commands, recognized exactly (localshell.py)",
            ),
            Spot(
                f"{_MODULE_COMMON}:_find_module_utils",
                "the AnsiballZ wrapper it writes, read by modcommand.parse_wrapper",
            ),
            *(
                Spot(
                    f"ansible.module_utils._internal:{name}",
                    "switched to a target's while a module runs in process (inprocess.py)",
                    ("2.19",),
                )
                for name in (
                    "is_controller",
                    "get_controller_serialize_map",
                    "import_controller_module",
                )
            ),
            Spot("ansible.module_utils.basic:_ANSIBLE_ARGS", "a module's arguments in process"),
            Spot("ansible.module_utils.basic:_ANSIBLE_PROFILE", "restored after it", ("2.19",)),
            Spot("ansible.module_utils.common.warnings:_global_warnings", "emptied per module"),
            Spot("ansible.module_utils.common.warnings:_global_deprecations", "emptied per module"),
        ),
        tested=_BOTH,
        backends=("fast",),
        helpers=("inprocess.py", "localshell.py", "modcommand.py"),
    ),
    Hook(
        name="direct",
        does="Kubernetes modules run without an AnsiballZ payload",
        spots=(
            Spot(
                f"{_MODULE_COMMON}:_find_module_utils",
                "wrapped: a small program instead of the payload (builder.py binds each line)",
            ),
            Spot(f"{_MODULE_COMMON}:_get_shebang"),
            Spot(f"{_MODULE_COMMON}:_extract_interpreter"),
            Spot(f"{_MODULE_COMMON}:_get_ansible_module_fqn"),
            Spot(f"{_MODULE_COMMON}:_is_binary", "a binary module keeps its payload"),
            Spot(f"{_MODULE_COMMON}:_BuiltModule", "what the builder returns", ("2.19",)),
            Spot(f"{_MODULE_COMMON}:_compile_module_ast", "a module's profile", ("2.19",)),
            Spot(f"{_MODULE_COMMON}:_get_module_metadata", lines=("2.19",)),
            Spot(
                "ansible.template:Templar#_engine",
                "templates the file-limit setting as the builder does",
                ("2.19",),
            ),
            Spot(
                f"{_COLLECTION_FINDER}:_AnsibleCollectionFinder._n_collection_paths",
                "the controller's collection paths, handed to the program",
            ),
            Spot(
                f"{_COLLECTION_FINDER}:_AnsibleCollectionFinder._install",
                "the program installs the collection finder as the AnsiballZ wrapper does",
            ),
            Spot(
                "ansible._internal._ansiballz._builder:ExtensionManager",
                "debugger and coverage extensions",
                ("2.19",),
            ),
            Spot(
                "ansible.module_utils._internal._ansiballz._loader:run_module",
                "what the program calls, as the AnsiballZ wrapper does",
                ("2.19",),
            ),
            Spot(
                f"{_MODULE_COMMON}:ACTIVE_ANSIBALLZ_TEMPLATE",
                "the wrapper's runpy.run_module call, which the program makes",
                ("2.18",),
            ),
        ),
        tested=_BOTH,
        backends=("fast",),
        helpers=("builder.py",),
    ),
    Hook(
        name="payloads",
        does="module payloads shared between runs",
        spots=(
            Spot(
                f"{_MODULE_COMMON}:_find_module_utils",
                "wrapped: payloads kept in a store shared between runs, beside its cache"
                " <DEFAULT_LOCAL_TMP>/ansiballz_cache/<fqn>-<compression>[-<extensions>]",
            ),
            Spot(f"{_MODULE_COMMON}:recursive_finder", "the zip it writes to"),
            Spot(
                "ansible.plugins.loader:module_utils_loader._get_paths",
                "its search paths, part of a payload's key",
            ),
            *(
                Spot(
                    f"{_MODULE_COMMON}:{locator}._find_module",
                    "wrapped: the module_utils file it found",
                    ("2.18",),
                )
                for locator in ("LegacyModuleUtilLocator", "CollectionModuleUtilLocator")
            ),
            Spot(
                f"{_MODULE_COMMON}:LegacyModuleUtilLocator#_info",
                "its origin: that file",
                ("2.18",),
            ),
            Spot(
                f"{_MODULE_COMMON}:ModuleUtilLocatorBase._handle_redirect",
                "wrapped: a redirect's shim is made, not read from a file",
                ("2.18",),
            ),
            Spot(
                "ansible.plugins.callback:CallbackBase#_display",
                "the callback plugin's warning when it cannot install",
            ),
            Spot(
                "ansible._internal._datatag._tags:Origin",
                "the file each module_utils source came from",
                ("2.19",),
            ),
        ),
        tested=_BOTH,
        backends=("fast", "runner"),
        helpers=("builder.py", "callback_plugins/ansible_operator_payloads.py"),
    ),
    Hook(
        name="warmrole",
        does="webhook tasks run in a warm process per webhook",
        spots=(
            Spot("ansible.cli:CLI.run", "parses a full run's command line, inits the loader"),
            Spot("ansible.cli:CLI._play_prereqs", "loader, inventory, variable manager"),
            Spot(
                "ansible.parsing.dataloader:DataLoader.set_vault_secrets",
                "a reload's new loader gets the first one's vault secrets",
            ),
            Spot("ansible.parsing.dataloader:DataLoader#_vault", "where those secrets are"),
            Spot("ansible.inventory.manager:InventoryManager", "a reload's inventory"),
            Spot("ansible.plugins.loader:add_all_plugin_dirs", "the playbook's plugin dirs"),
            Spot("ansible.utils.collection_loader:AnsibleCollectionConfig", "playbook paths"),
            Spot("ansible.playbook:Playbook.load"),
            Spot("ansible.playbook.role:Role#_role_path", "a role's files, watched for edits"),
            Spot("ansible.playbook.play:Play.compile", "the blocks, as PlayIterator gets them"),
            Spot("ansible.playbook.block:Block.filter_tagged_tasks"),
            Spot("ansible.playbook.task:Task.fattributes", "a task's keywords as written"),
            Spot("ansible.playbook.task:Task#_ds", "a task as written, checked by warmtasks.py"),
            Spot("ansible.playbook.block:Block#_ds", "a block as written"),
            Spot("ansible.playbook.block:Block#_implicit", "a block ansible-core made itself"),
            Spot("ansible.playbook.play:Play#_ds", "the play as written"),
            Spot(
                "ansible.playbook.base:FieldAttributeBase.post_validate_attribute",
                "the task's name, templated as the strategy does",
            ),
            Spot("ansible._internal._templating._engine:TemplateEngine"),
            Spot("ansible.vars.manager:VariableManager.get_vars", "a variable manager per request"),
            Spot("ansible.vars.manager:VariableManager#_extra_vars", "set from the request"),
            Spot("ansible.vars.manager:VariableManager.set_nonpersistent_facts"),
            Spot("ansible.vars.hostvars:HostVars", "binds itself to the variable manager"),
            Spot("ansible.playbook.play_context:PlayContext"),
            Spot("ansible.executor.task_executor:TaskExecutor.run", "called as a worker does"),
            Spot("ansible._internal._task:TaskContext", "around each task, as a worker"),
            Spot("ansible.plugins.loader:get_plugin_loader_namespace"),
            Spot(
                f"{_RAW_RESULT}.as_callback_task_result",
                "the result as the job event's callback gets it",
            ),
            Spot(f"{_RAW_RESULT}#_return_data", "a result's facts and registered value"),
            Spot(f"{_RAW_RESULT}#_loop_results", "a loop's item results, for their facts"),
            Spot(
                "ansible.playbook.task:Task#_parent", "a result's task rebuilt as a strategy does"
            ),
            Spot(
                "ansible.plugins.strategy:StrategyBase._process_pending_results",
                "what is done with each result, reproduced for the allowed tasks",
            ),
            Spot("ansible.vars.clean:strip_internal_keys", "a registered result"),
            Spot("ansible.vars.clean:module_response_deepcopy", "a registered result"),
            Spot("ansible.constants:_ACTION_SET_FACT"),
            Spot("ansible.constants:_ACTION_DEBUG"),
        ),
        tested=("2.19",),
        backends=("webhooks",),
        helpers=("warmtasks.py",),
    ),
    Hook(
        name="immutables",
        does="immutable variables not copied by deepcopy",
        spots=(
            Spot("copy:_deepcopy_dispatch", "the types below registered as atomic, as str is"),
            Spot("copy:_deepcopy_atomic"),
            *(
                Spot(f"ansible.module_utils._internal._datatag:{name}", lines=("2.19",))
                for name in (
                    "_AnsibleTaggedStr",
                    "_AnsibleTaggedBytes",
                    "_AnsibleTaggedInt",
                    "_AnsibleTaggedFloat",
                    "_AnsibleTaggedDate",
                    "_AnsibleTaggedTime",
                    "_AnsibleTaggedDateTime",
                )
            ),
            Spot(
                "ansible.module_utils._internal._datatag:AnsibleDatatagBase",
                "its frozen dataclass subclasses: the tags",
                ("2.19",),
            ),
            Spot("ansible.module_utils._internal._datatag._tags:Deprecated", lines=("2.19",)),
            Spot("ansible._internal._datatag._tags:Origin", lines=("2.19",)),
            Spot("ansible._internal._templating._datatag:_JinjaConstTemplate", lines=("2.19",)),
            Spot("ansible.utils.unsafe_proxy:AnsibleUnsafeText", lines=("2.18",)),
            Spot("ansible.utils.unsafe_proxy:AnsibleUnsafeBytes", lines=("2.18",)),
            Spot("ansible.utils.unsafe_proxy:NativeJinjaUnsafeText", lines=("2.18",)),
            Spot("ansible.utils.native_jinja:NativeJinjaText", lines=("2.18",)),
            Spot("ansible.parsing.yaml.objects:AnsibleUnicode", lines=("2.18",)),
            Spot(
                "ansible.plugins.lookup.template:LookupModule.run",
                "deep-copies the task's variables per file: the cost this cuts",
            ),
        ),
        tested=_BOTH,
        backends=("fast",),
    ),
    Hook(
        name="templates",
        does="Jinja templates compiled once per zygote",
        spots=(
            Spot("jinja2.environment:Environment.compile", "wrapped: compiled code kept"),
            Spot(
                "jinja2.environment:Environment.compile_expression",
                "wrapped: compiled code kept, the template made as from_string makes it",
            ),
            Spot("jinja2.environment:Environment._parse", "wrapped: the tree compiled"),
            Spot("jinja2.environment:Environment.from_string", "called with a kept code"),
            Spot("jinja2.environment:TemplateExpression"),
            Spot(
                "jinja2.nodes:_FilterTestCommon.as_const",
                "wrapped: a filter or test folded at compile time: not kept",
            ),
            Spot("jinja2.utils:_PassArg.from_obj", "how a filter is called, fixed at compile"),
            Spot(
                "ansible._internal._templating._jinja_bits:_TemplateCompileContext",
                "escape_backslashes: part of the key",
                ("2.19",),
            ),
            Spot(
                "ansible._internal._templating._jinja_bits:_TemplateConfig",
                "allow_embedded_templates: part of the key",
                ("2.19",),
            ),
            Spot(
                "ansible._internal._templating._jinja_bits:AnsibleEnvironment._debuggable_template_source",
                "on: nothing kept",
                ("2.19",),
            ),
            Spot("ansible.template:AnsibleEnvironment", "optimized: folds filters", ("2.18",)),
        ),
        tested=_BOTH,
        backends=("fast",),
    ),
    Hook(
        name="events",
        does="job event data sent with the run's output, not in partial files",
        spots=(
            Spot(
                f"{_AWX_DISPLAY}:EventContext.dump_begin",
                "replaced: the event data goes into the output next to its uuid",
            ),
            Spot(f"{_AWX_DISPLAY}:EventContext.get_begin_dict", "the event data"),
            Spot(f"{_AWX_DISPLAY}:EventContext.dump", "how a message is written (reproduced)"),
            Spot(f"{_AWX_DISPLAY}:AnsibleJSONEncoderLocal", "the encoder of the partial file"),
            Spot(f"{_AWX_DISPLAY}:IsolatedFileWrite.set", "the partial file no longer written"),
            Spot(
                "ansible_runner.runner:Runner.event_callback",
                "gets the data merged as it merges a partial file (fastbackend/eventdata.py)",
            ),
            Spot("ansible_runner.utils:OutputEventFilter", "decodes the message as any"),
        ),
        tested=_BOTH,
        backends=("fast",),
    ),
    Hook(
        name="kubemodules",
        does="module code compiled once, discovery shared between CRs",
        spots=(
            Spot(
                f"{_COLLECTION_FINDER}:_AnsibleCollectionPkgLoaderBase.get_code",
                "wrapped: compiled once per file version",
            ),
            Spot(
                f"{_COLLECTION_FINDER}:_AnsibleCollectionPkgLoaderBase#_compiled_code",
                "set from what was compiled, as the real get_code sets it",
            ),
            Spot("kubernetes.config.kube_config:yaml", "kubeconfigs parsed with libyaml"),
            Spot(
                "ansible_collections.kubernetes.core.plugins.module_utils.client.discovery"
                ":Discoverer._Discoverer__get_default_cache_id",
                "the discovery cache named without the proxy's user info",
            ),
        ),
        tested=_BOTH,
        backends=("fast",),
    ),
    Hook(
        name="preview",
        does="a plan skips the tasks it cannot preview",
        spots=(
            Spot(
                "ansible.executor.task_executor:TaskExecutor"
                "._get_action_handler_with_module_context",
                "wrapped: called after the task's `when`, before its action runs",
            ),
            Spot(
                "ansible.executor.task_executor:TaskExecutor._execute_internal",
                "wrapped: a stopped task's result is a skip",
                ("2.19",),
            ),
            Spot(
                "ansible.executor.task_executor:TaskExecutor._execute",
                "wrapped: a stopped task's result is a skip",
                ("2.18",),
            ),
            Spot(
                "ansible.playbook.task:Task.resolved_action",
                "the task's action (2.18: an attribute of each task)",
                ("2.19",),
            ),
        ),
        tested=_BOTH,
        backends=("plan",),
        helpers=("previewactions.py", "preview_callback/ansible_operator_plan.py"),
    ),
)

BACKEND_HOOKS: tuple[Hook, ...] = tuple(
    hook for hook in HOOKS if {"fast", "runner"} & set(hook.backends)
)
"""The hooks the Ansible backends run with (the support check of `version`)."""

_BY_NAME = {hook.name: hook for hook in HOOKS}
_LINE = re.compile(r"(\d+)\.(\d+)")


def core_line(version: str) -> str | None:
    """`major.minor` of an ansible-core version (`2.18.19` -> `2.18`), None if unreadable."""
    found = _LINE.match(version.strip())
    return f"{found[1]}.{found[2]}" if found else None


def installed_core_version() -> str | None:
    """The ansible-core installed with this interpreter (its package metadata), or None."""
    try:
        return metadata.version("ansible-core")
    except metadata.PackageNotFoundError:
        return None


def running_core_version() -> str | None:
    """The version of the ansible-core this process imports (for the hooks themselves,
    which run inside ansible-playbook)."""
    try:
        from ansible.release import __version__
    except ImportError:
        return None
    return str(__version__)


@dataclass(frozen=True)
class Plan:
    """Which hooks take part with one ansible-core version (see `plan`)."""

    core_version: str | None
    enabled: tuple[Hook, ...]
    left_out: tuple[Hook, ...]

    def uses(self, name: str) -> bool:
        return any(hook.name == name for hook in self.enabled)

    def warning(self, backend: str) -> str | None:
        """One message saying which hooks `backend` runs without and why; None if none."""
        missing = [hook for hook in self.left_out if backend in hook.backends]
        if not missing:
            return None
        found = self.core_version or "no ansible-core"
        lines = sorted({line for hook in missing for line in hook.tested}, key=_line_key)
        left = "; ".join(f"{hook.name} ({hook.does})" for hook in missing)
        fallback = (
            "runs go through plain ansible-runner"
            if backend == "fast" and not self.uses("zygote")
            else "those steps run the plain ansible-runner way"
        )
        return (
            f"ansible-core {found} is not a version the {backend} backend's ansible-core"
            f" hooks were tested with (ansible-core {', '.join(lines)}): left out: {left};"
            f" {fallback} (same results, slower)"
        )


def plan(core_version: str | None, *, hooks: Iterable[Hook] = HOOKS) -> Plan:
    """The hooks tested with `core_version` (enabled) and the others (left out)."""
    line = core_line(core_version) if core_version else None
    enabled_hooks: list[Hook] = []
    left_out: list[Hook] = []
    for hook in hooks:
        (enabled_hooks if line is not None and line in hook.tested else left_out).append(hook)
    return Plan(core_version=core_version, enabled=tuple(enabled_hooks), left_out=tuple(left_out))


def enabled(name: str, core_version: str | None = None) -> bool:
    """Whether hook `name` was tested with `core_version` (default: the running one)."""
    hook = _BY_NAME[name]
    version = core_version if core_version is not None else running_core_version()
    line = core_line(version) if version else None
    return line is not None and line in hook.tested


def tested_lines(hooks: Collection[Hook] = HOOKS) -> tuple[str, ...]:
    """The ansible-core lines every one of `hooks` was tested with."""
    common = set.intersection(*(set(hook.tested) for hook in hooks)) if hooks else set()
    return tuple(sorted(common, key=_line_key))


def _line_key(line: str) -> tuple[int, ...]:
    return tuple(int(part) for part in line.split("."))
