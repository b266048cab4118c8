"""A callback plugin that installs the `preview` hook into a planned run.

`ansible-operator plan` puts this directory on `ANSIBLE_CALLBACK_PLUGINS` and its mode in
`ANSIBLE_OPERATOR_PLAN` (`runner.ansible.hooks.previewactions`); the plugin then installs
`runner.ansible.hooks.preview` before the first task, which skips the tasks a plan cannot
preview. It receives no events. Without the variable it does nothing.

It fails closed: a planned run in which the hook cannot be installed (the operator's
package not importable, an ansible-core the hook was not tested with) stops before its
first task, unless side effects were allowed — then nothing is skipped anyway.
"""

from __future__ import annotations

import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: ansible_operator_plan
type: aggregate
short_description: skip the tasks an ansible-operator plan cannot preview
description:
  - Installs the ansible-operator plan hook, which skips tasks acting outside the
    Kubernetes API, when ANSIBLE_OPERATOR_PLAN is set.
"""

_ENV = "ANSIBLE_OPERATOR_PLAN"


class CallbackModule(CallbackBase):  # type: ignore[misc]
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "ansible_operator_plan"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        text = os.environ.get(_ENV)
        if not text:
            return
        allowed = '"allow_side_effects": true' in text
        try:
            from runner.ansible import hooks
            from runner.ansible.hooks import preview
            from runner.ansible.hooks.previewactions import PlanMode

            mode = PlanMode.decode(text)
            if not hooks.enabled("preview"):
                raise RuntimeError(
                    f"ansible-core {hooks.running_core_version()} is not a version the preview "
                    "hook was tested with"
                )
            preview.install(mode)
        except Exception as exc:
            if allowed:
                self._display.warning(f"ansible-operator plan: tasks are not skipped: {exc}")
                return
            self._display.error(
                f"ansible-operator plan: cannot skip the tasks a plan cannot preview ({exc}); "
                "stopping before the first task"
            )
            raise SystemExit(3) from exc
