"""A Grafana dashboard of the operator's metrics, written on request (`--plugins
grafana.kubebuilder.io/v1-alpha`, the plugin name operator-sdk users know).

The dashboard (grafana/controller-runtime-metrics.json, where operator-sdk's plugin puts
its own) graphs what ansible-operator exports at /metrics: reconciles and their errors,
workers in use, the work queue (depth, adds, retries, wait and work time), whole
reconcile durations and results per kind. It reads a Prometheus data source chosen on
import and filters by the `job` and `namespace` of the scraped Service.
"""

from __future__ import annotations

import json
from typing import Any

from runner.errors import ConfigError

__all__ = ["DASHBOARD_FILE", "GRAFANA_PLUGIN", "dashboard", "grafana_requested"]

GRAFANA_PLUGIN = "grafana.kubebuilder.io/v1-alpha"
ANSIBLE_PLUGINS = ("ansible", "ansible.sdk.operatorframework.io/v1")
DASHBOARD_FILE = "grafana/controller-runtime-metrics.json"
_SELECTOR = 'job="$job", namespace="$namespace"'
_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def grafana_requested(plugins: str | None, *, flag: str = "--plugins") -> bool:
    """Whether a `--plugins` list (comma-separated) asks for the dashboard; the ansible
    plugin is accepted (it is what this tool scaffolds), anything else is refused."""
    wanted = False
    for name in (part.strip() for part in (plugins or "").split(",")):
        if not name or name in ANSIBLE_PLUGINS:
            continue
        if name in (GRAFANA_PLUGIN, "grafana"):
            wanted = True
            continue
        raise ConfigError(
            f"{flag} {plugins!r}: unknown plugin {name!r}; known: "
            f"{', '.join((*ANSIBLE_PLUGINS, GRAFANA_PLUGIN))}"
        )
    return wanted


def _panel(
    title: str, exprs: list[tuple[str, str]], *, unit: str, x: int, y: int, kind: str = "timeseries"
) -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "datasource": _DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"datasource": _DATASOURCE, "expr": expr, "legendFormat": legend, "refId": chr(65 + i)}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def _quantiles(metric: str, by: str) -> list[tuple[str, str]]:
    return [
        (
            f"histogram_quantile({q}, sum(rate({metric}_bucket{{{_SELECTOR}}}[5m])) by ({by}, le))",
            f"p{round(q * 100)} {{{{{by}}}}}",
        )
        for q in (0.5, 0.9, 0.99)
    ]


def _row(title: str, y: int) -> dict[str, Any]:
    return {
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
        "panels": [],
    }


def _variable(name: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "query",
        "datasource": _DATASOURCE,
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "includeAll": False,
        "multi": False,
        "sort": 1,
    }


def dashboard(project: str) -> str:
    """The dashboard's JSON for the project `project`."""
    panels = [
        _row("Reconciles", 0),
        _panel(
            "Reconciles per second, by controller",
            [
                (
                    f"sum(rate(controller_runtime_reconcile_total{{{_SELECTOR}}}[5m])) "
                    "by (controller, result)",
                    "{{controller}} {{result}}",
                )
            ],
            unit="reqps",
            x=0,
            y=1,
        ),
        _panel(
            "Reconcile errors per second, by controller",
            [
                (
                    f"sum(rate(controller_runtime_reconcile_errors_total{{{_SELECTOR}}}[5m])) "
                    "by (controller)",
                    "{{controller}}",
                )
            ],
            unit="reqps",
            x=12,
            y=1,
        ),
        _panel(
            "Workers in use, of the maximum",
            [
                (f"controller_runtime_active_workers{{{_SELECTOR}}}", "{{controller}} in use"),
                (
                    f"controller_runtime_max_concurrent_reconciles{{{_SELECTOR}}}",
                    "{{controller}} maximum",
                ),
            ],
            unit="none",
            x=0,
            y=9,
        ),
        _panel(
            "Whole reconcile duration (Ansible run included), by kind",
            _quantiles("ansible_operator_reconciles", "GVK"),
            unit="s",
            x=12,
            y=9,
        ),
        _row("Work queue", 17),
        _panel(
            "Queue depth",
            [(f"workqueue_depth{{{_SELECTOR}}}", "{{name}} {{priority}}")],
            unit="none",
            x=0,
            y=18,
        ),
        _panel(
            "Adds and retries per second",
            [
                (f"sum(rate(workqueue_adds_total{{{_SELECTOR}}}[5m])) by (name)", "adds {{name}}"),
                (
                    f"sum(rate(workqueue_retries_total{{{_SELECTOR}}}[5m])) by (name)",
                    "retries {{name}}",
                ),
            ],
            unit="reqps",
            x=12,
            y=18,
        ),
        _panel(
            "Time in the queue before a worker takes it",
            _quantiles("workqueue_queue_duration_seconds", "name"),
            unit="s",
            x=0,
            y=26,
        ),
        _panel(
            "Time a worker spends on an item",
            _quantiles("workqueue_work_duration_seconds", "name"),
            unit="s",
            x=12,
            y=26,
        ),
    ]
    data = {
        "title": f"{project}: reconciles and work queue",
        "uid": f"{project}-controller"[:40],
        "tags": ["ansible-operator", project],
        "editable": True,
        "schemaVersion": 39,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                },
                _variable("job", "label_values(controller_runtime_reconcile_total, job)"),
                _variable(
                    "namespace",
                    'label_values(controller_runtime_reconcile_total{job="$job"}, namespace)',
                ),
            ]
        },
        "panels": panels,
    }
    return json.dumps(data, indent=2) + "\n"
