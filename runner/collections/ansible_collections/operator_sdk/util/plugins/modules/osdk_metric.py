#!/usr/bin/python
"""operator_sdk.util.osdk_metric: create or update a custom Prometheus metric."""

from __future__ import annotations

import json
import os
from typing import Any
from urllib.error import HTTPError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

DOCUMENTATION = r"""
module: osdk_metric
short_description: Create or update a custom Prometheus metric of the operator
version_added: "0.4.0"
author:
  - ansible-operator for Python maintainers
description:
  - Sends a metric update to the operator, which keeps the metric and exports it with
    its own metrics. The first update of a name creates the metric with that type and
    help text; the type of an existing metric cannot change.
  - Exactly one of I(counter), I(gauge), I(histogram) or I(summary) must be given. An
    empty mapping only makes sure the metric exists.
  - See U(https://prometheus.io/docs/concepts/metric_types/) for what each type means.
options:
  name:
    description:
      - Name of the metric, used as is (no prefix is added).
    type: str
    required: true
  description:
    description:
      - Help text of the metric.
    type: str
    required: true
  address:
    description:
      - URL of the operator's metrics endpoint.
      - When not given, the address the operator announces to its runs in
        C(ANSIBLE_OPERATOR_USER_METRICS_ADDRESS), else C(http://localhost:5050/metrics).
    type: str
  counter:
    description:
      - Update a counter.
    type: dict
    suboptions:
      increment:
        description: Add one.
        type: bool
      add:
        description: Add this (non-negative) value.
        type: float
  gauge:
    description:
      - Update a gauge. When several operations are given the operator applies one, in
        this order of precedence - increment, decrement, add, subtract, set,
        set_to_current_time.
    type: dict
    suboptions:
      set:
        description: Set to this value.
        type: float
      increment:
        description: Add one.
        type: bool
      decrement:
        description: Subtract one.
        type: bool
      add:
        description: Add this value.
        type: float
      subtract:
        description: Subtract this value.
        type: float
      set_to_current_time:
        description: Set to the current Unix time in seconds.
        type: bool
  histogram:
    description:
      - Update a histogram (default buckets).
    type: dict
    suboptions:
      observe:
        description: Record one observation of this value.
        type: float
  summary:
    description:
      - Update a summary.
    type: dict
    suboptions:
      observe:
        description: Record one observation of this value.
        type: float
notes:
  - The request is a JSON C(POST) to I(address); any answer but C(200) fails the task
    with the answer's text.
  - Check mode is not supported; the task is skipped.
"""

EXAMPLES = r"""
- name: Make sure a counter exists
  operator_sdk.util.osdk_metric:
    name: things_seen_total
    description: Things the operator has seen
    counter: {}

- name: Count one more thing
  operator_sdk.util.osdk_metric:
    name: things_seen_total
    description: Things the operator has seen
    counter:
      increment: true

- name: Set a gauge
  operator_sdk.util.osdk_metric:
    name: memcached_replicas
    description: Replicas requested for Memcached
    gauge:
      set: "{{ size }}"

- name: Record how long a backup took
  operator_sdk.util.osdk_metric:
    name: backup_duration_seconds
    description: Duration of backups
    histogram:
      observe: 12.5
"""

RETURN = r"""
msg:
  description: The text of the metrics endpoint's answer.
  returned: failure
  type: str
status_code:
  description: HTTP status of the metrics endpoint's answer, when it was not 200.
  returned: failure
  type: int
"""

METRIC_TYPES = ("counter", "gauge", "histogram", "summary")

ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "name": {"type": "str", "required": True},
    "description": {"type": "str", "required": True},
    "address": {"type": "str"},
    "counter": {
        "type": "dict",
        "options": {
            "increment": {"type": "bool"},
            "add": {"type": "float"},
        },
    },
    "gauge": {
        "type": "dict",
        "options": {
            "set": {"type": "float"},
            "increment": {"type": "bool"},
            "decrement": {"type": "bool"},
            "add": {"type": "float"},
            "subtract": {"type": "float"},
            "set_to_current_time": {"type": "bool"},
        },
    },
    "histogram": {"type": "dict", "options": {"observe": {"type": "float"}}},
    "summary": {"type": "dict", "options": {"observe": {"type": "float"}}},
}

TIMEOUT = 30
DEFAULT_ADDRESS = "http://localhost:5050/metrics"
# Set by the operator for each run: where its endpoint really listens.
ADDRESS_ENV = "ANSIBLE_OPERATOR_USER_METRICS_ADDRESS"


def payload(params: dict[str, Any]) -> dict[str, Any]:
    """The request body: name, description and the one metric type, with all its keys.

    Ansible gives every sub-option of the chosen type, unset ones as None; they are sent
    as JSON nulls, exactly like the upstream module does.
    """
    body: dict[str, Any] = {"name": params["name"], "description": params["description"]}
    for kind in METRIC_TYPES:
        if params.get(kind) is not None:
            body[kind] = params[kind]
    return body


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        mutually_exclusive=[list(METRIC_TYPES)],
        required_one_of=[list(METRIC_TYPES)],
        supports_check_mode=False,
    )
    url = module.params["address"] or os.environ.get(ADDRESS_ENV) or DEFAULT_ADDRESS
    data = json.dumps(payload(module.params)).encode("utf-8")
    try:
        response = open_url(
            url,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json"},
            timeout=TIMEOUT,
            follow_redirects="none",
        )
        status = response.getcode()
        text = response.read().decode("utf-8", "replace")
    except HTTPError as exc:  # any answer outside 2xx
        status = exc.code
        text = exc.read().decode("utf-8", "replace")
    except Exception as exc:
        module.fail_json(msg=f"Could not send metric {module.params['name']!r} to {url}: {exc}")
    if status != 200:
        module.fail_json(msg=text, status_code=status)
    module.exit_json(changed=True)


if __name__ == "__main__":
    main()
