"""`create webhook`: roles for a kind's webhooks and the configuration that serves them.

operator-sdk's flags (`--defaulting`, `--programmatic-validation`, `--conversion`) choose
the webhooks. Written: a role per webhook (`roles/<kind>_defaulting`, `_validation`,
`_conversion`), the kind's entry in webhooks.yaml, `config/webhook` (the Service and the
Validating/MutatingWebhookConfiguration, rendered from every webhooks.yaml entry by
`runner.webhooks.manifests`), `config/certmanager` (a self-signed Issuer and the serving
Certificate whose CA cert-manager injects), and the kustomize wiring in `config/default`
and, for conversion, `config/crd`; and a Molecule scenario, `molecule/<kind>-webhooks`,
that asks the API server for what the roles do. Pure like `generate.py`: a `Plan` from
file texts.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from runner.errors import ConfigError
from runner.scaffold import yamltext
from runner.scaffold.generate import Plan
from runner.scaffold.molecule_runs import scenario_config
from runner.scaffold.names import Resource
from runner.scaffold.plural import plural
from runner.scaffold.project import PROJECT_FILE, parse_project
from runner.webhooks import declarations, manifests

__all__ = ["SCENARIO_VERIFY_GLOB", "WEBHOOK_FILES", "webhook_plan"]

WEBHOOKS_FILE = declarations.DEFAULT_FILE
DEFAULT_KUSTOMIZATION = "config/default/kustomization.yaml"
CRD_KUSTOMIZATION = "config/crd/kustomization.yaml"
MANIFESTS = "config/webhook/manifests.yaml"
DOCKERFILE = "Dockerfile"
WEBHOOK_FILES = (WEBHOOKS_FILE, DEFAULT_KUSTOMIZATION, CRD_KUSTOMIZATION, MANIFESTS, DOCKERFILE)
"""The files `webhook_plan` reads (besides PROJECT), those that exist."""
SCENARIO_VERIFY_GLOB = "molecule/*-webhooks/verify.yml"
"""And these: the Molecule scenarios earlier `create webhook` runs wrote."""

SERVICE = "webhook-service"
SECRET = "webhook-server-cert"
CERTIFICATE = "serving-cert"
CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"

_VALIDATION = """\
---
# Validates {kind} objects ({what}). A failed task denies the request with its
# message; `webhook_warnings` (a string or a list) are shown to the client.
# Vars: the spec's keys (snake_case), {cr_var} (the object), operation,
# old_object, user_info, dry_run. See docs/webhooks.md.
- name: Refuse a negative size
  ansible.builtin.fail:
    msg: "spec.size must not be negative, got {{{{ size }}}}"
  when: operation != 'DELETE' and (size | default(0) | int) < 0

- name: Warn about a large size
  ansible.builtin.set_fact:
    webhook_warnings: "spec.size {{{{ size }}}} is large"
  when: operation != 'DELETE' and (size | default(0) | int) > 100
"""

_DEFAULTING = """\
---
# Defaults {kind} objects: set `webhook_object` to the object as it should be
# (the operator sends the API server the JSON patch), or `webhook_patch` to a JSON
# Patch list. Vars as for validation. See docs/webhooks.md.
- name: Default spec.size to 1
  ansible.builtin.set_fact:
    webhook_object: >-
      {{{{ {cr_var} | combine({{'spec': {{'size': size | default(1)}}}}, recursive=True) }}}}
"""

_CONVERSION = """\
---
# Converts {kind} objects between the CRD's versions: the object ({cr_var}, spec
# keys as snake_case vars) arrives in any version; set `webhook_object` to it in
# `desired_api_version`. Must depend on the object alone (results are cached).
- name: Convert (the versions share their fields so far)
  ansible.builtin.set_fact:
    webhook_object: "{{{{ {cr_var} | combine({{'apiVersion': desired_api_version}}) }}}}"
"""

_WEBHOOK_KUSTOMIZATION = """\
# The webhook Service and configurations (`create webhook` regenerates manifests.yaml
# from webhooks.yaml).
---
resources:
  - manifests.yaml
  - service.yaml
configurations:
  - kustomizeconfig.yaml
