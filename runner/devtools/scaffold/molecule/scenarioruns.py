"""What a Molecule scenario runs: the operator, or one role with the operator's extra-vars.

An operator scenario (`operator-prepare.yml`, `operator-converge.yml`) installs the CRDs and
config/rbac, then runs `ansible-operator run` in the background with that RBAC's service
account token, watching only the test namespace, and applies the scenario's sample CR. A
role scenario (`role-prepare.yml`, `role-converge.yml`, `run-role.yml`) runs the role alone
with the extra-vars `ansible-operator vars` prints for the sample CR. Each scenario's
molecule.yml (`scenario_config`) points Molecule at these playbooks; its own vars.yml names
the sample and the role, its own verify.yml checks the outcome.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["ScenarioKind", "run_files", "scenario_config"]

ScenarioKind = Literal["operator", "role"]

_OPERATOR_PREPARE = r"""---
# The CRDs and the operator's RBAC (config/rbac, in the test namespace, names prefixed),
# and a kubeconfig with the token of its service account: converge runs the operator with
# exactly the permissions `make deploy` would give it.
- name: Prepare
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - vars.yml
    - "{{ lookup('ansible.builtin.env', 'MOLECULE_SCENARIO_DIRECTORY') }}/vars.yml"
  environment:
    K8S_AUTH_KUBECONFIG: "{{ kubeconfig }}"
  vars:
    overlay_dir: "{{ ephemeral_dir }}/rbac"
    service_account: "{{ name_prefix }}controller-manager"
  tasks:
    - name: Install the CRDs
      ansible.builtin.import_tasks: tasks/install-crds.yml

    - name: A directory for a kustomize overlay
      ansible.builtin.file:
        path: "{{ overlay_dir }}"
        state: directory
        mode: "0755"

    - name: The overlay puts config/rbac in the test namespace
      ansible.builtin.copy:
        dest: "{{ overlay_dir }}/kustomization.yaml"
        mode: "0644"
        content: |
          namespace: {{ test_namespace }}
          namePrefix: {{ name_prefix }}
          resources:
            - {{ (project_dir ~ '/config/rbac') | relpath(overlay_dir) }}

    - name: Render it (cleanup deletes what is in this file)
      ansible.builtin.shell: >-
        {{ operator_bin | quote }} cluster kubectl kustomize {{ overlay_dir | quote }}
        > {{ rbac_file | quote }}
      environment:
        KUBECONFIG: "{{ kubeconfig }}"
      changed_when: false

    - name: Install the RBAC objects
      kubernetes.core.k8s:
        state: present
        src: "{{ rbac_file }}"

    - name: A token for the operator's service account
      kubernetes.core.k8s:
        state: present
        definition:
          apiVersion: v1
          kind: Secret
          type: kubernetes.io/service-account-token
          metadata:
            name: "{{ service_account }}-token"
            namespace: "{{ test_namespace }}"
            annotations:
              kubernetes.io/service-account.name: "{{ service_account }}"

    - name: Wait until the token controller fills it in
      kubernetes.core.k8s_info:
        api_version: v1
        kind: Secret
        name: "{{ service_account }}-token"
        namespace: "{{ test_namespace }}"
      register: token_secret
      until: token_secret.resources[0].data.token is defined
      retries: 60
      delay: 1

    - name: Write the operator's kubeconfig (the cluster's server and CA, the token)
      vars:
        admin: "{{ lookup('ansible.builtin.file', kubeconfig) | from_yaml }}"
        context: >-
          {{ (admin.contexts | selectattr('name', 'equalto', admin['current-context'])
              | first).context }}
        cluster: >-
          {{ (admin.clusters | selectattr('name', 'equalto', context.cluster) | first).cluster }}
      ansible.builtin.copy:
        dest: "{{ operator_kubeconfig }}"
        mode: "0600"
        content: >-
          {{ {'apiVersion': 'v1', 'kind': 'Config',
              'clusters': [{'name': 'cluster', 'cluster': cluster}],
              'users': [{'name': service_account,
                         'user': {'token': token_secret.resources[0].data.token | b64decode}}],
              'contexts': [{'name': 'operator',
                            'context': {'cluster': 'cluster', 'user': service_account}}],
              'current-context': 'operator'} | to_nice_yaml }}
