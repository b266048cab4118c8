"""Flags of `ansible-operator run` (same names and defaults as the Go operator) and the
frozen settings built from them. Only cli.py builds settings."""

from __future__ import annotations

import argparse
import os


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "t", "true", "yes", "on"):
        return True
    if lowered in ("0", "f", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {text!r}")


def _add_bool(group: argparse._ArgumentGroup, flag: str, *, default: bool, help: str) -> None:
    # Go flags accept both `--flag` and `--flag=false`.
    group.add_argument(
        flag, nargs="?", const=True, default=default, type=_bool, metavar="BOOL", help=help
    )


_SIZE_SUFFIXES = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
}


def parse_size(text: str) -> int:
    """Bytes from `1073741824`, `500Mi`, `1Gi`, `2G` (a `B` suffix is allowed)."""
    raw = text.strip()
    lowered = raw.lower().removesuffix("b")
    digits = lowered.rstrip("kmgti")
    suffix = lowered[len(digits) :]
    if not digits.isdigit() or suffix not in _SIZE_SUFFIXES:
        raise argparse.ArgumentTypeError(
            f"invalid size {text!r}: use bytes or a suffix Ki, Mi, Gi, Ti (or K, M, G, T)"
        )
    return int(digits) * _SIZE_SUFFIXES[suffix]


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Register every flag of SPEC.md's `run` section."""
    ansible = parser.add_argument_group("Ansible")
    ansible.add_argument("--watches-file", default="./watches.yaml", help="path to watches.yaml")
    ansible.add_argument(
        "--reconcile-period",
        default="10h",
        help="default period between reconciles of one resource (Go duration)",
    )
    ansible.add_argument(
        "--reconcile-timeout",
        default="0",
        help="stop an Ansible run that takes longer (Go duration, e.g. 30m): the CR gets a "
        "Failure condition and is retried with backoff; per watch "
        "RECONCILE_TIMEOUT_<KIND>_<GROUP> (default 0: no limit)",
    )
    ansible.add_argument(
        "--max-concurrent-reconciles",
        type=int,
        default=os.cpu_count() or 1,
        help="reconciles run at once per watch (default: CPU count)",
    )
    ansible.add_argument(
        "--max-workers",
        type=int,
        default=0,
        help="reconciles run at once across all watches (0: no global limit)",
    )
    ansible.add_argument("--ansible-verbosity", type=int, default=2, help="-v count, 0-7")
    ansible.add_argument("--ansible-args", default="", help="extra ansible-runner cmdline")
    ansible.add_argument(
        "--ansible-log-events",
        default="tasks",
        choices=("tasks", "everything", "nothing"),
        help="which Ansible events to log",
    )
    ansible.add_argument(
        "--ansible-backend",
        default="fast",
        choices=("runner", "fast"),
        help="how runs are started: forks of a warm Ansible process with Kubernetes "
        "modules run in-process (fast, the default), or ansible-runner per run as the Go "
        "operator does (runner); both write the same artifacts (see docs/fast-backend.md)",
    )
    ansible.add_argument("--ansible-roles-path", default="", help="sets ANSIBLE_ROLES_PATH")
    ansible.add_argument(
        "--ansible-collections-path", default="", help="sets ANSIBLE_COLLECTIONS_PATH"
    )
    ansible.add_argument(
        "--max-artifacts-bytes",
        type=parse_size,
        default=parse_size("1Gi"),
        metavar="SIZE",
        help="disk use allowed for the run artifacts of all resources together, e.g. 500Mi "
        "or 2Gi; the oldest runs are removed first, never a resource's latest run "
        "(default 1Gi, 0: no limit)",
    )

    _add_bool(
        ansible,
        "--reload",
        default=False,
        help="reload changed roles, playbooks and watches.yaml while running "
        "(also ANSIBLE_OPERATOR_RELOAD=1)",
    )

    proxy = parser.add_argument_group("API proxy")
    _add_bool(proxy, "--inject-owner-ref", default=True, help="add owner references on create")
    proxy.add_argument("--proxy-port", type=int, default=8888, help="0 picks a free port")

    serving = parser.add_argument_group("metrics, health and leader election")
    serving.add_argument(
        "--metrics-bind-address", "--metrics-addr", default=":8443", help="'0' disables"
    )
    _add_bool(serving, "--metrics-secure", default=False, help="serve metrics over HTTPS")
    serving.add_argument(
        "--metrics-cert-path",
        default="",
        help="directory with tls.crt and tls.key for --metrics-secure (default: self-signed)",
    )
    serving.add_argument(
        "--user-metrics-bind-address",
        default="127.0.0.1:5050",
        help="where operator_sdk.util.osdk_metric tasks send metrics (loopback; '0' disables)",
    )
    _add_bool(
        serving,
        "--metrics-require-rbac",
        default=False,
        help="check metrics callers with TokenReview/SubjectAccessReview (needs HTTPS)",
    )
    serving.add_argument("--health-probe-bind-address", default=":6789")
    _add_bool(
        serving,
        "--leader-elect",
        default=False,
        help="elect a leader with a coordination.k8s.io Lease",
    )
    _add_bool(serving, "--enable-leader-election", default=False, help="deprecated alias")
    serving.add_argument("--leader-election-id", default="", help="default: $OPERATOR_NAME")
    serving.add_argument("--leader-election-namespace", default="")
    serving.add_argument("--leader-elect-lease-duration", default="15s")
    serving.add_argument("--leader-elect-renew-deadline", default="10s")
    serving.add_argument("--leader-elect-retry-period", default="2s")
    serving.add_argument(
        "--leader-elect-resource-lock", default="leases", help="accepted; always a Lease"
    )
    serving.add_argument("--graceful-shutdown-timeout", default="30s")
    _add_bool(serving, "--enable-http2", default=False, help="serve metrics over HTTP/2")

    logging = parser.add_argument_group("logging")
    logging.add_argument("--zap-log-level", default="info", help="debug, info, error or 1-9")
    _add_bool(logging, "--zap-devel", default=False, help="development logging defaults")
    logging.add_argument("--zap-encoder", default="", choices=("", "json", "console"))
    logging.add_argument("--zap-stacktrace-level", default="error")
    logging.add_argument("--zap-time-encoding", default="epoch")