"""

_WEBHOOK_KUSTOMIZECONFIG = """\
# Lets namePrefix and namespace reach the Service named in the configurations.
---
nameReference:
  - kind: Service
    version: v1
    fieldSpecs:
      - kind: MutatingWebhookConfiguration
        group: admissionregistration.k8s.io
        path: webhooks/clientConfig/service/name
      - kind: ValidatingWebhookConfiguration
        group: admissionregistration.k8s.io
        path: webhooks/clientConfig/service/name
namespace:
  - kind: MutatingWebhookConfiguration
    group: admissionregistration.k8s.io
    path: webhooks/clientConfig/service/namespace
    create: true
  - kind: ValidatingWebhookConfiguration
    group: admissionregistration.k8s.io
    path: webhooks/clientConfig/service/namespace
    create: true
"""

_CRD_KUSTOMIZECONFIG = """\
# Lets namePrefix and namespace reach the webhook Service a CRD's conversion names.
---
nameReference:
  - kind: Service
    version: v1
    fieldSpecs:
      - kind: CustomResourceDefinition
        version: v1
        group: apiextensions.k8s.io
        path: spec/conversion/webhook/clientConfig/service/name
namespace:
  - kind: CustomResourceDefinition
    version: v1
    group: apiextensions.k8s.io
    path: spec/conversion/webhook/clientConfig/service/namespace
    create: false
"""

_CERTMANAGER_KUSTOMIZATION = """\
# A self-signed Issuer and the webhook's serving Certificate (needs cert-manager);
# cert-manager renews it and the operator reloads it without a restart.
---
resources:
  - certificate.yaml
"""


def _service(project: str) -> str:
    return yamltext.dump(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": SERVICE,
                "namespace": "system",
                "labels": {"app.kubernetes.io/name": project},
            },
            "spec": {
                "ports": [{"port": 443, "protocol": "TCP", "targetPort": 9443}],
                "selector": {
                    "control-plane": "controller-manager",
                    "app.kubernetes.io/name": project,
                },
            },
        },
        header="The Service the API server calls the webhooks through (HTTPS, port 443).",
    )


def _certificate(namespace: str, prefix: str) -> str:
    service = f"{prefix}{SERVICE}"
    return yamltext.dump_all(
        [
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "Issuer",
                "metadata": {"name": "selfsigned-issuer", "namespace": "system"},
                "spec": {"selfSigned": {}},
            },
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "Certificate",
                "metadata": {"name": CERTIFICATE, "namespace": "system"},
                "spec": {
                    "dnsNames": [
                        f"{service}.{namespace}.svc",
                        f"{service}.{namespace}.svc.cluster.local",
                    ],
                    "issuerRef": {"kind": "Issuer", "name": f"{prefix}selfsigned-issuer"},
                    "secretName": SECRET,
                },
            },
        ],
        header="The webhook server's certificate, in the Secret mounted at " + CERT_DIR + ".",
    )


def _manager_patch() -> str:
    return yamltext.dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "controller-manager", "namespace": "system"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "manager",
                                "ports": [
                                    {
                                        "containerPort": 9443,
                                        "name": "webhook-server",
                                        "protocol": "TCP",
                                    }
                                ],
                                "volumeMounts": [
                                    {"mountPath": CERT_DIR, "name": "cert", "readOnly": True}
                                ],
                            }
                        ],
                        "volumes": [{"name": "cert", "secret": {"secretName": SECRET}}],
                    }
                }
            },
        },
        header="The manager serves the webhooks on 9443 with the certificate's Secret.",
    )


def _conversion_patch(resource: Resource, inject: str) -> str:
    conversion = manifests.conversion(
        {
            "service": {
                "name": SERVICE,
                "namespace": "system",
                "path": declarations.conversion_path(),
            }
        }
    )
    return yamltext.dump(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {
                "name": resource.crd_name,
                "annotations": {"cert-manager.io/inject-ca-from": inject},
            },
            "spec": {"conversion": conversion},
        },
        header=f"Conversions of {resource.kind} go to the operator's /convert webhook.",
    )


_FLAGS = {
    "validating": "--programmatic-validation",
    "mutating": "--defaulting",
    "conversion": "--conversion",
}


def _entry_keys(
    resource: Resource, *, defaulting: bool, validation: bool, conversion: bool
) -> dict[str, Any]:
    """The webhook keys of the kind's webhooks.yaml entry for the chosen webhooks."""
    keys: dict[str, Any] = {}
    if validation:
        keys["validating"] = {
            "role": f"{resource.singular}_validation",
            "operations": ["CREATE", "UPDATE"],
            "failurePolicy": "Fail",
        }
    if defaulting:
        keys["mutating"] = {"role": f"{resource.singular}_defaulting", "failurePolicy": "Fail"}
    if conversion:
        keys["conversion"] = {"role": f"{resource.singular}_conversion"}
    return keys


