"""The operator project the soak's replicas run: one kind, a role that records every run
it starts and ends, and a finalizer role that does the same.

The record is an append-only log on disk, one JSON object per line, written by a lookup
plugin of the roles (it runs in the run's own process, so a record costs no module and
no process): `os.open(O_APPEND)` and a single `os.write` of one line, so lines of
concurrent runs on every replica never interleave, and a run killed mid-way leaves a
`start` without an `end` — never half a line (`runlog.py` reads it).

Each run's block records `start` first and `end` last; its rescue records `end` with
`failed` and fails the run again: a run that ends at all (successful or not) records its
end; only a run whose process was killed leaves none.

A record: `ev` (start|end), `phase` (reconcile|finalize), `key` (namespace/name), `uid`,
`gen` (the generation the run saw), `shard` (the sharding label the run's copy of the CR
carried), `inc` (the operator process, from `$SOAK_INCARNATION`), `run` (the run's id: the
incarnation and a random part, made by the start record and handed to the end record as
a fact), `pid` (of the process the task ran in), `wall` (time.time()), `mono`
(time.monotonic(), one clock for the whole machine), and `failed` on `end`.
"""

from __future__ import annotations

from pathlib import Path

import yaml

GROUP = "soak.test.example.com"
VERSION = "v1alpha1"
KIND = "Soak"
PLURAL = "soaks"
FINALIZER = f"{GROUP}/cleanup"
CR_VAR = "_soak_test_example_com_soak"
INCARNATION_ENV = "SOAK_INCARNATION"
"""Set on every operator process: `<soak token>/<incarnation id>`. Its runs inherit it,
and so does every process they start: how a leaked process is found."""

LOOKUP = '''\
"""soak_record: append one line to the soak's run log (see bench/soaking/project.py)."""

import json
import os
import time
import uuid

from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        event, phase, log = terms[0], kwargs["phase"], kwargs["log"]
        cr = kwargs["cr"]
        meta = cr.get("metadata") or {}
        labels = meta.get("labels") or {}
        shard = next((v for k, v in labels.items() if k.startswith("shard.sharding.")), "")
        incarnation = os.environ.get("SOAK_INCARNATION", "").rsplit("/", 1)[-1]
        run = kwargs.get("run") or f"{incarnation}:{uuid.uuid4().hex[:12]}"
        record = {
            "ev": event,
            "phase": phase,
            "key": f"{meta.get('namespace', '')}/{meta.get('name', '')}",
            "uid": meta.get("uid", ""),
            "gen": int(meta.get("generation") or 0),
            "shard": shard,
            "inc": incarnation,
            "run": run,
            "pid": os.getpid(),
            "wall": time.time(),
            "mono": time.monotonic(),
        }
        if event == "end":
            record["failed"] = bool(kwargs.get("failed"))
        line = (json.dumps(record, sort_keys=True) + "\\n").encode()
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
        return [run]
'''


def _record(event: str, phase: str, extra: str = "") -> str:
    if event == "end":
        extra += ", run=soak_run | default('')"
    return (
        f"{{{{ lookup('soak_record', '{event}', phase='{phase}', log=soak_log, "
        f"cr={CR_VAR}{extra}) }}}}"
    )


def _role(phase: str, work: str) -> str:
    """A block that records its start, does `work` (tasks indented for the block) and
    records its end; its rescue records a failed end and fails the run again."""
    return (
        "- name: One recorded run\n"
        "  block:\n"
        "    - name: Record the start\n"
        "      ansible.builtin.set_fact:\n"
        f'        soak_run: "{_record("start", phase)}"\n'
        f"{work}"
        "    - name: Record the end\n"
        "      ansible.builtin.set_fact:\n"
        f'        soak_ended: "{_record("end", phase)}"\n'
        "  rescue:\n"
        "    - name: Record the failed end\n"
        "      ansible.builtin.set_fact:\n"
        f'        soak_ended: "{_record("end", phase, ", failed=True")}"\n'
        "    - name: Fail as the task did\n"
        "      ansible.builtin.fail:\n"
        "        msg: \"{{ ansible_failed_result.msg | default('a task failed') }}\"\n"
    )


_RECONCILE_WORK = """\
    - name: Work a while when the spec asks
      ansible.builtin.pause:
        seconds: "{{ work | default(0) | int }}"
      when: work | default(0) | int > 0

    - name: The output ConfigMap, with the generation this run saw
      kubernetes.core.k8s:
        definition:
          apiVersion: v1
          kind: ConfigMap
          metadata:
            name: "{{ ansible_operator_meta.name }}-out"
            namespace: "{{ ansible_operator_meta.namespace }}"
          data:
            generation: "seen {{ CR_VAR.metadata.generation }}"
""".replace("CR_VAR", CR_VAR)

_FINALIZE_WORK = """\
    - name: Clean up a while
      ansible.builtin.pause:
        seconds: "{{ work | default(0) | int }}"
      when: work | default(0) | int > 0
"""


def write_project(root: Path, *, run_log: Path) -> Path:
    """The project directory: watches.yaml, the two roles, their lookup plugin."""
    roles = {
        "record": _role("reconcile", _RECONCILE_WORK),
        "cleanup": _role("finalize", _FINALIZE_WORK),
    }
    for name, tasks in roles.items():
        (root / "roles" / name / "tasks").mkdir(parents=True, exist_ok=True)
        (root / "roles" / name / "tasks" / "main.yml").write_text(tasks, encoding="utf-8")
        (root / "roles" / name / "lookup_plugins").mkdir(exist_ok=True)
        (root / "roles" / name / "lookup_plugins" / "soak_record.py").write_text(
            LOOKUP, encoding="utf-8"
        )
    watches = [
        {
            "version": VERSION,
            "group": GROUP,
            "kind": KIND,
            "role": "record",
            "vars": {"soak_log": str(run_log)},
            "finalizer": {
                "name": FINALIZER,
                "role": "cleanup",
                "vars": {"soak_log": str(run_log)},
            },
        }
    ]
    (root / "watches.yaml").write_text(yaml.safe_dump(watches, sort_keys=False), encoding="utf-8")
    return root


def crd() -> dict[str, object]:
    """The CRD of the soak's kind: any spec, a status subresource."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "plural": PLURAL, "singular": "soak", "listKind": "SoakList"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
