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
the task (the worker had a forked one; post-validation templates it in place), the
task runs inside ansible-core's `TaskContext`, and the result carries the task's fields
as the worker dumped them. What a worker needed only because it was another process is
left out: proxying the display over the queue, detaching from the terminal,
forwarding signals. Isolation between CRs is the zygote's: each run is a fresh fork.

Modules are not run by this: the `local` connection forks them or, for the direct
Kubernetes modules, runs them in process (`modexec`), which needs `callback_lock()`:
callbacks of loop items run in the strategy's results thread meanwhile.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["callback_lock", "in_task", "install"]

_state = threading.local()
_callback_locks: list[Any] = []
"""The callback lock of the run's task queue manager (one per ansible-playbook run)."""
_task_context = [True]
"""Whether this ansible-core runs tasks in a `TaskContext` (2.19; set by `install`)."""


def install() -> None:
    """Run tasks in the calling process (the run's ansible-playbook) from now on."""
    from ansible.executor.process.worker import WorkerProcess
    from ansible.executor.task_queue_manager import TaskQueueManager

    if getattr(WorkerProcess, "_runner_inline", False):
        return
    _task_context[0] = _has_task_context()
    if not _task_context[0] and not hasattr(WorkerProcess, "_save_stdin"):
        raise AttributeError("WorkerProcess has neither TaskContext (2.19) nor _save_stdin (2.18)")
    real_init = TaskQueueManager.__init__

    def tqm_init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        _callback_locks[:] = [self._callback_lock]

    def start(self: Any) -> None:
        _run_here(self)

    TaskQueueManager.__init__ = tqm_init
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

    task = worker._task.copy()
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        if _task_context[0]:
            result = _run_2_19(worker, task, TaskExecutor)
        else:
            result = _run_2_18(worker, task, TaskExecutor)
    finally:
        _state.depth -= 1
    _send(worker, task, result)


def _run_2_19(worker: Any, task: Any, executor: Any) -> Any:
    from ansible._internal import _task

    with _task.TaskContext(task):
        return executor(
            worker._host,
            task,
            worker._task_vars,
            worker._play_context,
            worker._loader,
            worker._shared_loader_obj,
            worker._final_q,
            worker._variable_manager,
        ).run()


def _run_2_18(worker: Any, task: Any, executor: Any) -> Any:
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
            worker._final_q,
            worker._variable_manager,
        ).run()
    finally:
        worker._new_stdin.close()


def _send(worker: Any, task: Any, result: Any) -> None:
    if _task_context[0]:
        from ansible.executor.task_result import _RawTaskResult

        worker._final_q.send_task_result(
            _RawTaskResult(
                host=worker._host,
                task=task,
                return_data=result,
                task_fields=task.dump_attrs(),
            )
        )
    else:
        worker._final_q.send_task_result(
            worker._host.name, task._uuid, result, task_fields=task.dump_attrs()
        )


def _has_task_context() -> bool:
    """ansible-core 2.19 runs a task in a `TaskContext` and sends a `_RawTaskResult`;
    2.18 has neither and sends (host name, task uuid, result)."""
    import importlib.util

    try:
        return importlib.util.find_spec("ansible._internal._task") is not None
    except ImportError:
        return False
