#!/usr/bin/python
"""operator_sdk.util.requeue_after: ask the operator to reconcile again after a while."""

from __future__ import annotations

import re

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: requeue_after
short_description: Ask the operator to reconcile the resource again after a period
version_added: "0.0.1"
author:
  - ansible-operator for Python maintainers
description:
  - Returns the requested period as C(period). The operator reads it from the task's event
    and reconciles the custom resource again once the period has passed, instead of
    waiting for the watch's reconcile period.
  - The module itself changes nothing.
options:
  time:
    description:
      - The period, as a Go duration made of hours, minutes, seconds and milliseconds,
        such as C(30s), C(5m), C(1h30m) or C(500ms).
    type: str
    required: true
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Check again in half a minute
  operator_sdk.util.requeue_after:
    time: 30s

- name: Check again in a day
  operator_sdk.util.requeue_after:
    time: 24h
"""

RETURN = r"""
period:
  description: The requested period, exactly as given in I(time).
  returned: success
  type: str
  sample: 1m30s
"""

# The characters upstream accepts, and the shape the operator can parse as a duration.
_ALLOWED = re.compile(r"^[hms0-9]*$")
_DURATION = re.compile(r"^(?:0|(?:[0-9]+(?:ms|h|m|s))+)$")


def main() -> None:
    module = AnsibleModule(
        argument_spec={"time": {"type": "str", "required": True}},
        supports_check_mode=True,
    )
    period = module.params["time"]
    if not (_ALLOWED.match(period) and _DURATION.match(period)):
        module.fail_json(
            msg=(
                f"invalid time input {period!r}: expected a duration such as "
                "30s, 5m, 1h30m or 500ms (digits followed by h, m, s or ms)"
            )
        )
    module.exit_json(changed=False, period=period)


if __name__ == "__main__":
    main()
