"""The cluster side of every Molecule scenario: molecule/shared/ playbooks, no containers.

`create` takes the cluster $KUBECONFIG names, or starts the project's local control plane
(`ansible-operator cluster up`) and records that it did, so that `destroy` stops only what
it started; `tasks/install-crds.yml` installs config/crd and records which CRDs were new;
`cleanup` deletes the test namespace, the RBAC objects and those new CRDs, unless custom
resources of theirs are left elsewhere on a shared cluster. `vars.yml` is what every
playbook of every scenario reads. The repository's own molecule/shared/ is exactly what
this module and `molecule_runs` render for memcached-operator (a unit test keeps it so).
"""

from __future__ import annotations

__all__ = ["cluster_files"]

_VARS = r"""---
# Variables of every playbook of every scenario (`vars_files`); each scenario's own
# vars.yml, loaded after this file, names the sample CR and the role it tests.
project_name: @PROJECT@
project_dir: "{{ lookup('ansible.builtin.env', 'MOLECULE_PROJECT_DIRECTORY') }}"
ephemeral_dir: "{{ lookup('ansible.builtin.env', 'MOLECULE_EPHEMERAL_DIRECTORY') }}"
scenario_name: "{{ lookup('ansible.builtin.env', 'MOLECULE_SCENARIO_NAME') }}"

# `ansible-operator` next to the Python that runs Ansible (the project's virtualenv),
# unless $ANSIBLE_OPERATOR_BIN names another one; the one on PATH as a last resort.
operator_bin: >-
  {{ lookup('ansible.builtin.env', 'ANSIBLE_OPERATOR_BIN')
     or ([ansible_playbook_python | dirname ~ '/ansible-operator'] | select('file') | first
         | default('ansible-operator')) }}

# Written by create: which kubeconfig to use, and whether create started the local
# cluster (destroy stops it only then).
cluster_file: "{{ ephemeral_dir }}/cluster.json"
cluster_record: >-
  {{ lookup('ansible.builtin.file', cluster_file, errors='ignore') | default('{}', true)
     | from_json }}
kubeconfig: "{{ cluster_record.kubeconfig | default('') }}"

# Everything a scenario creates in the cluster is in this namespace, or carries this
# prefix when cluster-scoped.
test_namespace: "{{ (project_name ~ '-' ~ scenario_name)[:53] }}-molecule"
name_prefix: "{{ test_namespace }}-"

# The scenario's sample CR (`sample_file` comes from the scenario's vars.yml).
sample: "{{ lookup('ansible.builtin.file', project_dir ~ '/' ~ sample_file) | from_yaml }}"
sample_name: "{{ sample.metadata.name }}"

# What prepare installed: cleanup removes these CRDs (if it created them) and RBAC objects.
created_crds_file: "{{ ephemeral_dir }}/created-crds.json"
rbac_file: "{{ ephemeral_dir }}/rbac.yaml"

# The operator converge starts (operator scenarios).
operator_pid_file: "{{ ephemeral_dir }}/operator.pid"
operator_log: "{{ ephemeral_dir }}/operator.log"
operator_kubeconfig: "{{ ephemeral_dir }}/operator.kubeconfig"

# The extra-vars the role runs with (role scenarios).
extravars_file: "{{ ephemeral_dir }}/extravars.json"

wait_timeout: 180
"""

