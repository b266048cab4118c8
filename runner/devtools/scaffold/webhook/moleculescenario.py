"""The Molecule scenario `create webhook` writes for a kind, `molecule/<kind>-webhooks`:
it asks the API server for what the webhook roles do. A later `create webhook` for the
same kind appends the new webhooks' checks to the scenario's verify.yml (`add_checks`).
Pure: texts in, texts out.
"""

from __future__ import annotations

import textwrap

from runner.devtools.scaffold import yamltext
from runner.devtools.scaffold.molecule.scenarioruns import scenario_config
from runner.devtools.scaffold.names import Resource
from runner.errors import ConfigError

_MOLECULE_VARS = """\
---
# What this scenario tests: the webhooks of {kind}, through the operator that serves them
# (`ansible-operator run` registers them at its loopback server), with the sample CR.
sample_file: config/samples/{sample_file}
role_name: {role}
"""

_MOLECULE_VERIFY_HEAD = """\
---
# What the {kind} webhooks do, asked through the API server: each check creates a new
# {kind} (generateName), retried while the webhook registration reaches the API server.
# Add the checks of what your webhook roles do.
- name: Verify
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - ../shared/vars.yml
    - vars.yml
  environment:
    K8S_AUTH_KUBECONFIG: "{{{{ kubeconfig }}}}"
  tasks:
"""

_MOLECULE_VERIFY_DEFAULTING = """\
    - name: A new {kind} without a size gets size 1 (roles/{singular}_defaulting)
      kubernetes.core.k8s:
        state: present
        namespace: "{{{{ test_namespace }}}}"
        generate_name: "{{{{ sample_name }}}}-defaulted-"
        definition:
          apiVersion: "{{{{ sample.apiVersion }}}}"
          kind: "{{{{ sample.kind }}}}"
          spec:
            message: defaulted by the webhook
      register: defaulted
      until: (defaulted.result.spec.size | default(none)) == 1
      retries: 30
      delay: 2
"""

_MOLECULE_VERIFY_VALIDATION = """\
    - name: A {kind} with a negative size is refused (roles/{singular}_validation)
      kubernetes.core.k8s:
        state: present
        namespace: "{{{{ test_namespace }}}}"
        generate_name: "{{{{ sample_name }}}}-negative-"
        definition:
          apiVersion: "{{{{ sample.apiVersion }}}}"
          kind: "{{{{ sample.kind }}}}"
          spec:
            size: -1
      register: refused
      failed_when: false
      until: "'must not be negative' in (refused.msg | default('') | string)"
      retries: 30
      delay: 2

    - name: The refusal carries the role's message
      ansible.builtin.assert:
        that:
          - "'spec.size must not be negative, got -1' in (refused.msg | string)"
        fail_msg: "expected the validation role's message, got: {{{{ refused.msg | default('') }}}}"
"""

_MOLECULE_VERIFY_NONE = """\
    - name: The sample {kind} is reconciled with its webhooks served
      kubernetes.core.k8s_info:
        api_version: "{{{{ sample.apiVersion }}}}"
        kind: "{{{{ sample.kind }}}}"
        name: "{{{{ sample_name }}}}"
        namespace: "{{{{ test_namespace }}}}"
      register: cr
      failed_when: cr.resources | length != 1
"""


def scenario_files(resource: Resource, *, defaulting: bool, validation: bool) -> dict[str, str]:
    """`molecule/<kind>-webhooks`'s files, checking the chosen webhooks."""
    values = {
        "kind": resource.kind,
        "singular": resource.singular,
        "sample_file": resource.sample_file,
        "role": resource.role_name,
    }
    verify = _MOLECULE_VERIFY_HEAD.format(**values)
    checks = []
    if defaulting:
        checks.append(_MOLECULE_VERIFY_DEFAULTING.format(**values))
    if validation:
        checks.append(_MOLECULE_VERIFY_VALIDATION.format(**values))
    verify += "\n".join(checks or [_MOLECULE_VERIFY_NONE.format(**values)])
    directory = f"molecule/{resource.singular}-webhooks"
    return {
        f"{directory}/molecule.yml": scenario_config("operator"),
        f"{directory}/vars.yml": _MOLECULE_VARS.format(**values),
        f"{directory}/verify.yml": verify,
    }


def add_checks(text: str, resource: Resource, *, defaulting: bool, validation: bool) -> str:
    """An existing scenario's verify.yml with the checks of the new webhooks appended
    to its tasks; unchanged when it no longer has the shape `create webhook` wrote."""
    values = {"kind": resource.kind, "singular": resource.singular}
    checks = []
    if defaulting:
        checks.append(_MOLECULE_VERIFY_DEFAULTING.format(**values))
    if validation:
        checks.append(_MOLECULE_VERIFY_VALIDATION.format(**values))
    if not checks:
        return text
    before = yamltext.load(text, source="verify.yml")
    result = yamltext.append_block(text, "\n" + "\n".join(checks))
    try:
        after = yamltext.load(result, source="verify.yml")
        added = yamltext.load(textwrap.dedent("\n".join(checks)), source="checks")
    except ConfigError:
        return text
    plays_match = (
        isinstance(before, list)
        and isinstance(after, list)
        and len(before) == len(after) == 1
        and isinstance(added, list)
    )
    if not plays_match or after[0].get("tasks") != [*before[0].get("tasks", []), *added]:
        return text
    return result
