"""A callback plugin that only shares AnsiballZ payloads between the operator's runs.

ansible-playbook packs every Python module and the module_utils it imports into an
AnsiballZ payload, and forgets it when it exits: with one ansible-playbook per reconcile
(the `runner` backend), every run builds every payload again, about a sixth of the CPU of
a Kubernetes role's run. Loaded into each run (`ANSIBLE_CALLBACK_PLUGINS`, set by the
backend), this plugin points ansible-core at the backend's payload store
(`ANSIBLE_OPERATOR_PAYLOAD_STORE`; `runner.ansible.hooks.payloads`), where a payload is kept
with the size, modification time and inode of every file it was built from and reused
only while none of them changed. It receives no events. Where the operator's package is
not importable (an ansible-playbook from another Python), or the ansible-core it runs in is
not one the payload hook was tested with (`runner.ansible.hooks`), it does nothing.
"""

from __future__ import annotations

import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: ansible_operator_payloads
type: aggregate
short_description: share module payloads between ansible-operator runs
description:
  - Makes a module's AnsiballZ payload be built once and reused by later runs of the
    operator while none of the files it was built from changed.
  - Does nothing without the ANSIBLE_OPERATOR_PAYLOAD_STORE environment variable.
"""


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ansible_operator_payloads"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        try:
            from runner.ansible import hooks
            from runner.ansible.hooks import payloads
        except ImportError:
            return
        store = os.environ.get(payloads.STORE_ENV)
        if not store or not hooks.enabled("payloads"):
            return  # not tested with this ansible-core: the operator warned at start-up
        try:
            payloads.install(store)
        except Exception as exc:  # the run goes on as it would without this plugin
            self._display.warning(f"ansible-operator: module payloads are not shared: {exc}")
