"""The Molecule scenarios of a project: the shared playbooks, and two scenarios per kind.

`init` writes molecule/shared/ (`shared_files`: `molecule_cluster` sets up and tears
down the cluster, `molecule_runs` runs the operator or a role). `create api` adds, for the
new kind, molecule/<kind>/, which runs `ansible-operator run` on the kind's sample CR, and
molecule/<kind>-role/, which runs the kind's role alone with the extra-vars a reconcile of
that sample would get. Each is a molecule.yml, a vars.yml naming the sample and the role,
and a verify.yml checking what the generated role does (the ConfigMap `<name>-<kind>`
holds `spec.message`), for the user to extend as the role grows.
"""

from __future__ import annotations

from runner.devtools.scaffold.molecule.clusterside import cluster_files
from runner.devtools.scaffold.molecule.scenarioruns import run_files, scenario_config
from runner.devtools.scaffold.names import Resource

__all__ = ["kind_files", "scenario_dirs", "shared_files"]

_VARS = """\
---
# What this scenario tests: the sample CR (relative to the project directory) and the
# role of its kind.
sample_file: config/samples/@SAMPLE_FILE@
role_name: @ROLE@
"""

_OPERATOR_VERIFY = """\
---
# What the operator did with the sample @KIND@: a Successful condition without failed
# tasks, and what the role keeps, the ConfigMap <name>-@SINGULAR@ holding spec.message.
# After the message changes, the ConfigMap follows; after the @KIND@ is deleted, the
# ConfigMap it owns is gone. Add the checks of what your role does.
- name: Verify
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - ../shared/vars.yml
    - vars.yml
  environment:
    K8S_AUTH_KUBECONFIG: "{{ kubeconfig }}"
  vars:
    configmap_name: "{{ sample_name }}-@SINGULAR@"
    new_message: Changed by Molecule
  tasks:
    - name: The sample @KIND@ and what the operator made of it
      block:
        - name: The @KIND@ reports Successful
          kubernetes.core.k8s_info:
            api_version: "{{ sample.apiVersion }}"
            kind: "{{ sample.kind }}"
            name: "{{ sample_name }}"
            namespace: "{{ test_namespace }}"
            wait: true
            wait_condition:
              type: Successful
              status: "True"
            wait_timeout: "{{ wait_timeout }}"
          register: cr

        - name: Its last run had no failed task
          ansible.builtin.assert:
            that:
              - results | length > 0
              - results | map(attribute='failures') | select('ne', 0) | list | length == 0
            fail_msg: "ansibleResult of the @KIND@'s conditions: {{ results }}"
          vars:
            results: >-
              {{ cr.resources[0].status.conditions | selectattr('ansibleResult', 'defined')
                 | map(attribute='ansibleResult') | list }}

        - name: ConfigMap {{ configmap_name }} holds the sample's message
          kubernetes.core.k8s_info:
            api_version: v1
            kind: ConfigMap
            name: "{{ configmap_name }}"
            namespace: "{{ test_namespace }}"
          register: configmap
          until: >-
            configmap.resources | length == 1
            and configmap.resources[0].data.message == sample.spec.message
          retries: 30
          delay: 1

        - name: Change the message
          kubernetes.core.k8s:
            api_version: "{{ sample.apiVersion }}"
            kind: "{{ sample.kind }}"
            name: "{{ sample_name }}"
            namespace: "{{ test_namespace }}"
            state: patched
            definition:
              spec:
                message: "{{ new_message }}"

        - name: The ConfigMap follows
          kubernetes.core.k8s_info:
            api_version: v1
            kind: ConfigMap
            name: "{{ configmap_name }}"
            namespace: "{{ test_namespace }}"
          register: configmap
          until: >-
            configmap.resources | length == 1
            and configmap.resources[0].data.message == new_message
          retries: "{{ wait_timeout }}"
          delay: 1

        - name: Delete the @KIND@ and wait until it is gone
          kubernetes.core.k8s:
            api_version: "{{ sample.apiVersion }}"
            kind: "{{ sample.kind }}"
            name: "{{ sample_name }}"
            namespace: "{{ test_namespace }}"
            state: absent
            wait: true
            wait_timeout: "{{ wait_timeout }}"

        - name: The ConfigMap it owned is gone
          kubernetes.core.k8s_info:
            api_version: v1
            kind: ConfigMap
            name: "{{ configmap_name }}"
            namespace: "{{ test_namespace }}"
          register: configmap
          until: configmap.resources | length == 0
          retries: 60
          delay: 1
      rescue:
        - name: Show the end of the operator's log
          ansible.builtin.fail:
            msg: |-
              {{ ansible_failed_task.name }}: {{ ansible_failed_result.msg | default('failed') }}
              The operator's log ({{ operator_log }}) ends with:
              {{ lookup('ansible.builtin.pipe', 'tail -n 40 ' ~ (operator_log | quote)) }}
"""

_ROLE_VERIFY = """\
---
# What the @ROLE@ role made of the sample @KIND@: the ConfigMap <name>-@SINGULAR@ holding
# spec.message. Add the checks of what your role does.
- name: Verify
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - ../shared/vars.yml
    - vars.yml
  environment:
    K8S_AUTH_KUBECONFIG: "{{ kubeconfig }}"
  tasks:
    - name: ConfigMap {{ sample_name }}-@SINGULAR@ holds the sample's message
      kubernetes.core.k8s_info:
        api_version: v1
        kind: ConfigMap
        name: "{{ sample_name }}-@SINGULAR@"
        namespace: "{{ test_namespace }}"
      register: configmap
      failed_when: >-
        configmap.resources | length != 1
        or configmap.resources[0].data.message != sample.spec.message
"""


def shared_files(project_name: str) -> dict[str, str]:
    """molecule/shared/: every playbook the scenarios have in common."""
    return {**cluster_files(project_name), **run_files()}


def scenario_dirs(resource: Resource) -> tuple[str, str]:
    """The kind's operator scenario and role scenario, under molecule/."""
    return resource.singular, f"{resource.singular}-role"


def kind_files(resource: Resource) -> dict[str, str]:
    """The kind's two scenarios, wired to its sample CR and its role."""

    def fill(template: str) -> str:
        return (
            template.replace("@KIND@", resource.kind)
            .replace("@SINGULAR@", resource.singular)
            .replace("@ROLE@", resource.role_name)
            .replace("@SAMPLE_FILE@", resource.sample_file)
        )

    operator, role = (f"molecule/{name}" for name in scenario_dirs(resource))
    return {
        f"{operator}/molecule.yml": scenario_config("operator"),
        f"{operator}/vars.yml": fill(_VARS),
        f"{operator}/verify.yml": fill(_OPERATOR_VERIFY),
        f"{role}/molecule.yml": scenario_config("role"),
        f"{role}/vars.yml": fill(_VARS),
        f"{role}/verify.yml": fill(_ROLE_VERIFY),
    }
