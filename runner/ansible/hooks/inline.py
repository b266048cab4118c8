"""Tasks executed in the run's own process, not in a forked worker each.

ansible-playbook hands every task to a `WorkerProcess`: a fork of the controller that
runs the `TaskExecutor` (templating, the action plugin, the module) and sends the result
back over the final queue. Forking a large Python process and faulting its pages back
in, then pickling the result across, costs 10-15 ms a task, and every task starts with
cold caches (compiled templates, plugin options). A run of the fast backend is already
a process of its own, forked from the zygote for this one run and gone after it, so
its tasks can run in it: `install()` makes `WorkerProcess.start` execute the task right
there, the way the worker would, and send the result through the same final queue — so
the strategy, the callbacks and the job events see exactly what a worker would send.

What the worker did that matters here is kept: the `TaskExecutor` gets its own copy of
the task (the worker had a forked one; post-validation templates it and its parent
blocks in place), the task runs inside ansible-core's `TaskContext`, and the result
carries the task's fields as the worker dumped them. What a worker needed only because
it was another process is left out: proxying the display over the queue, detaching
from the terminal, forwarding signals. Isolation between CRs is the zygote's: each run
is a fresh fork.

Three things are cheaper than their literal equivalent, with the same outcome:

- The copy of the task copies its parent blocks without their task lists
  (`exclude_tasks=True`, as ansible-core's loops copy a task per item): `Task.copy()`
  would copy every other task of the enclosing block too, on every task — a third of
  a run's time in a role whose included files hold 20-40 tasks. Nothing that runs a task
  reads the lists of its parent blocks (the strategy and the play iterator keep
  their own, uncopied blocks).
- What the task sends on the final queue (its result, the callbacks of loop items and
  retries) is handled at once, in this thread, by ansible-core's own
  `results_thread_main`, on the copy the queue's pipe would have made (pickled and
  unpickled): the strategy finds the result in its results when it looks, instead of
  polling every millisecond until its results thread has read it from the pipe, and
  the callbacks run in the order the task sent them, before the task's own result, as
  they did.
- The queue each `WorkerProcess` makes for the answers to a forked worker's prompts (a
  multiprocessing queue: a pipe, a lock, a semaphore; 0.1-0.2 ms a task) is made when
  first used, which a task run in this process never does.

Modules are not run by this: the `local` connection forks them or, for the direct
Kubernetes modules, runs them in process (`modexec`), which needs `callback_lock()`:
callbacks of loop items run in the strategy's results thread meanwhile.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["callback_lock", "in_task", "install"]

_state = threading.local()
_callback_locks: list[Any] = []
"""The callback lock of the run's task queue manager (one per ansible-playbook run)."""
_task_context = [True]
"""Whether this ansible-core runs tasks in a `TaskContext` (2.19; set by `install`)."""
_strategies: list[Any] = []
"""The strategy of the play being run (the one whose `_queue_task` starts workers)."""
_queue_parts: list[Any] = []
"""ansible-core's `FinalQueue`, `results_thread_main` and `StrategySentinel`, and the
pickler multiprocessing queues use (set by `install`)."""


