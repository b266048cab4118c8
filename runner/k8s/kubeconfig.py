"""Finding the cluster: which kubeconfig the client would load, checked before loading.

kubernetes-asyncio reports a bad kubeconfig with errors that name neither the file nor the
cure (an empty file raises a TypeError from deep inside its merge code, a missing one says
"Expected key current-context"), and with no kubeconfig at all outside a pod it says
"Service host/port is not set". `locate()` reads the file first and turns each of these
into one sentence that names the file, where it came from and what to do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from runner.errors import ConfigError
from runner.util.fields import describe
from runner.util.yamlerror import describe_yaml_error

__all__ = ["NO_CLUSTER", "Source", "check_file", "locate"]

NO_CLUSTER = (
    "no Kubernetes cluster found: KUBECONFIG is not set, ~/.kube/config does not exist "
    "and this is not a pod; set KUBECONFIG to a kubeconfig file, or start a local cluster "
    "with `ansible-operator cluster up` and `eval $(ansible-operator cluster env)`"
)
_CURE = (
    "point KUBECONFIG at a working kubeconfig, or start a local cluster with "
    "`ansible-operator cluster up` and `eval $(ansible-operator cluster env)`"
)


@dataclass(frozen=True)
class Source:
    """A kubeconfig file to load, and how it was chosen (for messages)."""

    path: str
    origin: str  # "KUBECONFIG=<path>", "--kubeconfig <path>" or "~/.kube/config"


def check_file(source: Source) -> None:
    """Raise ConfigError unless `source.path` is a readable YAML mapping (a kubeconfig)."""
    where = source.origin
    try:
        text = Path(source.path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file; {_CURE}") from None
    except IsADirectoryError:
        raise ConfigError(f"{where}: is a directory, not a kubeconfig file; {_CURE}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{where}: cannot read it: {err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not valid YAML {describe_yaml_error(err)}") from None
    if data is None:
        raise ConfigError(f"{where}: the file is empty; {_CURE}")
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where}: not a kubeconfig (expected a mapping with clusters, users, contexts "
            f"and current-context, got {describe(data)})"
        )
    if not data.get("current-context"):
        contexts = [
            str(item.get("name"))
            for item in data.get("contexts") or ()
            if isinstance(item, Mapping) and item.get("name")
        ]
        hint = f"; its contexts: {', '.join(contexts)}" if contexts else ""
        raise ConfigError(
            f"{where}: sets no current-context (`kubectl config use-context NAME`){hint}"
        )


def locate(
    explicit: str | None, environ: Mapping[str, str], *, home: str | None = None
) -> Source | None:
    """The kubeconfig file the client loads, checked; None inside a pod (in-cluster
    config). Raises ConfigError with NO_CLUSTER when there is neither."""
    if explicit:
        paths, origin = explicit, "--kubeconfig {}"
        if explicit == environ.get("KUBECONFIG", "").split(os.pathsep)[0]:
            origin = "KUBECONFIG={}"
    elif environ.get("KUBECONFIG"):
        paths, origin = environ["KUBECONFIG"], "KUBECONFIG={}"
    else:
        default = os.path.join(home or os.path.expanduser("~"), ".kube", "config")
        if os.path.exists(default):
            source = Source(default, "~/.kube/config")
            check_file(source)
            return source
        if environ.get("KUBERNETES_SERVICE_HOST") and environ.get("KUBERNETES_SERVICE_PORT"):
            return None
        raise ConfigError(NO_CLUSTER)
    first = paths.split(os.pathsep)[0]
    source = Source(first, origin.format(first))
    check_file(source)
    return source
