"""Where a reconcile's time goes: py-spy samples (or cProfile data) split into categories.

`report()` reads py-spy's raw output (`--format raw --threads --idle --full-filenames
--subprocesses`: one line per distinct stack, `frame;frame;... count`, the process chain
and the thread as the first frames) and splits the samples of

- each run's main thread (the run's ansible-playbook, forked from the zygote: all its
  tasks run there), wall time: every sample counts, waiting included;
- the run's other threads (ansible-core's results thread) and the operator process
  (its event loop with the proxy, the thread reading the run's terminal, the artifact
  writers), CPU only: samples whose innermost frame is a known wait are left out;

into the categories of `RUN_RULES` / `OPERATOR_RULES`: a sample goes to the first rule
(in order) that one of its frames matches, so the specific rules come first.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["OPERATOR_RULES", "RUN_RULES", "categorize", "cprofile_categories", "report"]

Rule = tuple[str, tuple[str, ...]]

RUN_RULES: tuple[Rule, ...] = (
    (
        "strategy: polling sleep",
        ("StrategyBase._wait_on_pending_results (!", "StrategyBase._process_pending_results (!"),
    ),
    (
        "k8s wait: a module sleeping until its object is ready",
        ("k8s/waiter.py:!",),
    ),
    (
        "API round trip (socket wait in a module)",
        ("socket.py", "ssl.py", "http/client.py", "urllib3/connection.py"),
    ),
    ("modules in a fork", ("run_module (/work", "_collect (", "_module_child (")),
    ("in-process module execution", ("hooks/inprocess.py",)),
    (
        "Jinja compilation (lex, parse, generate, compile)",
        (
            "jinja2/compiler.py",
            "jinja2/parser.py",
            "jinja2/lexer.py",
            "jinja2/optimizer.py",
            "jinja2/idtracking.py",
            "Environment._compile (",
            "Environment._parse (",
            "Environment._generate (",
        ),
    ),
    (
        "playbook, role and include parsing (per run)",
        (
            "Playbook.load (",
            "_load_included_file",
            "load_list_of_tasks",
            "load_list_of_blocks",
            "Role.load (",
            "IncludeRole.get_block_list",
            "ansible/parsing/",
            "yaml/",
        ),
    ),
    ("job events: awx_display (event data, partial files, terminal)", ("awx_display.py",)),
    ("callbacks (other)", ("ansible/plugins/callback/", "TaskQueueManager.send_callback ")),
    ("Display", ("ansible/utils/display.py",)),
    ("lookup('template'): deepcopy of the variables", ("lookup/template.py:161)",)),
    ("task copies (Task/Block.copy)", ("FieldAttributeBase.copy ", "Task.copy ", "Block.copy ")),
    (
        "result hand-off (final queue, pickling)",
        ("DirectQueue.put (", "multiprocessing/", "send_task_result", "_convert_wire_task_result"),
    ),
    ("plugin lookups", ("ansible/plugins/loader.py",)),
    ("templates hook (key, checks)", ("hooks/templates.py",)),
    (
        "VariableManager.get_vars and facts",
        ("ansible/vars/", "set_nonpersistent_facts", "set_host_facts", "combine_vars"),
    ),
    (
        "templating (rendering, lazy containers, conditionals)",
        ("ansible/_internal/_templating/", "ansible/template/", "jinja2/", "<template>"),
    ),
    (
        "post_validate and task attributes",
        (
            "post_validate",
            "FieldAttributeBase.squash",
            "from_attrs",
            "dump_attrs",
            "ansible/playbook/attribute.py",
            "ansible/playbook/base.py",
        ),
    ),
    (
        "action plugins and TaskExecutor (other)",
        ("ansible/executor/task_executor.py", "ansible/plugins/action/", "/plugins/action/"),
    ),
    (
        "strategy and task hand-off (other)",
        (
            "ansible/plugins/strategy/",
            "ansible/executor/play_iterator.py",
            "ansible/executor/task_queue_manager.py",
            "hooks/inline.py",
        ),
    ),
    ("start-up: CLI, inventory, playbook load", ("ansible/cli/", "ansible/inventory/")),
)
"""Categories of a run's samples; the trailing `!` of a pattern: in the innermost frame."""

OPERATOR_RULES: tuple[Rule, ...] = (
    ("job events: terminal read, OutputEventFilter", ("ansible_runner/utils/", "_pump")),
    ("job events: event_callback, job_events files", ("ansible_runner/runner.py",)),
    ("artifacts (rotation, disk usage)", ("runner/ansible/disk.py", "runner/ansible/artifacts.py")),
    ("proxy", ("runner/proxy/",)),
    ("reconciler and status writes", ("runner/operator/",)),
    ("Kubernetes client, informers", ("runner/kube/", "aiohttp/")),
    ("asyncio and other", ("",)),
)

_WAIT_LEAVES = (
    "selectors.py",
    "threading.py",
    "queue.py",
    "concurrent/futures/thread.py",
    "Zygote._read (",
    "multiprocessing/connection.py",
    "synchronize.py",
    "_pump (",
)
"""Innermost frames of a thread that waits (left out of the CPU-only figures)."""

_FRAME = re.compile(r"^(.*) \((.*):(\d+)\)$")


