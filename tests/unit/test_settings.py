"""`run`'s flags and environment become one frozen, typed Settings (built by the CLI)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runner.cli.main import build_parser
from runner.cli.runsettings import settings_from
from runner.engine.leader import LeaderSettings
from runner.errors import ConfigError
from runner.operator.settings import Settings


def settings(*flags: str, environ: dict[str, str] | None = None) -> Settings:
    return settings_from(build_parser().parse_args(["run", *flags]), environ or {})


def test_defaults_are_the_go_operators() -> None:
    built = settings()
    assert (
        built.watches_file,
        built.reconcile_period,
        built.reconcile_timeout,
        built.max_workers,
        built.ansible_verbosity,
        built.ansible_log_events,
        built.ansible_backend,
        built.max_artifacts_bytes,
        built.inject_owner_ref,
        built.proxy_port,
        built.metrics_address,
        built.health_address,
        built.user_metrics_address,
        built.graceful_shutdown_timeout,
        built.leader,
        built.reload,
        built.debug_logs,
        built.watch_namespaces,
        built.kubeconfig,
    ) == (
        "./watches.yaml",
        36000.0,
        0.0,
        0,
        2,
        "tasks",
        "fast",
        2**30,
        True,
        8888,
        ("0.0.0.0", 8443),
        ("0.0.0.0", 6789),
        ("127.0.0.1", 5050),
        30.0,
        None,
        False,
        False,
        None,
        None,
    )
    assert built.logging.level == "info"


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings().proxy_port = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("flags", "environ", "field", "expected"),
    [
        pytest.param((), {"WATCH_NAMESPACE": " a, ,b "}, "watch_namespaces", ("a", "b"), id="ns"),
        pytest.param((), {"WATCH_NAMESPACE": ""}, "watch_namespaces", None, id="ns-empty"),
        pytest.param((), {"KUBECONFIG": "/k1:/k2"}, "kubeconfig", "/k1", id="kubeconfig-first"),
        pytest.param((), {"ANSIBLE_OPERATOR_RELOAD": "true"}, "reload", True, id="reload-env"),
        pytest.param((), {"ANSIBLE_OPERATOR_RELOAD": "yes"}, "reload", False, id="reload-env-no"),
        pytest.param(("--reload",), {}, "reload", True, id="reload-flag"),
        pytest.param((), {"ANSIBLE_DEBUG_LOGS": "1"}, "debug_logs", True, id="debug-logs"),
        pytest.param(("--reconcile-period=1m30s",), {}, "reconcile_period", 90.0, id="period"),
        pytest.param(("--metrics-bind-address=0",), {}, "metrics_address", None, id="metrics-off"),
        pytest.param((), {}, "priority_queue", True, id="priorities-default-on"),
        pytest.param(("--priority-queue=false",), {}, "priority_queue", False, id="fifo"),
        pytest.param((), {}, "memory_limit_fraction", 0.85, id="memory-default"),
        pytest.param(
            ("--memory-limit-fraction=0",), {}, "memory_limit_fraction", 0.0, id="mem-off"
        ),
        pytest.param(
            ("--health-probe-bind-address=127.0.0.1:1",),
            {},
            "health_address",
            ("127.0.0.1", 1),
            id="health",
        ),
        pytest.param(
            ("--leader-elect", "--leader-election-id=x"),
            {"WATCH_NAMESPACE": "ops,dev"},
            "leader",
            LeaderSettings(name="x", namespace="ops"),
            id="leader-in-first-watched-namespace",
        ),
    ],
)
def test_flags_and_environment(
    flags: tuple[str, ...], environ: dict[str, str], field: str, expected: Any
) -> None:
    assert getattr(settings(*flags, environ=environ), field) == expected


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            ("--reconcile-timeout=-1s",), "--reconcile-timeout: must not be negative: -1s", id="t"
        ),
        pytest.param(
            ("--metrics-require-rbac",), "--metrics-require-rbac needs --metrics-secure", id="rbac"
        ),
        pytest.param(
            ("--metrics-bind-address=nowhere",),
            "--metrics-bind-address: 'nowhere' is not host:port, :port or 0",
            id="address",
        ),
        pytest.param(("--leader-elect",), "--leader-elect: no namespace for the Lease", id="lease"),
    ],
)
def test_bad_values_are_config_errors(flags: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings(*flags)
    assert str(caught.value).startswith(message)
