"""What a webhook's warm runner runs: the files and environment of its full run.

A warm runner must see what a full run of the same webhook sees: the same play (for a
role, the wrapper play `project/main.json`), the same generated inventory, the
environment the fast backend gives ansible-playbook, the same `ANSIBLE_ROLES_PATH` and
working directory (`project/`). Those are written once per webhook under
`<run dir>/webhooks/<group>/<version>/<kind>/<type>/warm/`.

Some settings are only honoured by full runs; a webhook then keeps them (`why_full`):
`--ansible-args` (arbitrary ansible-playbook options) and `ANSIBLE_INVENTORY` (a user's
inventory instead of the generated one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from runner.ansible import inputs
from runner.ansible.warm.pool import WarmTarget
from runner.webhooks.declarations import Webhook

__all__ = ["target", "warm_key", "why_full"]

_DROPPED = ("AWX_ISOLATED_DATA_DIR", "ANSIBLE_CACHE_PLUGIN_CONNECTION")
"""Variables naming one full run's artifact directory."""


def warm_key(webhook: Webhook) -> str:
    return f"{webhook.type}:{webhook.gvk.group}/{webhook.gvk.version}/{webhook.gvk.kind}"


def why_full(environ: Mapping[str, str], ansible_args: str) -> str | None:
    """Why no webhook can run warm with these settings; None when they can."""
    if inputs.strip_quotes(ansible_args):
        return "--ansible-args is set (its options apply to full runs)"
    if inputs.inventory_source(environ) is not None:
        return "ANSIBLE_INVENTORY is set (a full run copies that inventory)"
    return None


def target(
    webhook: Webhook,
    *,
    base: Path,
    run_env: Mapping[str, str],
    verbosity: int,
) -> WarmTarget:
    """Write the webhook's warm directory under `base` (the webhook runs' base directory)
    and describe its warm runner. `run_env`: the backend's environment for a run, which
    also decides the inventory line and the roles path, as a full run's does."""
    directory = inputs.private_data_dir(base, webhook.gvk, webhook.type, "warm")
    env = {key: value for key, value in run_env.items() if key not in _DROPPED}
    # A full run's fact cache is a directory of that run (so empty at its start): here
    # the memory cache of each request's variable manager.
    env["ANSIBLE_CACHE_PLUGIN"] = "memory"
    hosts = directory / inputs.HOSTS_FILE
    _write(hosts, inputs.hosts_line(run_env))
    project = directory / "project"
    project.mkdir(parents=True, exist_ok=True)
    if webhook.role is not None:
        playbook = directory / inputs.ROLE_PLAYBOOK
        _write(playbook, json.dumps(inputs.role_playbook(webhook.role, environ=env)))
        env["ANSIBLE_ROLES_PATH"] = inputs.roles_path(
            webhook.role, data_dir=directory, environ=run_env
        )
    else:
        assert webhook.playbook is not None  # guaranteed by the declaration
        playbook = webhook.playbook
    return WarmTarget(
        label=webhook.describe(),
        playbook=playbook,
        inventory=hosts,
        cwd=project,
        env=env,
        verbosity=verbosity,
    )


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