def _refuse_duplicates(
    known: tuple[declarations.Webhook, ...],
    resource: Resource,
    *,
    defaulting: bool,
    validation: bool,
    conversion: bool,
) -> None:
    """ConfigError naming the first webhook asked for that webhooks.yaml already has (an
    admission webhook for this GVK, a conversion webhook for this kind)."""
    asked = [
        t
        for t, chosen in (
            ("validating", validation),
            ("mutating", defaulting),
            ("conversion", conversion),
        )
        if chosen
    ]
    for webhook in known:
        same_kind = webhook.gvk.group == resource.full_group and webhook.gvk.kind == resource.kind
        same_version = webhook.type == "conversion" or webhook.gvk.version == resource.version
        if webhook.type in asked and same_kind and same_version:
            scope = "" if webhook.type == "conversion" else f" {resource.version}"
            raise ConfigError(
                f"{WEBHOOKS_FILE}: {resource.kind}.{resource.full_group}{scope} already has a "
                f"{webhook.type} webhook ({_FLAGS[webhook.type]}, role "
                f"{webhook.target.name}); nothing was written (edit its entry by hand to "
                "change it)"
            )


def _declare(existing: str, resource: Resource, keys: dict[str, Any]) -> str:
    """webhooks.yaml with `keys` declared for the resource: added to the entry of its
    GVK when there is one (the rest of the text, comments included, kept as it is),
    else a new entry at the end."""
    entry: dict[str, Any] = {
        "group": resource.full_group,
        "version": resource.version,
        "kind": resource.kind,
    }
    data = yamltext.load(existing, source=WEBHOOKS_FILE) if existing.strip() else None
    if isinstance(data, list):
        for index, item in enumerate(data):
            if isinstance(item, dict) and all(item.get(k) == v for k, v in entry.items()):
                return _extend_entry(existing, data, index, keys, resource)
    block = yamltext.dump([{**entry, **keys}], start=False)
    return yamltext.append_block(existing, block) if existing.strip() else block


def _extend_entry(
    text: str, data: list[Any], index: int, keys: dict[str, Any], resource: Resource
) -> str:
    """`keys` added at the end of the block mapping that is entry `index` of `text`."""
    what = f"entry {index + 1} ({resource.kind}.{resource.full_group} {resource.version})"
    by_hand = f"add {', '.join(keys)} to {what} by hand"
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    node = root.value[index] if isinstance(root, yaml.SequenceNode) else None
    if not isinstance(node, yaml.MappingNode) or node.flow_style or not node.value:
        raise ConfigError(f"{WEBHOOKS_FILE}: {what} is not a block mapping; {by_hand}")
    first_key = node.value[0][0]
    indent = " " * first_key.start_mark.column
    lines = text.splitlines(keepends=True)
    end = node.end_mark
    at = end.line if end.column == 0 else end.line + 1
    # Comments and blank lines after the entry belong to what follows it.
    while at > first_key.start_mark.line + 1 and (
        not lines[at - 1].strip() or lines[at - 1].lstrip().startswith("#")
    ):
        at -= 1
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    added = [indent + line if line.strip() else line for line in _dump_keys(keys)]
    result = "".join([*lines[:at], *added, *lines[at:]])
    expected = [*data[:index], {**data[index], **keys}, *data[index + 1 :]]
    try:
        after = yamltext.load(result, source=WEBHOOKS_FILE)
    except ConfigError:
        after = None
    if after != expected:
        raise ConfigError(f"{WEBHOOKS_FILE}: cannot extend {what} automatically; {by_hand}")
    return result


def _dump_keys(keys: dict[str, Any]) -> list[str]:
    return yamltext.dump(keys, start=False).splitlines(keepends=True)


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


def _molecule_files(resource: Resource, *, defaulting: bool, validation: bool) -> dict[str, str]:
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


def _add_checks(text: str, resource: Resource, *, defaulting: bool, validation: bool) -> str:
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