def _matches(frames: list[str], pattern: str) -> bool:
    if pattern.endswith("!"):
        return bool(frames) and pattern[:-1] in frames[-1]
    return any(pattern in frame for frame in frames)


def categorize(frames: list[str], rules: Iterable[Rule]) -> str:
    for name, patterns in rules:
        if any(_matches(frames, pattern) for pattern in patterns):
            return name
    return "other"


def _short(frame: str) -> str:
    frame = re.sub(r"/[^ ;]*/site-packages/", "", frame)
    frame = re.sub(r"/[^ ;]*/lib/python3\.\d+/", "", frame)
    return frame


def _parse(path: Path) -> Iterable[tuple[list[str], str, list[str], int]]:
    """(process chain, thread, frames, count) per line."""
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        parts = stack.split(";")
        processes = []
        index = 0
        while index < len(parts) and parts[index].startswith("process "):
            processes.append(parts[index])
            index += 1
        thread = parts[index] if index < len(parts) and parts[index].startswith("thread ") else ""
        frames = [_short(frame) for frame in parts[index + 1 :]]
        yield processes, thread, frames, int(count)


def _pid(key: str) -> int:
    return int(key.split()[1])


def _is_run(processes: list[str]) -> bool:
    """A run: a child of the zygote (the operator's grandchild), not a module's fork."""
    return len(processes) == 3 and "zygoteprocess" in processes[-1]


def _waits(frames: list[str]) -> bool:
    return not frames or any(leaf in frames[-1] for leaf in _WAIT_LEAVES)


def report(path: Path, measured: dict[str, list[dict[str, Any]]]) -> list[str]:
    runs: dict[str, Counter[str]] = defaultdict(Counter)
    run_other: Counter[str] = Counter()
    operator: Counter[str] = Counter()
    for processes, thread, frames, count in _parse(path):
        if _is_run(processes):
            key = processes[-1].split(":", 1)[0]
            if "MainThread" in thread:
                runs[key][categorize(frames, RUN_RULES)] += count
            elif not _waits(frames):
                run_other[categorize(frames, RUN_RULES)] += count
        elif len(processes) == 1 and not _waits(frames):
            operator[categorize(frames, OPERATOR_RULES)] += count
    # The runs in the order they ran (pids grow); the measured ones are matched by order:
    # first, (follow-ups), steady per CR: their sample counts are printed for reference.
    labels = {}
    for scenario, rows in measured.items():
        for index, row in enumerate(rows):
            if row.get("pid"):
                labels[f"process {row['pid']}"] = f"{scenario} {index + 1}"
    ordered = sorted(runs, key=lambda key: (key not in labels, labels.get(key, ""), key))
    lines = [
        "py-spy samples of the runs' main threads (wall time; waiting included), by category,",
        "in % of each run (`follow-up`: runs the operator started by itself, e.g. when the",
        "dependents changed) and summed over all runs:",
        "",
    ]
    totals: Counter[str] = Counter()
    for key in ordered:
        totals.update(runs[key])
    all_samples = sum(totals.values()) or 1
    if not labels:  # runs not matched to the measured ones: in the order they started
        labels = {key: f"run {index + 1}" for index, key in enumerate(sorted(runs, key=_pid))}
        ordered = sorted(runs, key=_pid)
    header = "| category | " + " | ".join(labels.get(key, "follow-up") for key in ordered)
    lines.append(header + " | all runs | all runs (samples) |")
    lines.append("| --- " * (len(ordered) + 3) + "|")
    for category, count in totals.most_common():
        cells = []
        for key in ordered:
            total = sum(runs[key].values()) or 1
            cells.append(f"{100 * runs[key][category] / total:.1f} %")
        lines.append(
            f"| {category} | {' | '.join(cells)} | {100 * count / all_samples:.1f} % | {count} |"
        )
    lines.append(
        "| samples | "
        + " | ".join(str(sum(runs[key].values())) for key in ordered)
        + f" | | {all_samples} |"
    )
    lines += [
        "",
        "CPU samples outside the runs' main threads (waits left out), all runs together:",
        "",
        "| where | category | samples |",
        "| --- | --- | --- |",
    ]
    for category, count in run_other.most_common():
        lines.append(f"| run, other threads | {category} | {count} |")
    for category, count in operator.most_common():
        lines.append(f"| operator process | {category} | {count} |")
    return lines


# -- cProfile ---------------------------------------------------------------------------------


def cprofile_categories(files: list[Path]) -> list[str]:
    """Own time of each function (cProfile's tottime) of the runs, by the file it is in.

    cProfile has no stacks, so this is coarser than the py-spy split: a function's own
    time goes to the category its file falls in (first matching rule on `file:function`).
    """
    import pstats

    stats = pstats.Stats(*(str(path) for path in files))
    by_category: Counter[str] = Counter()
    for (filename, _line, function), row in stats.stats.items():  # type: ignore[attr-defined]
        tottime = row[2]
        frame = _short(f"{function} ({filename}:0)")
        by_category[categorize([frame], RUN_RULES)] += tottime
    total = sum(by_category.values()) or 1.0
    lines = [
        "cProfile own time by the category of the function's file (coarse; no stacks):",
        "",
        "| category | s | % |",
        "| --- | --- | --- |",
    ]
    for category, seconds in by_category.most_common():
        lines.append(f"| {category} | {seconds:.2f} | {100 * seconds / total:.1f} % |")
    return lines
