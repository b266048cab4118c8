"""The Grafana dashboard `--plugins grafana.kubebuilder.io/v1-alpha` adds."""

from __future__ import annotations

import json
import re

import pytest

from runner.devtools.scaffold.generate import init_plan
from runner.devtools.scaffold.grafana import DASHBOARD_FILE, dashboard, grafana_requested
from runner.errors import ConfigError
from runner.observability.metrics import OperatorMetrics


@pytest.mark.parametrize(
    ("plugins", "wanted"),
    [
        (None, False),
        ("ansible", False),
        ("ansible.sdk.operatorframework.io/v1", False),
        ("ansible,grafana.kubebuilder.io/v1-alpha", True),
        ("grafana.kubebuilder.io/v1-alpha", True),
        (" ansible , grafana ", True),
    ],
)
def test_grafana_requested(plugins: str | None, wanted: bool) -> None:
    assert grafana_requested(plugins) is wanted


def test_unknown_plugins_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"^--plugins 'ansible,helm': unknown plugin 'helm'; "):
        grafana_requested("ansible,helm")


def test_only_asked_for() -> None:
    assert DASHBOARD_FILE not in init_plan(domain="example.com", project_name="web").create
    plan = init_plan(domain="example.com", project_name="web", grafana=True)
    assert json.loads(plan.create[DASHBOARD_FILE])["title"] == "web: reconciles and work queue"


def test_every_graphed_metric_is_one_the_operator_exports() -> None:
    exported = {
        sample.name for family in OperatorMetrics().registry.collect() for sample in family.samples
    } | {family.name for family in OperatorMetrics().registry.collect()}
    data = json.loads(dashboard("web"))
    exprs = [
        target["expr"]
        for panel in data["panels"]
        if panel["type"] != "row"
        for target in panel["targets"]
    ]
    assert len(exprs) >= 10
    graphed = {
        name
        for expr in exprs
        for name in re.findall(r"\b((?:controller_runtime|workqueue|ansible_operator)_\w+)\{", expr)
    }
    assert len(graphed) >= 8
    for name in graphed:
        assert name.removesuffix("_bucket").removesuffix("_total") in exported, name
    # Panels neither overlap nor leave the 24-column grid.
    cells = set()
    for panel in data["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, panel["title"]
                cells.add((x, y))
