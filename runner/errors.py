"""The exception tree of the project: every error it raises on purpose is one of these.

    AnsibleOperatorError
    ├── ConfigError          bad watches.yaml, flags or project files; raised at start-up
    ├── ReconcileError       one reconcile could not finish; its key is retried with backoff
    ├── AnsibleRunError      the Ansible run could not start or report a result
    ├── ProxyError           the API proxy cannot serve
    ├── ClusterError         the local control plane cannot be built, started or stopped
    ├── OLMError             OLM did not do what it was asked   (runner/devtools/olm/steps.py)
    └── APIError             a failed API request               (runner/k8s/apierrors.py)
        ├── Forbidden        403
        ├── NotFound         404
        ├── Conflict         409: somebody else wrote first; routine, retried quietly
        ├── Gone             410
        ├── Invalid          422: the server rejects the body; a reconcile ends terminally
        └── Unavailable      no answer, 429 or 5xx; retry later

A reconcile does not raise to its controller: it returns an outcome value
(`runner.engine.outcome`), and the errors above that it meets become one there
(`outcome_of`). Errors carry their context in the message (file, entry, key, value) so
that the edge (the CLI, a Failure condition) can show them as they are.

Outside the tree, on purpose: exceptions that are control flow between a module and its
direct caller (the work queue's `QueueShutDown`, a run's private time-out signal), parse
errors a loader turns into a `ConfigError` naming file and field (`FieldError`), and the
bundled Ansible collection's, which runs inside Ansible and cannot import this package.
"""

from __future__ import annotations


class AnsibleOperatorError(Exception):
    """Base of every error this project raises on purpose."""


class ConfigError(AnsibleOperatorError):
    """Invalid configuration: the operator must not start half-configured."""


class ReconcileError(AnsibleOperatorError):
    """A reconcile could not finish (e.g. its writes kept conflicting); retrying may help."""


class AnsibleRunError(AnsibleOperatorError):
    """The Ansible run could not start or did not report a result."""


class ProxyError(AnsibleOperatorError):
    """The API proxy cannot serve."""


class ClusterError(AnsibleOperatorError):
    """The local control plane cannot be built, started or stopped."""