_CREATE = r"""---
# A cluster for the scenario: the one $KUBECONFIG names when it is set, otherwise the
# project's local control plane (`ansible-operator cluster up`, started here when it does
# not run). Records in the ephemeral directory which kubeconfig the other playbooks use
# and whether this playbook started the cluster: destroy stops it only then. Links the
# operator_sdk.util collection bundled with ansible-operator into the ephemeral
# directory, for the roles that Molecule runs itself.
- name: Create
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - vars.yml
  vars:
    cluster_state_dir: >-
      {{ lookup('env', 'ANSIBLE_OPERATOR_CLUSTER_DIR') or (project_dir ~ '/.cluster') }}
  tasks:
    - name: Use the cluster $KUBECONFIG names
      ansible.builtin.set_fact:
        chosen_kubeconfig: "{{ lookup('env', 'KUBECONFIG').split(':') | first }}"
        started_cluster: false
        kept_state: true
      when: lookup('env', 'KUBECONFIG') | length > 0

    - name: Use the local cluster
      when: chosen_kubeconfig is not defined
      block:
        - name: Is the local cluster running?
          ansible.builtin.command:
            argv: ["{{ operator_bin }}", cluster, status]
            chdir: "{{ project_dir }}"
          register: cluster_status
          changed_when: false
          failed_when: cluster_status.rc not in [0, 3]

        - name: Does the local cluster have state from before?
          ansible.builtin.stat:
            path: "{{ cluster_state_dir }}"
          register: state_dir

        - name: Start the local cluster (the first time, this builds it from Go sources)
          ansible.builtin.command:
            argv: ["{{ operator_bin }}", cluster, up]
            chdir: "{{ project_dir }}"
          register: cluster_up
          when: cluster_status.rc != 0
          failed_when: false

        - name: Explain why the local cluster did not start
          ansible.builtin.fail:
            msg: |-
              The local cluster could not start: `ansible-operator cluster up`
              (in {{ project_dir }}) exited with {{ cluster_up.rc }}. Its last lines:
              {% for line in (cluster_up.stderr_lines + cluster_up.stdout_lines)[-15:] %}
                {{ line }}
              {% endfor %}
              Building it the first time needs Go (see docs/local-cluster.md); to use another
              cluster instead, set KUBECONFIG before running molecule.
          when: cluster_up is not skipped and cluster_up.rc != 0

        - name: Where is its kubeconfig?
          ansible.builtin.command:
            argv: ["{{ operator_bin }}", cluster, kubeconfig]
            chdir: "{{ project_dir }}"
          register: local_kubeconfig
          changed_when: false

        - name: Use it
          ansible.builtin.set_fact:
            chosen_kubeconfig: "{{ local_kubeconfig.stdout | trim }}"
            started_cluster: "{{ cluster_status.rc != 0 }}"
            kept_state: "{{ state_dir.stat.exists }}"

    - name: The API server answers
      kubernetes.core.k8s_info:
        kubeconfig: "{{ chosen_kubeconfig }}"
        api_version: v1
        kind: Namespace
        name: default
      register: default_namespace
      retries: 10
      delay: 2
      until: default_namespace is succeeded

    - name: Where is the operator_sdk.util collection that ansible-operator bundles?
      ansible.builtin.command:
        argv:
          - "{{ ansible_playbook_python }}"
          - -c
          - from runner.ansible.bundledcollection import bundled_collections_path as p; print(p())
      register: bundled_collections
      changed_when: false
      failed_when: false

    - name: Link it into the ephemeral directory, which molecule.yml puts last on the
        collections path (as the operator does)
      when: bundled_collections.rc == 0
      block:
        - name: The directory for it
          ansible.builtin.file:
            path: "{{ ephemeral_dir }}/collections/ansible_collections"
            state: directory
            mode: "0755"

        - name: The link
          ansible.builtin.file:
            src: "{{ bundled_collections.stdout | trim }}/ansible_collections/operator_sdk"
            dest: "{{ ephemeral_dir }}/collections/ansible_collections/operator_sdk"
            state: link

    - name: Say that roles cannot use operator_sdk.util here
      ansible.builtin.debug:
        msg: >-
          ansible-operator's Python package is not importable by {{ ansible_playbook_python }},
          so operator_sdk.util is not on the collections path: install Molecule in the
          virtualenv of ansible-operator.
      when: bundled_collections.rc != 0

    - name: Record the cluster for the other playbooks
      ansible.builtin.copy:
        content: >-
          {{ {'kubeconfig': chosen_kubeconfig, 'started': started_cluster | bool,
              'keep_state': kept_state | bool} | to_nice_json }}
        dest: "{{ cluster_file }}"
        mode: "0600"
"""

