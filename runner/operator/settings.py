"""What `ansible-operator run` is configured with: one frozen, typed object.

The CLI layer (`runner.cli.runsettings`) builds `Settings` from the flags (`runner.cli.runflags`)
and the environment once, checking every value before the first log line, and
`runner.operator.run` only reads it: nothing below the CLI sees an `argparse.Namespace` or looks
up a setting by name. The checks that need no parser (durations, the elector's timing
rules) are here, pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from runner.ansible.backend import LogEvents
from runner.engine.leader import LeaderSettings
from runner.errors import ConfigError
from runner.sharding.membership import RingSettings
from runner.util.durations import parse_duration
from runner.webhooks.server.runtime import WebhookSettings

__all__ = [
    "LoggingSettings",
    "Settings",
    "check_leader_durations",
    "duration",
    "watch_namespaces",
]

Address = tuple[str, int]


@dataclass(frozen=True, kw_only=True)
class LoggingSettings:
    """The zap-compatible logging flags."""

    level: str
    encoder: str
    devel: bool
    stacktrace_level: str
    time_encoding: str


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every setting of one `run`, with flags' values checked and parsed (durations in
    seconds, addresses as (host, port) or None for "off") and the environment's part
    read (`WATCH_NAMESPACE`, `KUBECONFIG`, `ANSIBLE_OPERATOR_RELOAD`, ...)."""

    # Ansible and the watches
    watches_file: str
    reconcile_period: float
    reconcile_timeout: float
    max_concurrent_reconciles: int
    max_workers: int
    priority_queue: bool
    memory_limit_fraction: float
    ansible_verbosity: int
    ansible_args: str
    ansible_log_events: LogEvents
    ansible_backend: Literal["runner", "fast"]
    ansible_roles_path: str
    ansible_collections_path: str
    max_artifacts_bytes: int
    reload: bool
    debug_logs: bool
    # the API proxy
    inject_owner_ref: bool
    proxy_port: int
    # metrics, health, leader election, shutdown
    metrics_address: Address | None
    metrics_secure: bool
    metrics_cert_path: str
    metrics_require_rbac: bool
    user_metrics_address: Address | None
    health_address: Address | None
    enable_http2: bool
    leader: LeaderSettings | None
    sharding: RingSettings | None
    graceful_shutdown_timeout: float
    webhooks: WebhookSettings
    logging: LoggingSettings
    # where to work
    watch_namespaces: tuple[str, ...] | None
    kubeconfig: str | None


def duration(flag: str, value: str) -> float:
    """A Go duration flag's value in seconds; ConfigError naming the flag."""
    try:
        return parse_duration(value)
    except ValueError as err:
        raise ConfigError(f"{flag}: {err}") from None


def watch_namespaces(environ: Mapping[str, str]) -> tuple[str, ...] | None:
    """WATCH_NAMESPACE: empty or unset = all namespaces, else a comma-separated list."""
    raw = environ.get("WATCH_NAMESPACE", "")
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    return names or None


def check_leader_durations(settings: LeaderSettings) -> None:
    """client-go's rules for an elector (the Go operator fails on them at start):
    lease > renew deadline > 1.2 x retry period > 0."""
    lease, renew, retry = settings.lease_duration, settings.renew_deadline, settings.retry_period
    problem = ""
    if retry <= 0:
        problem = "--leader-elect-retry-period must be above 0"
    elif lease <= renew:
        problem = "--leader-elect-lease-duration must be longer than --leader-elect-renew-deadline"
    elif renew <= 1.2 * retry:
        problem = (
            "--leader-elect-renew-deadline must be longer than 1.2 x --leader-elect-retry-period"
        )
    if problem:
        raise ConfigError(
            f"{problem} (lease {lease:g}s, renew deadline {renew:g}s, retry period {retry:g}s)"
        )
