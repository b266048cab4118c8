"""The flags of `ansible-operator run`: their names, defaults and value checks.

Same names, defaults and value checks as the Go operator's flag set (values are checked
when the flags are parsed; durations whether or not the feature that reads them is on),
and `--help` shows the defaults. `runner.cli.runsettings` turns the parsed flags and the
environment into the frozen `runner.operator.settings.Settings` that `runner.operator.run` is given.
"""

from __future__ import annotations

import argparse
from typing import Any

from runner.observability.logging import level_from_flag
from runner.util.cpulimit import available_cpus
from runner.util.durations import parse_duration
from runner.webhooks.server import runtime as webhook_runtime

__all__ = [
    "DefaultsFormatter",
    "add_run_arguments",
    "go_duration",
    "int_in_range",
    "log_level",
    "one_of",
    "parse_size",
]


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


def _fraction(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, got {text.strip()}")
    return value


def int_in_range(low: int, high: int | None = None, *, hint: str = "") -> Any:
    """An argparse type: an integer from `low` to `high` (no upper bound when None)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(
                f"must be {bounds}, got {value}{'; ' + hint if hint else ''}"
            )
        return value

    parse.__name__ = "integer"  # argparse names the type in some messages
    return parse


def go_duration(text: str) -> str:
    """An argparse type: a Go duration (`30s`, `1m30s`, `10h`), kept as given."""
    try:
        parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"{err}; write a Go duration such as 30s, 5m or 10h"
        ) from None
    return text


def one_of(*names: str, empty: bool = False) -> Any:
    """An argparse type: one of `names`, any case (as the Go flags take them); "" too
    when `empty` (the flag's "not given")."""

    def parse(text: str) -> str:
        lowered = text.strip().lower()
        if lowered not in names and not (empty and not lowered):
            raise argparse.ArgumentTypeError(
                f"invalid value {text!r}; choose from {', '.join(names)}"
            )
        return lowered

    parse.__name__ = "value"
    parse.choices = names  # type: ignore[attr-defined]  # for shell completion
    return parse


def log_level(text: str) -> str:
    """An argparse type for --zap-log-level: debug, info, error (or warn, panic) or an
    integer above 0 (zap's custom debug levels)."""
    try:
        level_from_flag(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid level {text!r}; use debug, info, error or an integer above 0"
        ) from None
    return text


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


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that ends each flag's text with its default, as Go's flag sets print them;
    empty defaults are left out, and so are texts that already say what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        said = "(default" in text or text.startswith("default:")
        if said or default in (None, "", argparse.SUPPRESS) or not action.option_strings:
            return text
        shown = str(default).lower() if isinstance(default, bool) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})".lstrip()


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Register every flag of SPEC.md's `run` section. Values are checked here, when the
    flags are parsed, as the Go operator's flag set does (its durations are checked
    whether or not the feature that reads them is on); `--help` shows the defaults."""
    parser.formatter_class = DefaultsFormatter
    cpus = available_cpus()
    ansible = parser.add_argument_group("Ansible")
    ansible.add_argument(
        "--watches-file", default="./watches.yaml", metavar="PATH", help="path to watches.yaml"
    )
    ansible.add_argument(
        "--reconcile-period",
        default="10h",
        type=go_duration,
        metavar="DURATION",
        help="default period between reconciles of one resource",
    )
    ansible.add_argument(
        "--reconcile-timeout",
        default="0",
        type=go_duration,
        metavar="DURATION",
        help="stop an Ansible run that takes longer (Go duration, e.g. 30m): the CR gets a "
        "Failure condition and is retried with backoff; per watch "
        "RECONCILE_TIMEOUT_<KIND>_<GROUP> (default 0: no limit)",
    )
    ansible.add_argument(
        "--max-concurrent-reconciles",
        type=int_in_range(1),
        default=cpus,
        metavar="N",
        help="reconciles run at once per watch; default: the CPUs this process may use "
        f"(its cgroup CPU quota rounded up, else the CPU count), {cpus} here",
    )
    ansible.add_argument(
        "--max-workers",
        type=int_in_range(0, hint="0 means no global limit"),
        default=0,
        metavar="N",
        help="reconciles run at once across all watches (0: no global limit)",
    )
    _add_bool(
        ansible,
        "--priority-queue",
        default=True,
        help="reconcile created, changed and deleted resources (and those whose dependents "
        "changed) before the initial list, reconcile-period resyncs and requeue_after; "
        "=false: one FIFO queue, as the Go operator",
    )
    ansible.add_argument(
        "--memory-limit-fraction",
        type=_fraction,
        default=0.85,
        metavar="F",
        help="start no Ansible run that would take the operator's memory over this "
        "fraction of its cgroup memory limit (memory.max): it waits in the queue; "
        "0: no such limit; without a cgroup memory limit, never applies",
    )
    ansible.add_argument(
        "--ansible-verbosity",
        type=int_in_range(0, 7),
        default=2,
        metavar="N",
        help="-v count, 0-7 (ANSIBLE_VERBOSITY_<KIND>_<GROUP> overrides it per watch)",
    )
    ansible.add_argument(
        "--ansible-args", default="", metavar="ARGS", help="extra ansible-runner cmdline"
    )
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
    ansible.add_argument(
        "--ansible-roles-path",
        default="",
        metavar="PATHS",
        help="sets ANSIBLE_ROLES_PATH (default: ./roles)",
    )
    ansible.add_argument(
        "--ansible-collections-path",
        default="",
        metavar="PATHS",
        help="sets ANSIBLE_COLLECTIONS_PATH (default: "
        "/usr/share/ansible/collections:~/.ansible/collections)",
    )
    ansible.add_argument(
        "--max-artifacts-bytes",
        type=parse_size,
        default=parse_size("1Gi"),
        metavar="SIZE",
        help="disk use allowed for the run artifacts of all resources together, e.g. 500Mi "
        "or 2Gi; the oldest runs are removed first, never a resource's latest run "
        "(default: 1Gi, 0: no limit)",
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
    proxy.add_argument(
        "--proxy-port",
        type=int_in_range(0, 65535, hint="0 picks a free port"),
        default=8888,
        metavar="PORT",
        help="port of the API proxy the roles talk to (0 picks a free port)",
    )

    serving = parser.add_argument_group("metrics, health and leader election")
    serving.add_argument(
        "--metrics-bind-address",
        "--metrics-addr",
        default=":8443",
        metavar="ADDRESS",
        help="[host]:port of the metrics endpoint ('0' disables)",
    )
    _add_bool(serving, "--metrics-secure", default=False, help="serve metrics over HTTPS")
    serving.add_argument(
        "--metrics-cert-path",
        default="",
        metavar="DIR",
        help="directory with tls.crt and tls.key for --metrics-secure (default: self-signed)",
    )
    serving.add_argument(
        "--user-metrics-bind-address",
        default="127.0.0.1:5050",
        metavar="ADDRESS",
        help="where operator_sdk.util.osdk_metric tasks send metrics (loopback; '0' disables)",
    )
    _add_bool(
        serving,
        "--metrics-require-rbac",
        default=False,
        help="check metrics callers with TokenReview/SubjectAccessReview (needs HTTPS)",
    )
    serving.add_argument(
        "--health-probe-bind-address",
        default=":6789",
        metavar="ADDRESS",
        help="[host]:port of /healthz and /readyz ('0' disables)",
    )
    _add_bool(
        serving,
        "--leader-elect",
        default=False,
        help="elect a leader with a coordination.k8s.io Lease",
    )
    _add_bool(serving, "--enable-leader-election", default=False, help="deprecated alias")
    serving.add_argument(
        "--leader-election-id", default="", metavar="NAME", help="default: $OPERATOR_NAME"
    )
    serving.add_argument(
        "--leader-election-namespace",
        default="",
        metavar="NAMESPACE",
        help="namespace of the Lease (default: the pod's namespace)",
    )
    for flag, default, meaning in (
        ("--leader-elect-lease-duration", "15s", "how long others wait to take over"),
        ("--leader-elect-renew-deadline", "10s", "how long the leader tries to renew"),
        ("--leader-elect-retry-period", "2s", "pause between attempts"),
    ):
        serving.add_argument(
            flag, default=default, type=go_duration, metavar="DURATION", help=meaning
        )
    _add_bool(
        serving,
        "--sharding",
        default=False,
        help="spread CRs over all replicas (one Lease each) instead of electing a leader",
    )
    serving.add_argument(
        "--sharding-ring",
        default="",
        metavar="NAME",
        help="the ring's name (default: $OPERATOR_NAME, else from the directory)",
    )
    serving.add_argument(
        "--sharding-namespace",
        default="",
        metavar="NAMESPACE",
        help="namespace of the ring's Leases (default: the pod's namespace)",
    )
    for flag, default, meaning in (
        ("--sharding-lease-duration", "15s", "how long before a silent replica's CRs move"),
        ("--sharding-renew-deadline", "10s", "how long a replica tries to renew its Lease"),
        ("--sharding-retry-period", "2s", "pause between renewals and member checks"),
    ):
        serving.add_argument(
            flag, default=default, type=go_duration, metavar="DURATION", help=meaning
        )
    serving.add_argument(
        "--leader-elect-resource-lock",
        default="leases",
        metavar="KIND",
        help="accepted; always a Lease",
    )
    serving.add_argument(
        "--graceful-shutdown-timeout",
        default="30s",
        type=go_duration,
        metavar="DURATION",
        help="how long running reconciles may take to finish on stop",
    )
    _add_bool(serving, "--enable-http2", default=False, help="serve metrics over HTTP/2")

    webhook_runtime.add_arguments(parser)

    logging = parser.add_argument_group("logging")
    logging.add_argument(
        "--zap-log-level",
        default="info",
        metavar="LEVEL",
        type=log_level,
        help="debug, info, error or an integer above 0 (more output)",
    )
    _add_bool(logging, "--zap-devel", default=False, help="development logging defaults")
    logging.add_argument(
        "--zap-encoder",
        default="",
        metavar="ENCODER",
        type=one_of("json", "console", empty=True),
        help="json or console (default: console on a terminal, else json)",
    )
    logging.add_argument(
        "--zap-stacktrace-level",
        default="error",
        metavar="LEVEL",
        type=one_of("info", "error", "panic"),
        help="info, error or panic",
    )
    logging.add_argument(
        "--zap-time-encoding",
        default="epoch",
        metavar="ENCODING",
        type=one_of("epoch", "millis", "nanos", "iso8601", "rfc3339", "rfc3339nano"),
        help="epoch, millis, nanos, iso8601, rfc3339 or rfc3339nano",
    )