"""

_OPERATOR_CONVERGE = r"""---
# Starts `ansible-operator run` in the background (once; pid and log in the ephemeral
# directory; free ports for its proxy, metrics and health servers, so it never collides
# with another operator), watching only the test namespace with the RBAC of
# config/rbac, then applies the scenario's sample CR there and waits until it is
# reconciled.
- name: Converge
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - vars.yml
    - "{{ lookup('ansible.builtin.env', 'MOLECULE_SCENARIO_DIRECTORY') }}/vars.yml"
  environment:
    K8S_AUTH_KUBECONFIG: "{{ kubeconfig }}"
  tasks:
    - name: Is the operator running already?
      ansible.builtin.shell: |
        pid=$(cat {{ operator_pid_file | quote }} 2>/dev/null) || exit 0
        if grep -qa 'runner.cli\|ansible-operator' /proc/$pid/cmdline 2>/dev/null; then
          echo $pid
        fi
      register: running_operator
      changed_when: false

    - name: Start the operator
      ansible.builtin.shell: |
        # What Molecule sets for its own ansible-playbook is not for the operator.
        unset ANSIBLE_CONFIG ANSIBLE_ROLES_PATH ANSIBLE_DEBUG
        unset ANSIBLE_FORCE_COLOR ANSIBLE_VERBOSE_TO_STDERR
        setsid {{ operator_bin | quote }} run --watches-file ./watches.yaml \
          --proxy-port 0 --metrics-bind-address 0 --health-probe-bind-address 0 \
          --user-metrics-bind-address 127.0.0.1:0 \
          --zap-encoder console \
          >> {{ operator_log | quote }} 2>&1 < /dev/null &
        echo $! > {{ operator_pid_file | quote }}
      args:
        chdir: "{{ project_dir }}"
      environment:
        KUBECONFIG: "{{ operator_kubeconfig }}"
        WATCH_NAMESPACE: "{{ test_namespace }}"
        ANSIBLE_OPERATOR_RUNNER_DIR: "{{ ephemeral_dir }}/runner"
        # Webhooks (webhooks.yaml) are registered with the cluster's admin credentials:
        # the operator's own RBAC does not, and should not, cover that.
        ANSIBLE_OPERATOR_WEBHOOK_KUBECONFIG: "{{ kubeconfig }}"
      when: running_operator.stdout | length == 0
      changed_when: true

    - name: Wait until the operator has registered its webhooks (projects with webhooks.yaml)
      ansible.builtin.wait_for:
        path: "{{ operator_log }}"
        search_regex: webhooks registered with the API server
        timeout: "{{ wait_timeout | int }}"
      when: (project_dir ~ '/webhooks.yaml') is file

    - name: Apply the sample CR (config/samples) and wait until it is reconciled
      block:
        - name: Apply the sample CR
          kubernetes.core.k8s:
            state: present
            namespace: "{{ test_namespace }}"
            definition: "{{ sample }}"

        - name: Wait until the operator reports Successful
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
      rescue:
        - name: Show the end of the operator's log
          ansible.builtin.fail:
            msg: |-
              The sample CR was not reconciled: {{ ansible_failed_result.msg | default('') }}
              The operator's log ({{ operator_log }}) ends with:
              {{ lookup('ansible.builtin.pipe', 'tail -n 40 ' ~ (operator_log | quote)) }}
"""

_ROLE_PREPARE = r"""---
# The CRDs, the test namespace and the sample CR in it: no operator runs, but a role may
# write the CR's status (operator_sdk.util.k8s_status), so the CR must exist.
- name: Prepare
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - vars.yml
    - "{{ lookup('ansible.builtin.env', 'MOLECULE_SCENARIO_DIRECTORY') }}/vars.yml"
  environment:
    K8S_AUTH_KUBECONFIG: "{{ kubeconfig }}"
  tasks:
    - name: Install the CRDs
      ansible.builtin.import_tasks: tasks/install-crds.yml

    - name: Create the sample CR
      kubernetes.core.k8s:
        state: present
        namespace: "{{ test_namespace }}"
        definition: "{{ sample }}"
"""

_ROLE_CONVERGE = r"""---
# Runs the scenario's role as a reconcile of its sample CR would: with the extra-vars
# that `ansible-operator vars` prints for it (the runtime's own code computes them), the
# kubeconfig in K8S_AUTH_KUBECONFIG, and no other variables.
- name: The extra-vars of the sample CR
  hosts: localhost
  connection: local
  gather_facts: false
  vars_files:
    - vars.yml
    - "{{ lookup('ansible.builtin.env', 'MOLECULE_SCENARIO_DIRECTORY') }}/vars.yml"
  tasks:
    - name: Write them as ansible-operator computes them
      ansible.builtin.include_tasks: tasks/extra-vars.yml
      vars:
        deleting: false

- name: Converge
  ansible.builtin.import_playbook: run-role.yml
"""

_RUN_ROLE = r"""---
# The scenario's role in a play of its own, as the operator runs it: its variables are the
# extra-vars tasks/extra-vars.yml wrote (loaded with include_vars, which outranks the
# role's defaults and vars), the kubeconfig is in K8S_AUTH_KUBECONFIG, and nothing else
# is defined. The role's name is `role_name` in the scenario's vars.yml.
- name: Run the role
  hosts: localhost
  connection: local
  gather_facts: false
  environment:
    K8S_AUTH_KUBECONFIG: &kubeconfig >-
      {{ (lookup('ansible.builtin.file',
                 lookup('ansible.builtin.env', 'MOLECULE_EPHEMERAL_DIRECTORY') ~ '/cluster.json')
          | from_json).kubeconfig }}
    KUBECONFIG: *kubeconfig
  tasks:
    - name: Load the extra-vars
      ansible.builtin.include_vars:
        file: "{{ lookup('ansible.builtin.env', 'MOLECULE_EPHEMERAL_DIRECTORY') }}/extravars.json"

    - name: Run the role
      ansible.builtin.include_role:
        name: >-
          {{ (lookup('ansible.builtin.file',
                     lookup('ansible.builtin.env', 'MOLECULE_SCENARIO_DIRECTORY') ~ '/vars.yml')
              | from_yaml).role_name }}
