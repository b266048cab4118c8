"""The `Settings` of `ansible-operator run`, built from its parsed flags and the
environment: the only place where a run's `argparse.Namespace` is read. Values are
checked in the order the Go operator checks them; the first wrong one is a ConfigError.
The flags themselves are `runner.cli.runflags`.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path

from runner.engine.leader import LeaderSettings
from runner.errors import ConfigError
from runner.observability.serving import parse_bind_address
from runner.operator.settings import (
    LoggingSettings,
    Settings,
    check_leader_durations,
    duration,
    watch_namespaces,
)
from runner.sharding.membership import RingSettings
from runner.sharding.ring import check_ring_name, new_member
from runner.webhooks.server import runtime as webhook_runtime

__all__ = ["leader_settings", "settings_from", "sharding_settings"]

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _enabled(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").lower() in ("1", "true")


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """The settings of a run from its parsed flags and the environment; ConfigError on
    the first value that is wrong (checked in the order the Go operator checks them)."""
    reconcile_period = duration("--reconcile-period", args.reconcile_period)
    graceful = duration("--graceful-shutdown-timeout", args.graceful_shutdown_timeout)
    reconcile_timeout = duration("--reconcile-timeout", args.reconcile_timeout)
    if reconcile_timeout < 0:
        raise ConfigError(f"--reconcile-timeout: must not be negative: {args.reconcile_timeout}")
    if args.metrics_require_rbac and not args.metrics_secure:
        raise ConfigError("--metrics-require-rbac needs --metrics-secure")
    metrics = parse_bind_address("--metrics-bind-address", args.metrics_bind_address)
    health = parse_bind_address("--health-probe-bind-address", args.health_probe_bind_address)
    user_metrics = parse_bind_address("--user-metrics-bind-address", args.user_metrics_bind_address)
    namespaces = watch_namespaces(environ)
    leader = leader_settings(args, environ, namespaces)
    sharding = sharding_settings(args, environ, namespaces)
    webhooks = webhook_runtime.settings_from(args, environ)
    return Settings(
        watches_file=args.watches_file,
        reconcile_period=reconcile_period,
        reconcile_timeout=reconcile_timeout,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        max_workers=args.max_workers,
        priority_queue=args.priority_queue,
        memory_limit_fraction=args.memory_limit_fraction,
        ansible_verbosity=args.ansible_verbosity,
        ansible_args=args.ansible_args,
        ansible_log_events=args.ansible_log_events,
        ansible_backend=args.ansible_backend,
        ansible_roles_path=args.ansible_roles_path,
        ansible_collections_path=args.ansible_collections_path,
        max_artifacts_bytes=args.max_artifacts_bytes,
        reload=bool(args.reload) or _enabled(environ, "ANSIBLE_OPERATOR_RELOAD"),
        debug_logs=_enabled(environ, "ANSIBLE_DEBUG_LOGS"),
        inject_owner_ref=args.inject_owner_ref,
        proxy_port=args.proxy_port,
        metrics_address=metrics,
        metrics_secure=args.metrics_secure,
        metrics_cert_path=args.metrics_cert_path,
        metrics_require_rbac=args.metrics_require_rbac,
        user_metrics_address=user_metrics,
        health_address=health,
        enable_http2=args.enable_http2,
        leader=None if sharding is not None else leader,
        sharding=sharding,
        graceful_shutdown_timeout=graceful,
        webhooks=webhooks,
        logging=LoggingSettings(
            level=args.zap_log_level,
            encoder=args.zap_encoder,
            devel=args.zap_devel,
            stacktrace_level=args.zap_stacktrace_level,
            time_encoding=args.zap_time_encoding,
        ),
        watch_namespaces=namespaces,
        kubeconfig=environ.get("KUBECONFIG", "").split(os.pathsep)[0] or None,
    )


def leader_settings(
    args: argparse.Namespace, environ: Mapping[str, str], namespaces: Sequence[str] | None
) -> LeaderSettings | None:
    """The Lease to elect a leader with, or None without `--leader-elect`."""
    if not (args.leader_elect or args.enable_leader_election):
        return None
    name = args.leader_election_id or environ.get("OPERATOR_NAME", "")
    if not name:
        # Replicas of one operator run in the same directory layout: derive the id from it.
        name = f"{_cwd_slug() or 'operator'}-ansible-operator-lock"
    namespace = _lease_namespace(args.leader_election_namespace, environ, namespaces)
    if not namespace:
        raise ConfigError(
            "--leader-elect: no namespace for the Lease; outside a pod pass "
            "--leader-election-namespace (or set WATCH_NAMESPACE)"
        )
    settings = LeaderSettings(
        name=name,
        namespace=namespace,
        lease_duration=duration("--leader-elect-lease-duration", args.leader_elect_lease_duration),
        renew_deadline=duration("--leader-elect-renew-deadline", args.leader_elect_renew_deadline),
        retry_period=duration("--leader-elect-retry-period", args.leader_elect_retry_period),
    )
    check_leader_durations(settings)
    return settings


def sharding_settings(
    args: argparse.Namespace, environ: Mapping[str, str], namespaces: Sequence[str] | None
) -> RingSettings | None:
    """The ring this replica joins, or None without `--sharding` (which, given with
    `--leader-elect`, replaces the election: every replica works on its share)."""
    if not args.sharding:
        return None
    ring = args.sharding_ring or environ.get("OPERATOR_NAME", "")
    if not ring:
        ring = _cwd_slug()[:50] or "operator"
    problem = check_ring_name(ring)
    if problem is not None:
        raise ConfigError(f"--sharding-ring: {problem}")
    namespace = _lease_namespace(args.sharding_namespace, environ, namespaces)
    if not namespace:
        raise ConfigError(
            "--sharding: no namespace for the ring's Leases; outside a pod pass "
            "--sharding-namespace (or set WATCH_NAMESPACE)"
        )
    lease = LeaderSettings(
        name=ring,
        namespace=namespace,
        lease_duration=duration("--sharding-lease-duration", args.sharding_lease_duration),
        renew_deadline=duration("--sharding-renew-deadline", args.sharding_renew_deadline),
        retry_period=duration("--sharding-retry-period", args.sharding_retry_period),
    )
    try:
        check_leader_durations(lease)
    except ConfigError as err:
        raise ConfigError(str(err).replace("--leader-elect-", "--sharding-")) from None
    return RingSettings(
        ring=ring,
        namespace=namespace,
        member=new_member(environ.get("POD_NAME") or socket.gethostname()),
        lease_duration=lease.lease_duration,
        renew_deadline=lease.renew_deadline,
        retry_period=lease.retry_period,
    )


def _cwd_slug() -> str:
    """The working directory's name as a DNS label ("" when nothing is left)."""
    return re.sub(r"[^a-z0-9-]+", "-", Path.cwd().name.lower()).strip("-")


def _lease_namespace(
    flag: str | None, environ: Mapping[str, str], namespaces: Sequence[str] | None
) -> str:
    """Where Leases go: the flag, else this pod's namespace (from the environment or
    its service account), else the first watched namespace; "" when none is known."""
    namespace = flag or environ.get("POD_NAMESPACE", "")
    if not namespace and SERVICE_ACCOUNT_NAMESPACE.is_file():
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
    if not namespace and namespaces:
        namespace = namespaces[0]
    return namespace
