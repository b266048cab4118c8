"""The Molecule scenario of a new project (`molecule/default/`), run without Docker.

Molecule drives plain playbooks on localhost against a real cluster: `$KUBECONFIG` when
set, otherwise the project's local cluster (`ansible-operator cluster up`). Converge
installs the project's CRDs and a test namespace; verify checks that they are served.
"""

from __future__ import annotations

__all__ = ["molecule_files"]

_MOLECULE = """\
---
# Runs on localhost against a real cluster, no containers: $KUBECONFIG when set,
# otherwise the local one (`ansible-operator cluster up`).
dependency:
  name: galaxy
  enabled: false
driver:
  name: default
  options:
    managed: false
platforms:
  - name: cluster
provisioner:
  name: ansible
  inventory:
    host_vars:
      cluster:
        ansible_connection: local
  env:
    ANSIBLE_ROLES_PATH: ${MOLECULE_PROJECT_DIRECTORY}/roles
scenario:
  test_sequence:
    - syntax
    - converge
    - verify
"""

_VARS = """\
  vars:
    project_dir: "{{ lookup('env', 'MOLECULE_PROJECT_DIRECTORY') }}"
    kubeconfig: >-
      {{ lookup('env', 'KUBECONFIG')
         or lookup('pipe', 'ansible-operator cluster kubeconfig') }}
    test_namespace: "{{ lookup('env', 'TEST_NAMESPACE') | default('@PROJECT@-test', true) }}"
    crd_files: "{{ query('fileglob', project_dir ~ '/config/crd/bases/*.yaml') }}"
"""

_CONVERGE = """\
---
- name: Converge
  hosts: localhost
  connection: local
  gather_facts: false
@VARS@  tasks:
    - name: The project's CRDs are installed
      kubernetes.core.k8s:
        kubeconfig: "{{ kubeconfig }}"
        state: present
        src: "{{ item }}"
      loop: "{{ crd_files }}"

    - name: The test namespace exists
      kubernetes.core.k8s:
        kubeconfig: "{{ kubeconfig }}"
        api_version: v1
        kind: Namespace
        name: "{{ test_namespace }}"
        state: present
"""

_VERIFY = """\
---
- name: Verify
  hosts: localhost
  connection: local
  gather_facts: false
@VARS@  tasks:
    - name: Read each CRD back
      kubernetes.core.k8s_info:
        kubeconfig: "{{ kubeconfig }}"
        api_version: apiextensions.k8s.io/v1
        kind: CustomResourceDefinition
        name: "{{ (lookup('file', item) | from_yaml).metadata.name }}"
      loop: "{{ crd_files }}"
      register: crds

    - name: Every CRD is established
      ansible.builtin.assert:
        that:
          - item.resources | length == 1
          - >-
            item.resources[0].status.conditions
            | selectattr('type', 'equalto', 'Established')
            | selectattr('status', 'equalto', 'True') | list | length == 1
      loop: "{{ crds.results }}"
      loop_control:
        label: "{{ item.item }}"
"""


def molecule_files(project: str) -> dict[str, str]:
    variables = _VARS.replace("@PROJECT@", project)
    return {
        "molecule/default/molecule.yml": _MOLECULE,
        "molecule/default/converge.yml": _CONVERGE.replace("@VARS@", variables),
        "molecule/default/verify.yml": _VERIFY.replace("@VARS@", variables),
    }