"""

_EXTRA_VARS = r"""---
# `ansible-operator vars` for the scenario's sample CR in the test namespace, written to
# the file run-role.yml loads (`deleting`: the finalizer's run instead).
- name: Ask ansible-operator for the extra-vars of a reconcile of the sample CR
  ansible.builtin.command:
    argv: >-
      {{ [operator_bin, 'vars', '--watches-file', 'watches.yaml',
          '--namespace', test_namespace, '--output', 'json', sample_file]
         + (['--deleting'] if deleting | default(false) else []) }}
    chdir: "{{ project_dir }}"
  register: operator_vars
  changed_when: false

- name: Write them where the role's play reads them
  ansible.builtin.copy:
    content: "{{ operator_vars.stdout }}"
    dest: "{{ extravars_file }}"
    mode: "0600"
  changed_when: false  # test plumbing, not the role's doing
"""


_HEADERS = {
    "operator": """\
# The operator end to end: `ansible-operator run` against a real cluster, no containers,
# with the sample CR that vars.yml names; verify.yml checks what the operator did. The
# playbooks in ../shared do the rest. The cluster is $KUBECONFIG's when set, otherwise
# the project's local control plane (`ansible-operator cluster up`, left running unless
# create started it). Nothing is fetched: Galaxy and Molecule's prerun are off.
""",
    "role": """\
# The role alone, without the operator: converge runs the role that vars.yml names with
# the extra-vars `ansible-operator vars` prints for its sample CR (what a reconcile of that
# CR passes); verify.yml checks what the role did. The playbooks in ../shared do the rest.
# The cluster is $KUBECONFIG's when set, otherwise the project's local control plane
# (`ansible-operator cluster up`, left running unless create started it). Nothing is
# fetched: Galaxy and Molecule's prerun are off.
""",
}

_SEQUENCE_NOTES = {
    "operator": """\
  # Converge starts the operator (once), applies the sample and waits until it is
  # reconciled: a second converge changes nothing, so idempotence is checked. Verify may
  # change and delete the CR, so it comes last before cleanup.
""",
    "role": """\
  # A reconcile of an unchanged CR must change nothing: idempotence runs converge again.
  # Verify may run the finalizer or change the CR, so it comes last before cleanup.
""",
}

_CONFIG = """\
---
@HEADER@dependency:
  name: galaxy
  enabled: false
driver:
  name: default
  options:
    managed: false
    ansible_connection_options:
      ansible_connection: local
platforms:
  - name: cluster
prerun: false
ansible:
  env:
    # As the operator's runs have it: the user's collections, then the operator_sdk.util
    # bundled with ansible-operator (create links it into the ephemeral directory).
    ANSIBLE_COLLECTIONS_PATH: "\\
      ${ANSIBLE_COLLECTIONS_PATH:-/usr/share/ansible/collections:~/.ansible/collections}\\
      :${MOLECULE_EPHEMERAL_DIRECTORY}/collections"
    ANSIBLE_ROLES_PATH: ${MOLECULE_PROJECT_DIRECTORY}/roles
  playbooks:
    create: ../shared/create.yml
    prepare: ../shared/@KIND@-prepare.yml
    converge: ../shared/@KIND@-converge.yml
    verify: verify.yml
    cleanup: ../shared/cleanup.yml
    destroy: ../shared/destroy.yml
scenario:
@NOTE@  test_sequence:
    - dependency
    - cleanup
    - destroy
    - syntax
    - create
    - prepare
    - converge
    - idempotence
    - verify
    - cleanup
    - destroy
"""


def scenario_config(kind: ScenarioKind) -> str:
    """A scenario's molecule.yml: delegated driver, no Galaxy, the shared playbooks."""
    return (
        _CONFIG.replace("@HEADER@", _HEADERS[kind])
        .replace("@KIND@", kind)
        .replace("@NOTE@", _SEQUENCE_NOTES[kind])
    )


def run_files() -> dict[str, str]:
    """molecule/shared/: the playbooks that run the operator or a role."""
    return {
        "molecule/shared/operator-prepare.yml": _OPERATOR_PREPARE,
        "molecule/shared/operator-converge.yml": _OPERATOR_CONVERGE,
        "molecule/shared/role-prepare.yml": _ROLE_PREPARE,
        "molecule/shared/role-converge.yml": _ROLE_CONVERGE,
        "molecule/shared/run-role.yml": _RUN_ROLE,
        "molecule/shared/tasks/extra-vars.yml": _EXTRA_VARS,
    }