def install() -> None:
    """Run tasks in the calling process (the run's ansible-playbook) from now on."""
    from multiprocessing.reduction import ForkingPickler

    from ansible.executor.process import worker
    from ansible.executor.process.worker import WorkerProcess
    from ansible.executor.task_queue_manager import FinalQueue, TaskQueueManager
    from ansible.plugins.strategy import StrategyBase, StrategySentinel, results_thread_main

    if getattr(WorkerProcess, "_runner_inline", False):
        return
    _task_context[0] = _has_task_context()
    if not _task_context[0] and not hasattr(WorkerProcess, "_save_stdin"):
        raise AttributeError("WorkerProcess has neither TaskContext (2.19) nor _save_stdin (2.18)")
    for name in ("send_callback", "send_task_result"):
        if not callable(getattr(FinalQueue, name, None)):
            raise AttributeError(f"FinalQueue has no {name}")
    _queue_parts[:] = [FinalQueue, results_thread_main, StrategySentinel, ForkingPickler]
    real_init = TaskQueueManager.__init__
    real_strategy_init = StrategyBase.__init__

    def tqm_init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        _callback_locks[:] = [self._callback_lock]

    def strategy_init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_strategy_init(self, *args, **kwargs)
        _strategies[:] = [self]

    def start(self: Any) -> None:
        _run_here(self)

    real_worker_queue = worker.WorkerQueue

    class WorkerQueue:
        """A worker's queue for the answers to its prompts, made when first used: a
        task run in this process prompts directly, never through it."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._made: Any = None
            self._arguments = (args, kwargs)

        def __getattr__(self, name: str) -> Any:
            if name.startswith("__") or name in ("_made", "_arguments"):
                raise AttributeError(name)
            if self._made is None:
                args, kwargs = self._arguments
                self._made = real_worker_queue(*args, **kwargs)
            return getattr(self._made, name)

    TaskQueueManager.__init__ = tqm_init
    StrategyBase.__init__ = strategy_init
    worker.WorkerQueue = WorkerQueue
    WorkerProcess.start = start
    WorkerProcess._runner_inline = True


def in_task() -> bool:
    """Whether the calling thread is executing a task in process (see `install`)."""
    return bool(getattr(_state, "depth", 0))


@contextlib.contextmanager
def callback_lock() -> Iterator[None]:
    """Hold off the callbacks the results thread would run meanwhile (a no-op when there
    is no task queue manager)."""
    lock = _callback_locks[0] if _callback_locks else None
    if lock is None:
        yield
        return
    with lock:
        yield


def _run_here(worker: Any) -> None:
    """What `WorkerProcess.run` does in the fork, done in this process."""
    from ansible.executor.task_executor import TaskExecutor

    task = worker._task.copy(exclude_tasks=True)
    queue = _direct_queue(worker._final_q)
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        if _task_context[0]:
            result = _run_2_19(worker, task, TaskExecutor, queue)
        else:
            result = _run_2_18(worker, task, TaskExecutor, queue)
    finally:
        _state.depth -= 1
    _send(worker, task, result, queue)


def _run_2_19(worker: Any, task: Any, executor: Any, queue: Any) -> Any:
    from ansible._internal import _task

    with _task.TaskContext(task):
        return executor(
            worker._host,
            task,
            worker._task_vars,
            worker._play_context,
            worker._loader,
            worker._shared_loader_obj,
            queue,
            worker._variable_manager,
        ).run()


def _run_2_18(worker: Any, task: Any, executor: Any, queue: Any) -> Any:
    """ansible-core 2.18's executor also takes the worker's stdin: the terminal's, else
    /dev/null (`WorkerProcess._save_stdin`)."""
    worker._save_stdin()
    try:
        return executor(
            worker._host,
            task,
            worker._task_vars,
            worker._play_context,
            worker._new_stdin,
            worker._loader,
            worker._shared_loader_obj,
            queue,
            worker._variable_manager,
        ).run()
    finally:
        worker._new_stdin.close()


def _send(worker: Any, task: Any, result: Any, queue: Any) -> None:
    if _task_context[0]:
        from ansible.executor.task_result import _RawTaskResult

        queue.send_task_result(
            _RawTaskResult(
                host=worker._host,
                task=task,
                return_data=result,
                task_fields=task.dump_attrs(),
            )
        )
    else:
        queue.send_task_result(worker._host.name, task._uuid, result, task_fields=task.dump_attrs())


def _direct_queue(final_q: Any) -> Any:
    """The final queue the task's executor gets: `DirectQueue` when the strategy queueing
    the task reads `final_q`, else `final_q` itself."""
    strategy = _strategies[0] if _strategies else None
    if strategy is None or getattr(strategy, "_final_q", None) is not final_q:
        return final_q
    return DirectQueue(strategy)


class DirectQueue:
    """The final queue in the run's own process: what is put on it is handled at once.

    `send_callback`, `send_task_result`, ... are ansible-core's own (`FinalQueue`'s),
    which build what goes on the queue and `put` it; `put` makes the copy the queue's
    pipe makes (ansible-core's queue pickles with multiprocessing's `ForkingPickler`) and
    hands it to ansible-core's `results_thread_main`, which does with it what the
    strategy's results thread does with what it reads (runs a callback, or adds a task's
    result to the strategy's results), then returns at the sentinel that follows it.
    """

    def __init__(self, strategy: Any) -> None:
        self._strategy = strategy

    def put(self, obj: Any) -> None:
        _final_queue, results_thread_main, sentinel, pickler = _queue_parts
        item = pickler.loads(pickler.dumps(obj))
        results_thread_main(_OneItem(self._strategy, [item, sentinel()]))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(_queue_parts[0], name)
        if not name.startswith("send_") or not callable(method):
            raise AttributeError(name)
        return lambda *args, **kwargs: method(self, *args, **kwargs)


class _OneItem:
    """The strategy as `results_thread_main` sees it, with a queue that holds one item."""

    def __init__(self, strategy: Any, items: list[Any]) -> None:
        self._strategy = strategy
        self._items = items
        self._final_q = self

    def get(self) -> Any:
        return self._items.pop(0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._strategy, name)


def _has_task_context() -> bool:
    """ansible-core 2.19 runs a task in a `TaskContext` and sends a `_RawTaskResult`;
    2.18 has neither and sends (host name, task uuid, result)."""
    import importlib.util

    try:
        return importlib.util.find_spec("ansible._internal._task") is not None
    except ImportError:
        return False
