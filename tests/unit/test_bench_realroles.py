"""bench/realroles.py: per-task costs and kinds from a run's job events, and the role
suite's own consistency (every template a task looks up exists)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/ is not installed
from bench.realroles import PROJECT, TaskSources, analyse_run, find_run

COMPONENT = "roles/installer/tasks/component.yml"


def _line_of(relative: str, needle: str) -> int:
    lines = (PROJECT / relative).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if needle in text)


def _write_events(run: Path, events: list[dict[str, Any]]) -> None:
    (run / "job_events").mkdir(parents=True)
    for counter, event in enumerate(events, 1):
        event = {"counter": counter, "uuid": f"u{counter}", **event}
        (run / "job_events" / f"{counter}-u{counter}.json").write_text(json.dumps(event))


def _task(second: float, name: str, action: str, path: str) -> dict[str, Any]:
    return {
        "event": "playbook_on_task_start",
        "created": f"2026-11-27T10:00:{second:09.6f}",
        "event_data": {"task": name, "task_action": action, "task_path": path},
    }


def _result(second: float, event: str) -> dict[str, Any]:
    return {"event": event, "created": f"2026-11-27T10:00:{second:09.6f}", "event_data": {}}


def test_costs_run_from_one_task_start_to_the_next_and_kinds_follow_source_and_outcome(
    tmp_path: Path,
) -> None:
    deployment = f"/somewhere/{COMPONENT}:{_line_of(COMPONENT, ': Deployment')}"
    pods = f"/somewhere/{COMPONENT}:{_line_of(COMPONENT, ': its pods')}"
    hpa = f"/somewhere/{COMPONENT}:{_line_of(COMPONENT, ': HorizontalPodAutoscaler')}"
    run = tmp_path / "artifacts" / "1"
    _write_events(
        run,
        [
            {"event": "playbook_on_start", "created": "2026-11-27T10:00:00.000000"},
            _task(1.0, "api: Deployment", "kubernetes.core.k8s", deployment),
            _result(1.2, "runner_on_ok"),
            _task(1.5, "api: HorizontalPodAutoscaler", "kubernetes.core.k8s", hpa),
            _result(1.501, "runner_on_skipped"),
            _task(1.502, "api: its pods", "kubernetes.core.k8s_info", pods),
            _result(1.6, "runner_on_ok"),
            _task(1.7, "a fact", "ansible.builtin.set_fact", ""),
            _result(1.71, "runner_on_ok"),
            _task(1.72, "include", "ansible.builtin.include_tasks", ""),
            _result(1.73, "runner_on_ok"),
            {
                "event": "playbook_on_stats",
                "created": "2026-11-27T10:00:02.000000",
                "event_data": {"ok": {"localhost": 4}, "changed": {"localhost": 1}},
            },
        ],
    )
    result = analyse_run(run, TaskSources(PROJECT))
    kinds = [(t["name"], t["kind"], t["ms"]) for t in result["task_costs"]]
    assert kinds == [
        ("api: Deployment", "template", 500.0),
        ("api: HorizontalPodAutoscaler", "skipped", 2.0),
        ("api: its pods", "k8s_info", 198.0),
        ("a fact", "set_fact/debug", 20.0),
        ("include", "other", 280.0),
    ]
    assert result["tasks"] == 5
    assert result["span_s"] == 2.0
    assert result["stats"]["changed"] == 1
    assert result["by_kind"]["template"] == {"count": 1, "seconds": 0.5}


def test_the_measured_run_is_the_first_that_started_after_the_trigger(tmp_path: Path) -> None:
    gvk = ("bench.example.com", "v1alpha1", "installers", "Installer")
    artifacts = tmp_path / "operator-x" / "bench.example.com/v1alpha1/Installer/ns/inst/artifacts"
    for ident, second in (("old", 1.0), ("measured", 5.0), ("follow-up", 9.0)):
        _write_events(
            artifacts / ident,
            [{"event": "playbook_on_start", "created": f"2026-11-27T10:00:{second:09.6f}"}],
        )
    trigger = 1795773604.0  # 2026-11-27T10:00:04Z
    found = find_run(tmp_path, gvk, "ns", "inst", trigger)
    assert found is not None and found.name == "measured"


def test_every_template_a_task_looks_up_exists() -> None:
    looked_up = 0
    for tasks in PROJECT.glob("roles/*/tasks/**/*.yml"):
        role = tasks.relative_to(PROJECT).parts[1]
        text = tasks.read_text()
        for name in re.findall(r"lookup\('template', '([^']+)'\)", text):
            looked_up += 1
            assert (PROJECT / "roles" / role / "templates" / name).is_file(), (tasks, name)
    # The loop over [serviceaccount, role, rolebinding] names its templates by item.
    for name in ("serviceaccount", "role", "rolebinding"):
        assert (PROJECT / "roles" / "installer" / "templates" / f"{name}.yaml.j2").is_file()
    templates = list(PROJECT.glob("roles/*/templates/*.j2"))
    assert looked_up >= 20 and len(templates) >= 20
