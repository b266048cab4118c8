"""The Molecule scenarios `default` and `kind` of a new project, run without Docker,
laid out as operator-sdk lays them out.

Molecule drives plain playbooks on localhost against a real cluster: in `default`,
`$KUBECONFIG`'s when set, otherwise the project's local cluster (`ansible-operator
cluster up`); in `kind`, a local cluster of its own that create starts and destroy
removes (where operator-sdk's `kind` scenario starts a kind cluster). Create checks the
cluster answers; converge installs the project's CRDs and a test namespace; verify checks
the CRDs are served and runs each kind's `tasks/<kind>_test.yml` (`create api` writes
one: the sample is accepted by the API server); destroy removes the test namespace.
`kustomize.yml` applies or deletes the config/testing overlay (the operator deployed with
the image `testing`), for scenarios that test the operator's image.
"""

from __future__ import annotations

__all__ = ["kind_test_file", "molecule_files"]

# The body both scenarios' molecule.yml share, around what `kind` adds to the
# provisioner (its own cluster's location and the default scenario's playbooks).
_SCENARIO_PROVISIONER = """\
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
"""

_SCENARIO_SEQUENCE = """\
scenario:
  test_sequence:
    - syntax
    - create
    - prepare
    - converge
    - verify
    - destroy
"""

_MOLECULE = (
    """\
---
# Runs on localhost against a real cluster, no containers: $KUBECONFIG when set,
# otherwise the local one (`ansible-operator cluster up`).
"""
    + _SCENARIO_PROVISIONER
    + _SCENARIO_SEQUENCE
)

_KIND_MOLECULE = (
    """\
---
# The default scenario's playbooks on a local cluster of this scenario's own (create
# starts it in the ephemeral directory, destroy removes it), whatever $KUBECONFIG says.
"""
    + _SCENARIO_PROVISIONER
    + """\
    ANSIBLE_OPERATOR_CLUSTER_DIR: ${MOLECULE_EPHEMERAL_DIRECTORY}/cluster
    KUBECONFIG: ${MOLECULE_EPHEMERAL_DIRECTORY}/cluster/kubeconfig
  playbooks:
    prepare: ../default/prepare.yml
    verify: ../default/verify.yml
"""
    + _SCENARIO_SEQUENCE
)

_KIND_CREATE = """\
---
- name: Create
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Start a local cluster for this scenario
      ansible.builtin.command:
        argv: [ansible-operator, cluster, up]
      changed_when: true

- name: The cluster answers
  ansible.builtin.import_playbook: ../default/create.yml
"""

_KIND_CONVERGE = """\
---
- name: Converge
  ansible.builtin.import_playbook: ../default/converge.yml
"""

_KIND_DESTROY = """\
---
- name: Destroy
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Stop this scenario's local cluster and remove its state
      ansible.builtin.command:
        argv: [ansible-operator, cluster, down]
      changed_when: true
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

    - name: Each kind's tests
      ansible.builtin.include_tasks: "{{ item }}"
      loop: "{{ query('fileglob', playbook_dir ~ '/tasks/*_test.yml') | sort }}"
"""


_CREATE = """\
---
- name: Create
  hosts: localhost
  connection: local
  gather_facts: false
@VARS@  tasks:
    - name: The cluster answers
      kubernetes.core.k8s_info:
        kubeconfig: "{{ kubeconfig }}"
        api_version: v1
        kind: Namespace
        name: default
      register: answered
      ignore_errors: true

    - name: Say which cluster is missing
      ansible.builtin.fail:
        msg: >-
          no cluster answers at {{ kubeconfig }}: set KUBECONFIG, or start the local
          cluster with `ansible-operator cluster up` (`make cluster-up`)
      when: answered is failed
"""

_PREPARE = """\
---
# Nothing to prepare: converge installs the CRDs and the test namespace. Add set-up the
# project's tests need here (objects the roles read, a registry, ...).
- name: Prepare
  hosts: localhost
  connection: local
  gather_facts: false
  tasks: []
"""

_DESTROY = """\
---
- name: Destroy
  hosts: localhost
  connection: local
  gather_facts: false
@VARS@  tasks:
    - name: The test namespace is gone (the CRDs stay installed)
      kubernetes.core.k8s:
        kubeconfig: "{{ kubeconfig }}"
        api_version: v1
        kind: Namespace
        name: "{{ test_namespace }}"
        state: absent
        wait: true
"""

_KUSTOMIZE = """\
---
# Applies (state: present) or deletes (state: absent) config/testing: the operator with
# the image `testing`, its RBAC and the CRDs, in the namespace osdk-test. Import it with
# `state` set, from a scenario that builds the operator's image and sets it with
# `kustomize edit set image testing=IMAGE` in config/testing.
- name: Render the config/testing overlay
  ansible.builtin.command:
    argv: [ansible-operator, cluster, kubectl, kustomize, config/testing]
    chdir: "{{ project_dir }}"
  register: resources
  changed_when: false

- name: The overlay's objects are {{ state }}
  kubernetes.core.k8s:
    kubeconfig: "{{ kubeconfig }}"
    definition: "{{ item }}"
    state: "{{ state }}"
    wait: true
  loop: "{{ resources.stdout | from_yaml_all | list }}"
  loop_control:
    label: "{{ item.kind }} {{ item.metadata.name }}"
"""

_KIND_TEST = """\
---
# Tests of @KIND@ that verify.yml runs (each tasks/*_test.yml). Without the operator
# running this checks the sample: the API server accepts it against the CRD. Add checks
# of what the operator does in the molecule/@SINGULAR@ scenario, which runs it.
- name: The sample @KIND@ is accepted by the API server
  kubernetes.core.k8s:
    kubeconfig: "{{ kubeconfig }}"
    namespace: "{{ test_namespace }}"
    src: "{{ project_dir }}/config/samples/@SAMPLE_FILE@"
    state: present
  register: created

- name: It was stored
  ansible.builtin.assert:
    that: created.result.metadata.uid is defined

- name: The sample @KIND@ is deleted again
  kubernetes.core.k8s:
    kubeconfig: "{{ kubeconfig }}"
    namespace: "{{ test_namespace }}"
    src: "{{ project_dir }}/config/samples/@SAMPLE_FILE@"
    state: absent
"""


def molecule_files(project: str) -> dict[str, str]:
    variables = _VARS.replace("@PROJECT@", project)
    return {
        "molecule/default/molecule.yml": _MOLECULE,
        "molecule/default/create.yml": _CREATE.replace("@VARS@", variables),
        "molecule/default/prepare.yml": _PREPARE,
        "molecule/default/converge.yml": _CONVERGE.replace("@VARS@", variables),
        "molecule/default/verify.yml": _VERIFY.replace("@VARS@", variables),
        "molecule/default/destroy.yml": _DESTROY.replace("@VARS@", variables),
        "molecule/default/kustomize.yml": _KUSTOMIZE,
        "molecule/kind/molecule.yml": _KIND_MOLECULE,
        "molecule/kind/create.yml": _KIND_CREATE,
        "molecule/kind/converge.yml": _KIND_CONVERGE,
        "molecule/kind/destroy.yml": _KIND_DESTROY,
    }


def kind_test_file(*, kind: str, singular: str, sample_file: str) -> tuple[str, str]:
    """molecule/default/tasks/<kind>_test.yml of a kind `create api` adds."""
    text = (
        _KIND_TEST.replace("@KIND@", kind)
        .replace("@SINGULAR@", singular)
        .replace("@SAMPLE_FILE@", sample_file)
    )
    return f"molecule/default/tasks/{singular}_test.yml", text
