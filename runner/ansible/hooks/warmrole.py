"""The `warmrole` hook: a webhook's play loaded once, its tasks run per request in process.

A webhook answers in tens of milliseconds only if a request does not pay for a whole
ansible-playbook (a fork, the CLI, the inventory, loading the play, callbacks). A warm
runner process (`runner/ansible/warm/warmprocess.py`) does what ansible-playbook does up to
the first task once — the command line of a full run parsed into `context.CLIARGS`, the
same inventory file, the playbook (for a role, the same wrapper play) loaded and
compiled — and then, per request, what ansible-playbook's linear strategy and a worker
do for each task, on one host, with ansible-core's own parts:

- a fresh `VariableManager` per request, its extra-vars loaded from the request's JSON
  file exactly as `-e @file` loads them (trusted as templates), so nothing of one
  request (facts, registered results) is seen by the next;
- per task: `VariableManager.get_vars` (play, role defaults and vars, block and task
  vars, facts, extra-vars: the usual precedence) plus the strategy's tqm variables, the
  name templated as the strategy does, then a copy of the task run by `TaskExecutor`
  inside a `TaskContext` as a worker runs it (`when`, `failed_when`, `changed_when`,
  `no_log`, the action plugin);
- the result handled as `StrategyBase._process_pending_results` handles it for these
  tasks: the task rebuilt from the worker's fields, a failure stops the host unless
  ignored, `set_fact` facts and `register` results become non-persistent facts, the stats
  counted; and reported as the job events the full run's `awx_display` callback sends
  (`runner_on_ok` / `_failed` / `_skipped` with the callback's censored copy of the
  result, then `playbook_on_stats`), so the operator turns them into an answer with the
  same code as a full run's events.

Which plays qualify is decided at each load (`warmtasks.why_not_warm`: controller-side,
side-effect free tasks only); the others keep full runs. The spots are listed under
`warmrole` in `runner.ansible.hooks.HOOKS`; only ansible-core 2.19 was checked.
"""

from __future__ import annotations

import os
import pickle
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from runner.ansible.hooks import warmtasks

__all__ = ["Decision", "WarmPlay", "prepare"]

_HOST = "localhost"
_cli: list[Any] = []
"""The parsed `PlaybookCLI` of this process (`prepare`)."""
_vault_secrets: list[Any] = []
"""The vault secrets its first load set up."""


@dataclass(frozen=True)
class Decision:
    """Whether the loaded play runs warm, and if not why."""

    warm: bool
    why: str = ""


def prepare(playbook: str, inventory: str, verbosity: int) -> None:
    """Parse the command line a full run has (`ansible-playbook -i <hosts> [-v...]
    <playbook>`) into ansible-core's global context, once per process, and set up the
    plugin loader and playbook-adjacent plugin directories as `PlaybookCLI.run` does."""
    from ansible.cli import CLI
    from ansible.cli.playbook import PlaybookCLI
    from ansible.plugins.loader import add_all_plugin_dirs
    from ansible.utils.collection_loader import AnsibleCollectionConfig

    argv = ["ansible-playbook", "-i", inventory]
    if verbosity > 0:
        argv.append("-" + "v" * verbosity)
    cli = PlaybookCLI([*argv, playbook])
    CLI.run(cli)  # parse() and init_plugin_loader(), as PlaybookCLI.run starts
    playbook_dir = os.path.dirname(os.path.abspath(playbook)).encode()
    add_all_plugin_dirs(playbook_dir)
    AnsibleCollectionConfig.playbook_paths = [playbook_dir]
    _cli[:] = [cli]


def _prereqs() -> tuple[Any, Any, Any]:
    """`CLI._play_prereqs()` the first time; later (a reload) the same with the vault
    secrets it set up (they are set up once per process) and a new loader, so that no
    file is read from the old one's cache."""
    from ansible import context
    from ansible.cli import CLI
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    if not _vault_secrets:
        loader, inventory, variable_manager = _cli[0]._play_prereqs()
        _vault_secrets[:] = [loader._vault.secrets]
        return loader, inventory, variable_manager
    loader = DataLoader()
    loader.set_vault_secrets(_vault_secrets[0])
    inventory = InventoryManager(
        loader=loader,
        sources=context.CLIARGS["inventory"],
        cache=not context.CLIARGS.get("flush_cache"),
    )
    variable_manager = VariableManager(
        loader=loader, inventory=inventory, version_info=CLI.version_info(gitinfo=False)
    )
    return loader, inventory, variable_manager