_DESTROY = r"""---
# Stops the local cluster if create started it (removing its state unless it had some
# before); a cluster that was already there, or $KUBECONFIG's, stays as it is.
- name: Destroy
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - vars.yml
  tasks:
    - name: Stop the operator if it still runs
      ansible.builtin.import_tasks: tasks/stop-operator.yml

    - name: Stop the local cluster that create started
      ansible.builtin.command:
        argv: >-
          {{ [operator_bin, 'cluster', 'down']
             + (['--keep'] if cluster_record.keep_state else []) }}
        chdir: "{{ project_dir }}"
      when: cluster_record.started | default(false) | bool
      changed_when: true

    - name: Forget the cluster, remove the operator's log and run artifacts
      ansible.builtin.file:
        path: "{{ item }}"
        state: absent
      loop:
        - "{{ cluster_file }}"
        - "{{ operator_log }}"
        - "{{ ephemeral_dir }}/runner"
        - "{{ ephemeral_dir }}/collections"
"""

_CLEANUP = r"""---
# Removes what prepare and converge created: the custom resources in the test namespace
# (through the operator's finalizer while converge's operator still runs), the operator,
# the test namespace with everything in it, the RBAC objects prepare installed, and the
# CRDs prepare installed unless custom resources of theirs remain elsewhere (someone
# else's, on a shared cluster). Does nothing in a cluster that does not answer (before
# create, or after the cluster is gone).
- name: Cleanup
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - vars.yml
  environment:
    K8S_AUTH_KUBECONFIG: "{{ kubeconfig }}"
  vars:
    reachable: "{{ api_check.resources | default([]) | length > 0 }}"
    crds: "{{ crd_kustomize.stdout | default('') | from_yaml_all | list }}"
    created_crds: >-
      {{ lookup('ansible.builtin.file', created_crds_file, errors='ignore')
         | default('[]', true) | from_json }}
  tasks:
    - name: Does the recorded cluster answer?
      kubernetes.core.k8s_info:
        api_version: v1
        kind: Namespace
        name: default
      register: api_check
      when: kubeconfig | length > 0
      failed_when: false

    - name: Custom resources in the test namespace
      when: reachable
      block:
        - name: Render config/crd
          ansible.builtin.command:
            argv:
              - "{{ operator_bin }}"
              - cluster
              - kubectl
              - kustomize
              - "{{ project_dir }}/config/crd"
          environment:
            KUBECONFIG: "{{ kubeconfig }}"
          register: crd_kustomize
          changed_when: false

        - name: Delete them, so that a running operator runs its finalizers
          kubernetes.core.k8s:
            api_version: "{{ item.spec.group }}/{{ item.spec.versions[0].name }}"
            kind: "{{ item.spec.names.kind }}"
            namespace: "{{ test_namespace }}"
            delete_all: true
            state: absent
            wait: true
            wait_timeout: 60
          loop: "{{ crds }}"
          loop_control:
            label: "{{ item.spec.names.kind }}"
          failed_when: false

    - name: Stop the operator
      ansible.builtin.import_tasks: tasks/stop-operator.yml

    - name: Remove what is in the cluster
      when: reachable
      block:
        - name: Find custom resources that are still there
          kubernetes.core.k8s_info:
            api_version: "{{ item.spec.group }}/{{ item.spec.versions[0].name }}"
            kind: "{{ item.spec.names.kind }}"
            namespace: "{{ test_namespace }}"
          loop: "{{ crds }}"
          loop_control:
            label: "{{ item.spec.names.kind }}"
          register: leftovers

        - name: Drop their finalizers (no operator runs them any more)
          kubernetes.core.k8s:
            api_version: "{{ item.apiVersion }}"
            kind: "{{ item.kind }}"
            name: "{{ item.metadata.name }}"
            namespace: "{{ test_namespace }}"
            state: patched
            definition:
              metadata:
                finalizers: []
          loop: >-
            {{ leftovers.results | map(attribute='resources') | flatten
               | selectattr('metadata.finalizers', 'defined') | list }}
          loop_control:
            label: "{{ item.kind }} {{ item.metadata.name }}"

        - name: Delete the test namespace and wait until it is gone
          kubernetes.core.k8s:
            api_version: v1
            kind: Namespace
            name: "{{ test_namespace }}"
            state: absent
            wait: true
            wait_timeout: "{{ wait_timeout }}"

        - name: Delete the RBAC objects prepare installed
          kubernetes.core.k8s:
            src: "{{ rbac_file }}"
            state: absent
          when: rbac_file is file

        - name: Find custom resources of the CRDs prepare installed, in any namespace
          kubernetes.core.k8s_info:
            api_version: "{{ item.spec.group }}/{{ item.spec.versions[0].name }}"
            kind: "{{ item.spec.names.kind }}"
          loop: "{{ crds | selectattr('metadata.name', 'in', created_crds) | list }}"
          loop_control:
            label: "{{ item.metadata.name }}"
          register: in_use

        - name: Delete those CRDs that nobody else uses
          kubernetes.core.k8s:
            definition: "{{ unused_crds }}"
            state: absent
          when: unused_crds | length > 0
          vars:
            unused_crds: >-
              {{ in_use.results | rejectattr('resources') | map(attribute='item') | list }}

    - name: Forget the CRDs and RBAC objects
      ansible.builtin.file:
        path: "{{ item }}"
        state: absent
      loop:
        - "{{ created_crds_file }}"
        - "{{ rbac_file }}"
"""