def _kustomize_value(text: str, key: str) -> str:
    data = yamltext.load(text, source=DEFAULT_KUSTOMIZATION)
    value = data.get(key) if isinstance(data, dict) else None
    return str(value) if isinstance(value, str) else ""


def _add_patch(text: str, path: str, source: str) -> str:
    """`patches` of a kustomization with `{path, target: {kind: Deployment}}` added."""
    data = yamltext.load(text, source=source)
    patches = data.get("patches") if isinstance(data, dict) else None
    if isinstance(patches, list) and any(
        isinstance(p, dict) and p.get("path") == path for p in patches
    ):
        return text
    block = f"  - path: {path}\n    target:\n      kind: Deployment\n"
    lines = text.splitlines(keepends=True)
    if "patches:\n" in lines:
        at = lines.index("patches:\n") + 1
        while at < len(lines) and lines[at].startswith((" ", "\t")):
            at += 1
        result = "".join([*lines[:at], block, *lines[at:]])
    else:
        result = yamltext.append_block(text, "patches:\n" + block)
    after = yamltext.load(result, source=source)
    if not isinstance(after, dict) or after.get("patches") != [
        *(patches or []),
        {"path": path, "target": {"kind": "Deployment"}},
    ]:
        raise ConfigError(f"{source}: cannot add the patch {path} automatically; add by hand")
    return result


def _dockerfile(text: str) -> str:
    if re.search(r"^COPY .*webhooks\.yaml", text, flags=re.MULTILINE):
        return text
    match = re.search(r"^COPY (?P<opts>.*?)watches\.yaml .*$", text, flags=re.MULTILINE)
    line = "COPY --chown=1001:0 webhooks.yaml ${HOME}/webhooks.yaml\n"
    if match is None:
        return yamltext.append_block(text, line)
    line = f"COPY {match.group('opts')}webhooks.yaml ${{HOME}}/webhooks.yaml\n"
    end = match.end() + 1
    return text[:end] + line + text[end:]