class _NoQueue:
    """The final queue a worker would have. The allowed tasks send only a loop's item
    results through it, which reach only callbacks (a full run's `runner_item_on_*`
    events, which no answer and no log line is made of); anything else (retries, async,
    prompts) fails the request instead of being guessed at."""

    used: str = ""

    def _record(self, name: str) -> None:
        self.used = self.used or name

    def send_callback(self, method_name: str = "", *args: Any, **kwargs: Any) -> None:
        if not str(method_name).startswith("v2_runner_item_on_"):
            self._record(f"send_callback {method_name}")

    def send_display(self, *args: Any, **kwargs: Any) -> None:
        self._record("send_display")

    def send_prompt(self, **kwargs: Any) -> None:
        self._record("send_prompt")


class WarmPlay:
    """One playbook (a role's wrapper play or the webhook's playbook), loaded."""

    def __init__(self, playbook: str) -> None:
        self._playbook = playbook
        self._fingerprint: tuple[Any, ...] = ()
        self._roots: list[str] = []
        self.decision = Decision(False, "not loaded")
        self._loader: Any = None
        self._inventory: Any = None
        self._play: Any = None
        self._host: Any = None
        self._tasks: list[Any] = []

    def changed(self) -> bool:
        """Whether a file of the play (the playbook, its roles' directories) changed
        since it was loaded."""
        return _fingerprint(self._roots) != self._fingerprint

    def load(self) -> Decision:
        """(Re)load the play; whether it runs warm. A play that cannot be loaded is left
        to full runs, which report its error."""
        self._roots = [self._playbook]
        self._fingerprint = _fingerprint(self._roots)
        try:
            self.decision = self._load()
        except Exception as exc:
            self.decision = Decision(False, f"it does not load ({type(exc).__name__}: {exc})")
        self._fingerprint = _fingerprint(self._roots)
        return self.decision

    def _load(self) -> Decision:
        from ansible import constants
        from ansible._internal._templating._engine import TemplateEngine
        from ansible.playbook import Playbook
        from ansible.utils.collection_loader import AnsibleCollectionConfig

        loader, inventory, variable_manager = _prereqs()
        AnsibleCollectionConfig.default_collection = None
        plays = Playbook.load(
            self._playbook, variable_manager=variable_manager, loader=loader
        ).get_plays()
        if len(plays) != 1:
            return Decision(False, f"{len(plays)} plays (one is run warm)")
        play = plays[0]
        roles = _all_roles(play)
        self._roots = [self._playbook, *sorted({role._role_path for role in roles})]
        # What PlaybookExecutor and TaskQueueManager.run do before the first task.
        inventory.remove_restriction()
        templar = TemplateEngine(loader=loader, variables=variable_manager.get_vars(play=play))
        play.post_validate(templar)
        play = play.copy()
        play.post_validate(
            TemplateEngine(loader=loader, variables=variable_manager.get_vars(play=play))
        )
        hosts = inventory.get_hosts(play.hosts, order=play.order)
        if [host.name for host in hosts] != [_HOST]:
            return Decision(
                False, f"the play's hosts are {[h.name for h in hosts]}, not [localhost]"
            )
        gathers = (
            play.gather_facts
            if play.gather_facts is not None
            else constants.DEFAULT_GATHERING != "explicit"
        )
        if gathers:
            return Decision(False, "the play gathers facts")
        all_vars = variable_manager.get_vars(play=play)
        blocks = [block.filter_tagged_tasks(all_vars) for block in play.compile()]
        shapes: list[warmtasks.Shape] = [_play_shape(play)]
        tasks: list[Any] = []
        for block in blocks:
            if block.has_tasks():
                for item in _walk(block):
                    shape = _shape(item)
                    shapes.append(shape)
                    if shape.kind == "task" and not shape.implicit:
                        tasks.append(item)
        variables = [("the play's vars", play.vars)]
        for role in roles:
            variables.append((f"role {role.get_name()} defaults", role.get_default_vars()))
            variables.append((f"role {role.get_name()} vars", role.get_vars(include_params=True)))
        why = warmtasks.why_not_warm(shapes, variables=variables)
        if why is not None:
            return Decision(False, why)
        self._loader, self._inventory, self._play = loader, inventory, play
        self._host = hosts[0]
        self._tasks = tasks
        return Decision(True)

    def run(self, extravars_file: str) -> list[dict[str, Any]]:
        """Run the tasks with the extra-vars in `extravars_file` (JSON); the job events a
        full run's callback would send for them (see the module docstring)."""
        from ansible._internal import _task
        from ansible._internal._templating._engine import TemplateEngine
        from ansible.cli import CLI
        from ansible.executor.task_executor import TaskExecutor
        from ansible.executor.task_result import _RawTaskResult
        from ansible.playbook.play_context import PlayContext
        from ansible.plugins import loader as plugin_loader
        from ansible.vars.hostvars import HostVars
        from ansible.vars.manager import VariableManager

        if not self.decision.warm:
            raise RuntimeError("the play is not warm")
        loader, host, play = self._loader, self._host, self._play
        variables = VariableManager(
            loader=loader, inventory=self._inventory, version_info=CLI.version_info(gitinfo=False)
        )
        extra = loader.load_from_file(extravars_file, cache="none", trusted_as_template=True)
        if not isinstance(extra, Mapping):
            raise ValueError("the extra-vars are not a mapping")
        variables._extra_vars = extra
        HostVars(inventory=self._inventory, variable_manager=variables, loader=loader)
        play_context = PlayContext(play, {}, None)
        hosts = [host.name]
        stats: Counter[str] = Counter()
        events: list[dict[str, Any]] = []
        for task in self._tasks:
            task_vars = variables.get_vars(
                play=play, host=host, task=task, _hosts=hosts, _hosts_all=hosts
            )
            task_vars["ansible_current_hosts"] = list(hosts)
            task_vars["ansible_failed_hosts"] = []
            # The strategy templates the queued task's name, the worker runs a copy of
            # it: templating the copy's name is the same (the original stays as loaded).
            worker_task = task.copy()
            worker_task.post_validate_attribute(
                "name", templar=TemplateEngine(loader=loader, variables=task_vars)
            )
            queue = _NoQueue()
            with _task.TaskContext(worker_task):
                data = TaskExecutor(
                    host,
                    worker_task,
                    task_vars,
                    play_context,
                    loader,
                    plugin_loader.get_plugin_loader_namespace(),
                    queue,
                    variables,
                ).run()
            if queue.used:
                raise RuntimeError(f"the task used the worker queue ({queue.used})")
            fields = worker_task.dump_attrs()
            # What the worker queue does to the result (it is pickled across) and how the
            # strategy rebuilds the task from the worker's fields.
            data = pickle.loads(pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
            result_task = task.copy(exclude_parent=True, exclude_tasks=True)
            result_task._parent = task._parent
            result_task.from_attrs(fields)
            raw = _RawTaskResult(host=host, task=result_task, return_data=data, task_fields=fields)
            if not self._handle(raw, variables, stats, events):
                break
        events.append({"event": "playbook_on_stats", "event_data": _stats(stats)})
        return events

    def _handle(
        self, raw: Any, variables: Any, stats: Counter[str], events: list[dict[str, Any]]
    ) -> bool:
        """`StrategyBase._process_pending_results` for one result of an allowed task;
        False when the host failed (the play stops for it)."""
        from ansible import constants
        from ansible.vars.clean import module_response_deepcopy, strip_internal_keys

        task, name = raw.task, raw.host.name
        go_on = True
        if raw.is_failed():
            ignore_errors = task.ignore_errors
            if not ignore_errors:
                stats["failures"] += 1
                go_on = False
            else:
                stats["ok"] += 1
                stats["ignored"] += 1
                if raw.is_changed():
                    stats["changed"] += 1
            events.append(_event("runner_on_failed", raw, ignore_errors=bool(ignore_errors)))
        elif raw.is_unreachable():
            raise RuntimeError("a controller-side task reported its host unreachable")
        elif raw.is_skipped():
            stats["skipped"] += 1
            events.append(_event("runner_on_skipped", raw))
        else:
            # A loop's facts come from each item's result, as the strategy takes them.
            items = raw._loop_results if task.loop else [raw._return_data]
            for result in items:
                if "ansible_facts" not in result or task.action in constants._ACTION_DEBUG:
                    continue
                result.pop("_ansible_facts_cacheable", False)
                if task.action not in constants._ACTION_SET_FACT:
                    raise RuntimeError(f"{task.action} returned facts")
                variables.set_nonpersistent_facts(name, result["ansible_facts"].copy())
            stats["ok"] += 1
            if raw.is_changed():
                stats["changed"] += 1
            events.append(_event("runner_on_ok", raw))
        if task.register:
            clean = strip_internal_keys(module_response_deepcopy(raw._return_data))
            clean.pop("invocation", None)
            variables.set_nonpersistent_facts(name, {task.register: clean})
        return go_on


_CENSORED = (
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
)


def _event(kind: str, raw: Any, **extra: Any) -> dict[str, Any]:
    """A job event as `awx_display` reports it (the fields the operator reads): the
    callback's copy of the result, replaced whole when it is censored."""
    res = raw.as_callback_task_result().result
    if res.get("_ansible_no_log", False):
        res = {"censored": _CENSORED}
    task = raw.task
    data = {
        "host": raw.host.get_name(),
        "task": task.name or task.action,
        "task_action": task.action,
        "res": res,
        **extra,
    }
    return {"event": kind, "event_data": data}


def _stats(counts: Counter[str]) -> dict[str, Any]:
    keys = ("ok", "failures", "skipped", "changed", "ignored", "rescued", "dark")
    stats: dict[str, Any] = {key: {_HOST: counts[key]} if counts[key] else {} for key in keys}
    stats["processed"] = {_HOST: 1}
    return stats


def _all_roles(play: Any) -> list[Any]:
    roles: list[Any] = []
    for role in play.get_roles():
        for found in [*role.get_all_dependencies(), role]:
            if found not in roles:
                roles.append(found)
    return roles


def _walk(block: Any) -> Iterator[Any]:
    """The block (unless ansible-core made it implicitly), its nested blocks and tasks,
    in order; `rescue` and `always` too, so that the rules see them."""
    from ansible.playbook.block import Block

    if not getattr(block, "_implicit", False) and isinstance(getattr(block, "_ds", None), Mapping):
        yield block
    for item in [*block.block, *block.rescue, *block.always]:
        if isinstance(item, Block):
            yield from _walk(item)
        else:
            yield item


def _play_shape(play: Any) -> warmtasks.Shape:
    data = getattr(play, "_ds", None)
    data = data if isinstance(data, Mapping) else {}
    keys = frozenset(key for key in data if key not in ("hosts",)) | {"hosts"}
    return warmtasks.Shape(where="the play", kind="play", keys=keys, data=data)


def _shape(item: Any) -> warmtasks.Shape:
    from ansible.playbook.block import Block
    from ansible.playbook.task import Task

    data = getattr(item, "_ds", None)
    data = data if isinstance(data, Mapping) else {}
    where = item.get_path() or item.get_name() or "a task"
    if isinstance(item, Block):
        keys = frozenset(data)
        if item.rescue:
            keys |= {"rescue"}
        if item.always:
            keys |= {"always"}
        return warmtasks.Shape(where=where, kind="block", keys=keys, data=data)
    attributes = set(Task.fattributes)
    keys = frozenset(str(k) for k in data if k in attributes or str(k).startswith("with_"))
    action = str(getattr(item, "resolved_action", None) or item.action or "")
    return warmtasks.Shape(
        where=where,
        kind="task",
        keys=keys,
        action=action,
        args=dict(item.args or {}),
        data=data,
        implicit=bool(item.implicit),
    )


def _fingerprint(roots: list[str]) -> tuple[Any, ...]:
    """(path, mtime, size) of every file and directory under `roots`."""
    found: list[tuple[str, int, int]] = []
    for root in roots:
        _scan(root, found)
    return tuple(found)


def _scan(path: str, found: list[tuple[str, int, int]]) -> None:
    try:
        info = os.stat(path)
    except OSError:
        found.append((path, -1, -1))
        return
    found.append((path, info.st_mtime_ns, info.st_size))
    if not os.path.isdir(path):
        return
    try:
        entries = sorted(os.scandir(path), key=lambda entry: entry.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=True):
            _scan(entry.path, found)
        else:
            try:
                stat = entry.stat()
            except OSError:
                continue
            found.append((entry.path, stat.st_mtime_ns, stat.st_size))
