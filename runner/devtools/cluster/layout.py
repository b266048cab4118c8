"""Where a local cluster keeps its files: the state dir and the PKI's file names in it.

Paths only, no IO and no `cryptography`: `ansible-operator run` reads them to find a
local cluster's CA (`runner.devtools.cluster.trust`) on every start, and should not pay for the
modules that make certificates or run a control plane to do so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    configured = env.get("ANSIBLE_OPERATOR_CLUSTER_DIR")
    return Path(configured).resolve() if configured else Path.cwd() / ".cluster"


@dataclass(frozen=True)
class PKI:
    """Paths of the files the control plane is started with."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    service_account_key: Path
    service_account_pub: Path

    @classmethod
    def under(cls, directory: Path) -> PKI:
        return cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            serving_cert=directory / "apiserver.crt",
            serving_key=directory / "apiserver.key",
            service_account_key=directory / "sa.key",
            service_account_pub=directory / "sa.pub",
        )