def webhook_plan(
    files: Mapping[str, str],
    *,
    group: str,
    version: str,
    kind: str,
    defaulting: bool,
    validation: bool,
    conversion: bool,
    root: Path,
) -> Plan:
    """The files for a kind's webhooks, given the project's `files` (PROJECT,
    `WEBHOOK_FILES` and `SCENARIO_VERIFY_GLOB`'s). A kind that has webhooks already gets
    the new ones added to its entry (and their checks to its scenario); one it has is
    refused. Raises ConfigError before anything is written."""
    if PROJECT_FILE not in files:
        raise ConfigError(f"{PROJECT_FILE} not found: run `create webhook` in the project")
    if not (defaulting or validation or conversion):
        raise ConfigError(
            "create webhook: choose at least one of --defaulting, --programmatic-validation, "
            "--conversion"
        )
    project = parse_project(files[PROJECT_FILE])
    wanted = Resource.validated(group=group, domain=project.domain, version=version, kind=kind)
    resource = project.find(wanted)
    if resource is None or resource.version != wanted.version:
        raise ConfigError(
            f"{PROJECT_FILE}: the project has no {wanted.gvk_text()}; "
            f"run `ansible-operator create api` for it first"
        )
    for path in (DEFAULT_KUSTOMIZATION, CRD_KUSTOMIZATION, DOCKERFILE):
        if path not in files:
            raise ConfigError(f"cannot add webhooks: missing {path} (written by `init`)")
    existing = files.get(WEBHOOKS_FILE, "")
    known = declarations.parse(
        existing, source=WEBHOOKS_FILE, environ={}, base_dir=root, check_paths=False
    )
    _refuse_duplicates(
        known, resource, defaulting=defaulting, validation=validation, conversion=conversion
    )
    keys = _entry_keys(
        resource, defaulting=defaulting, validation=validation, conversion=conversion
    )
    webhooks_text = _declare(existing, resource, keys)
    every = declarations.parse(
        webhooks_text, source=WEBHOOKS_FILE, environ={}, base_dir=root, check_paths=False
    )
    namespace = _kustomize_value(files[DEFAULT_KUSTOMIZATION], "namespace") or "system"
    prefix = _kustomize_value(files[DEFAULT_KUSTOMIZATION], "namePrefix")
    inject = f"{namespace}/{prefix}{CERTIFICATE}"

    cr_var = "_" + resource.full_group.replace(".", "_").replace("-", "_") + "_" + resource.singular
    create: dict[str, str] = {}
    update: dict[str, str] = {}
    roles = {
        "validation": (validation, _VALIDATION),
        "defaulting": (defaulting, _DEFAULTING),
        "conversion": (conversion, _CONVERSION),
    }
    for suffix, (chosen, template) in roles.items():
        if chosen:
            what = "create and update"
            create[f"roles/{resource.singular}_{suffix}/tasks/main.yml"] = template.format(
                kind=resource.kind, cr_var=cr_var, what=what
            )
    scenario = _molecule_files(resource, defaulting=defaulting, validation=validation)
    verify = next(path for path in scenario if path.endswith("/verify.yml"))
    if verify in files:
        # The kind's scenario exists (its earlier webhooks): its files may have been
        # edited, so only the new webhooks' checks are added to verify.yml.
        update[verify] = _add_checks(
            files[verify], resource, defaulting=defaulting, validation=validation
        )
    else:
        create.update(scenario)
    (update if WEBHOOKS_FILE in files else create)[WEBHOOKS_FILE] = webhooks_text
    (update if MANIFESTS in files else create)[MANIFESTS] = _manifests(every, resource, inject)
    if MANIFESTS not in files:
        create.update(
            {
                "config/webhook/kustomization.yaml": _WEBHOOK_KUSTOMIZATION,
                "config/webhook/kustomizeconfig.yaml": _WEBHOOK_KUSTOMIZECONFIG,
                "config/webhook/service.yaml": _service(project.name),
                "config/certmanager/kustomization.yaml": _CERTMANAGER_KUSTOMIZATION,
                "config/certmanager/certificate.yaml": _certificate(namespace, prefix),
                "config/default/manager_webhook_patch.yaml": _manager_patch(),
            }
        )
    default = files[DEFAULT_KUSTOMIZATION]
    for item in ("../webhook", "../certmanager"):
        default = yamltext.add_list_item(default, "resources", item, source=DEFAULT_KUSTOMIZATION)
    update[DEFAULT_KUSTOMIZATION] = _add_patch(
        default, "manager_webhook_patch.yaml", DEFAULT_KUSTOMIZATION
    )
    update[DOCKERFILE] = _dockerfile(files[DOCKERFILE])
    if conversion:
        patch_file = f"patches/webhook_in_{resource.plural}.yaml"
        create[f"config/crd/{patch_file}"] = _conversion_patch(resource, inject)
        crd = _add_patch(files[CRD_KUSTOMIZATION], patch_file, CRD_KUSTOMIZATION).replace(
            f"  - path: {patch_file}\n    target:\n      kind: Deployment\n",
            f"  - path: {patch_file}\n",
        )
        crd = yamltext.add_list_item(
            crd, "configurations", "kustomizeconfig.yaml", source=CRD_KUSTOMIZATION
        )
        update[CRD_KUSTOMIZATION] = crd
        create["config/crd/kustomizeconfig.yaml"] = _CRD_KUSTOMIZECONFIG
    return Plan(create=create, update=update)


def _manifests(webhooks: tuple[declarations.Webhook, ...], resource: Resource, inject: str) -> str:
    plurals = {w.gvk: _plural_of(w, resource) for w in webhooks}
    documents = []
    client = {"service": {"name": SERVICE, "namespace": "system"}}
    for kind, type_, name in (
        ("MutatingWebhookConfiguration", "mutating", manifests.MUTATING_NAME),
        ("ValidatingWebhookConfiguration", "validating", manifests.VALIDATING_NAME),
    ):
        chosen = [w for w in webhooks if w.type == type_]
        if not chosen:
            continue
        body = manifests.admission_configuration(
            kind, chosen, name=name, plurals=plurals, client_config=client, path_in_url=False
        )
        body["metadata"] = {
            "name": name,
            "annotations": {"cert-manager.io/inject-ca-from": inject},
        }
        documents.append(body)
    if not documents:
        return "# No admission webhooks yet (webhooks.yaml declares only conversion).\n"
    return yamltext.dump_all(
        documents,
        header="Rendered by `ansible-operator create webhook` from webhooks.yaml; "
        "kept in step by running it again.",
    )


def _plural_of(webhook: declarations.Webhook, resource: Resource) -> str:
    return resource.plural if webhook.gvk.kind == resource.kind else plural(webhook.gvk.kind)
