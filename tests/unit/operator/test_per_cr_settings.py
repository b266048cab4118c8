"""Per-CR annotations override the watch's period, verbosity and artifact count."""

from __future__ import annotations

import pytest

from runner.operator.reconciler import per_cr_settings
from runner.structs import GVK
from runner.watches.model import Watch

WATCH = Watch(
    gvk=GVK("cache.example.com", "v1alpha1", "Memcached"),
    reconcile_period=60.0,
    ansible_verbosity=2,
    max_runner_artifacts=20,
)
PREFIX = "ansible.sdk.operatorframework.io/"


def cr(**annotations: str) -> dict[str, object]:
    return {"metadata": {"name": "x", "annotations": annotations}}


@pytest.mark.parametrize(
    ("annotations", "period", "verbosity", "artifacts"),
    [
        pytest.param({}, 60.0, 2, 20, id="watch-defaults"),
        pytest.param({PREFIX + "reconcile-period": "1m30s"}, 90.0, 2, 20, id="period"),
        pytest.param({PREFIX + "verbosity": "4"}, 60.0, 4, 20, id="verbosity"),
        pytest.param({PREFIX + "verbosity": "99"}, 60.0, 7, 20, id="verbosity-capped"),
        pytest.param({PREFIX + "verbosity": "loud"}, 60.0, 2, 20, id="verbosity-invalid-ignored"),
        pytest.param({PREFIX + "max-runner-artifacts": "3"}, 60.0, 2, 3, id="artifacts"),
        # As ansible-runner's --rotate-artifacts 0 for the Go operator: keep every run.
        pytest.param({PREFIX + "max-runner-artifacts": "0"}, 60.0, 2, 0, id="artifacts-all"),
        pytest.param({PREFIX + "max-runner-artifacts": "-1"}, 60.0, 2, -1, id="artifacts-neg"),
    ],
)
def test_annotations(
    annotations: dict[str, str], period: float, verbosity: int, artifacts: int
) -> None:
    settings = per_cr_settings(WATCH, cr(**annotations))
    assert (settings.period, settings.verbosity, settings.max_artifacts) == (
        period,
        verbosity,
        artifacts,
    )


def test_bad_period_annotation_names_it() -> None:
    with pytest.raises(ValueError, match=r"Unable to parse reconcile period annotation: .*5 min"):
        per_cr_settings(WATCH, cr(**{PREFIX + "reconcile-period": "5 min"}))
