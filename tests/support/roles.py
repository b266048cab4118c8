"""Task lists that test operators' roles are built from: a pause a CR can ask for, and
the ConfigMap a run creates through the proxy as its output (owned by the CR)."""

from __future__ import annotations

PAUSE_WHEN_ASKED = """
- name: Take a while when asked
  ansible.builtin.pause:
    seconds: "{{ pause | int }}"
  when: pause | default(0) | int > 0
"""


def output_configmap(*, data: str = 'ok: "yes"', when: str = "") -> str:
    """The task that creates `<CR name>-out` in the CR's namespace with `data` (one YAML
    line), only when the Jinja test `when` holds, if given."""
    condition = f"\n  when: {when}" if when else ""
    return f"""
- name: Output ConfigMap
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{{{ ansible_operator_meta.name }}}}-out"
        namespace: "{{{{ ansible_operator_meta.namespace }}}}"
      data:
        {data}{condition}
"""
