"""The exception tree of the project.

    AnsibleOperatorError
    ├── ConfigError          bad watches.yaml, flags or project files; raised at start-up
    ├── ReconcileError       one reconcile did not finish
    │   ├── TemporaryError   retry after `delay` seconds
    │   └── TerminalError    retrying cannot help; the status says why
    ├── AnsibleRunError      ansible-runner could not run or report a result
    ├── ProxyError           the API proxy cannot serve
    └── ClusterError         the local control plane cannot be built, started or stopped

Errors carry their context in the message (file, entry, key, value) so that the edge
(the CLI or the reconciler) can print them as they are.
"""

from __future__ import annotations


class AnsibleOperatorError(Exception):
    """Base of every error this project raises on purpose."""


class ConfigError(AnsibleOperatorError):
    """Invalid configuration: the operator must not start half-configured."""


class ReconcileError(AnsibleOperatorError):
    """A reconcile did not finish."""


class TemporaryError(ReconcileError):
    """Retry the same key after `delay` seconds."""

    def __init__(self, message: str, *, delay: float) -> None:
        super().__init__(message)
        self.delay = delay


class TerminalError(ReconcileError):
    """Retrying will not help until the object changes."""


class AnsibleRunError(AnsibleOperatorError):
    """ansible-runner could not start or did not report a result."""


class ProxyError(AnsibleOperatorError):
    """The API proxy cannot serve."""


class ClusterError(AnsibleOperatorError):
    """The local control plane cannot be built, started or stopped."""