_STOP_OPERATOR = r"""---
# Stops the `ansible-operator run` that converge started (its pid is in the ephemeral
# directory): SIGTERM (it finishes the reconciles that run), then SIGKILL to its process
# group after 40 s.
- name: Read the operator's pid
  ansible.builtin.set_fact:
    operator_pid: >-
      {{ lookup('ansible.builtin.file', operator_pid_file, errors='ignore') | default('', true)
         | trim }}

- name: Stop the operator
  ansible.builtin.shell: |
    set -u
    pid={{ operator_pid | quote }}
    # Only our process: the pid file may be older than a reboot.
    grep -qa 'runner.cli\|ansible-operator' /proc/$pid/cmdline 2>/dev/null || exit 0
    kill -TERM $pid
    for _ in $(seq 1 400); do
      if ! kill -0 $pid 2>/dev/null; then
        kill -KILL -- -$pid 2>/dev/null  # whatever it left behind in its process group
        echo stopped
        exit 0
      fi
      sleep 0.1
    done
    kill -KILL -- -$pid 2>/dev/null || kill -KILL $pid
    echo killed
  register: stop_operator
  changed_when: stop_operator.stdout | length > 0
  when: operator_pid | length > 0

- name: Forget its pid
  ansible.builtin.file:
    path: "{{ operator_pid_file }}"
    state: absent
"""

_INSTALL_CRDS = r"""---
# Installs the project's CRDs (kustomize of config/crd) and waits until they are
# established; records in the ephemeral directory the ones that were not there before,
# which are the only ones cleanup removes. Then the test namespace.
- name: Render config/crd
  ansible.builtin.command:
    argv: ["{{ operator_bin }}", cluster, kubectl, kustomize, "{{ project_dir }}/config/crd"]
  environment:
    KUBECONFIG: "{{ kubeconfig }}"
  register: crd_kustomize
  changed_when: false

- name: Which CRDs exist already?
  kubernetes.core.k8s_info:
    api_version: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
  register: existing_crds

- name: Record the CRDs this scenario creates
  ansible.builtin.copy:
    content: >-
      {{ crd_kustomize.stdout | from_yaml_all | map(attribute='metadata.name')
         | difference(existing_crds.resources | map(attribute='metadata.name')) | to_json }}
    dest: "{{ created_crds_file }}"
    mode: "0644"
    force: false  # a second prepare must not forget what the first one created

- name: Install the CRDs and wait until they are established
  kubernetes.core.k8s:
    state: present
    definition: "{{ crd_kustomize.stdout | from_yaml_all | list }}"
    wait: true
    wait_condition:
      type: Established
      status: "True"
    wait_timeout: "{{ wait_timeout }}"

- name: The test namespace exists
  kubernetes.core.k8s:
    api_version: v1
    kind: Namespace
    name: "{{ test_namespace }}"
    state: present
"""


def cluster_files(project_name: str) -> dict[str, str]:
    """molecule/shared/: the playbooks that set up and tear down a scenario's cluster."""
    return {
        "molecule/shared/vars.yml": _VARS.replace("@PROJECT@", project_name),
        "molecule/shared/create.yml": _CREATE,
        "molecule/shared/destroy.yml": _DESTROY,
        "molecule/shared/cleanup.yml": _CLEANUP,
        "molecule/shared/tasks/stop-operator.yml": _STOP_OPERATOR,
        "molecule/shared/tasks/install-crds.yml": _INSTALL_CRDS,
    }
