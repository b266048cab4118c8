"""`create webhook`: roles for a kind's webhooks and the configuration that serves them.

operator-sdk's flags (`--defaulting`, `--programmatic-validation`, `--conversion`) choose
the webhooks. Written: a role per webhook (`roles/<kind>_defaulting`, `_validation`,
`_conversion`), the kind's entry in webhooks.yaml, `config/webhook` (the Service and the
Validating/MutatingWebhookConfiguration, rendered from every webhooks.yaml entry by
`runner.webhooks.manifests`), `config/certmanager` (a self-signed Issuer and the serving
Certificate whose CA cert-manager injects), and the kustomize wiring in `config/default`
and, for conversion, `config/crd`; and a Molecule scenario, `molecule/<kind>-webhooks`,
that asks the API server for what the roles do. Pure like `generate.py`: a `Plan` from
file texts. The new files are rendered by `files.py`, the scenario by
`moleculescenario.py`; the edits to files the project has are `edits.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runner.devtools.scaffold import yamltext
from runner.devtools.scaffold.generate import Plan
from runner.devtools.scaffold.names import Resource
from runner.devtools.scaffold.projectfile import PROJECT_FILE, parse_project
from runner.devtools.scaffold.webhook import edits as webhook_edits
from runner.devtools.scaffold.webhook import files as webhook_files
from runner.devtools.scaffold.webhook.moleculescenario import add_checks, scenario_files
from runner.errors import ConfigError
from runner.webhooks import declarations

__all__ = ["SCENARIO_VERIFY_GLOB", "WEBHOOK_FILES", "webhook_plan"]

WEBHOOKS_FILE = declarations.DEFAULT_FILE
DEFAULT_KUSTOMIZATION = "config/default/kustomization.yaml"
CRD_KUSTOMIZATION = "config/crd/kustomization.yaml"
MANIFESTS = "config/webhook/manifests.yaml"
DOCKERFILE = "Dockerfile"
CRD_KUSTOMIZECONFIG = "config/crd/kustomizeconfig.yaml"
WEBHOOK_FILES = (
    WEBHOOKS_FILE,
    DEFAULT_KUSTOMIZATION,
    CRD_KUSTOMIZATION,
    CRD_KUSTOMIZECONFIG,
    MANIFESTS,
    DOCKERFILE,
)
"""The files `webhook_plan` reads (besides PROJECT), those that exist."""
SCENARIO_VERIFY_GLOB = "molecule/*-webhooks/verify.yml"
"""And these: the Molecule scenarios earlier `create webhook` runs wrote."""


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
    webhook_edits.refuse_duplicates(
        known, resource, defaulting=defaulting, validation=validation, conversion=conversion
    )
    keys = webhook_edits.entry_keys(
        resource, defaulting=defaulting, validation=validation, conversion=conversion
    )
    webhooks_text = webhook_edits.declare(existing, resource, keys)
    every = declarations.parse(
        webhooks_text, source=WEBHOOKS_FILE, environ={}, base_dir=root, check_paths=False
    )
    namespace = _kustomize_value(files[DEFAULT_KUSTOMIZATION], "namespace") or "system"
    prefix = _kustomize_value(files[DEFAULT_KUSTOMIZATION], "namePrefix")
    inject = f"{namespace}/{prefix}{webhook_files.CERTIFICATE}"

    cr_var = "_" + resource.full_group.replace(".", "_").replace("-", "_") + "_" + resource.singular
    create: dict[str, str] = {}
    update: dict[str, str] = {}
    roles = {
        "validation": (validation, webhook_files.VALIDATION_ROLE),
        "defaulting": (defaulting, webhook_files.DEFAULTING_ROLE),
        "conversion": (conversion, webhook_files.CONVERSION_ROLE),
    }
    for suffix, (chosen, template) in roles.items():
        if chosen:
            what = "create and update"
            create[f"roles/{resource.singular}_{suffix}/tasks/main.yml"] = template.format(
                kind=resource.kind, cr_var=cr_var, what=what
            )
    scenario = scenario_files(resource, defaulting=defaulting, validation=validation)
    verify = next(path for path in scenario if path.endswith("/verify.yml"))
    if verify in files:
        # The kind's scenario exists (its earlier webhooks): its files may have been
        # edited, so only the new webhooks' checks are added to verify.yml.
        update[verify] = add_checks(
            files[verify], resource, defaulting=defaulting, validation=validation
        )
    else:
        create.update(scenario)
    (update if WEBHOOKS_FILE in files else create)[WEBHOOKS_FILE] = webhooks_text
    (update if MANIFESTS in files else create)[MANIFESTS] = webhook_files.admission_manifests(
        every, resource, inject
    )
    if MANIFESTS not in files:
        create.update(
            {
                "config/webhook/kustomization.yaml": webhook_files.WEBHOOK_KUSTOMIZATION,
                "config/webhook/kustomizeconfig.yaml": webhook_files.WEBHOOK_KUSTOMIZECONFIG,
                "config/webhook/service.yaml": webhook_files.service(project.name),
                "config/certmanager/kustomization.yaml": webhook_files.CERTMANAGER_KUSTOMIZATION,
                "config/certmanager/certificate.yaml": webhook_files.certificate(namespace, prefix),
                "config/default/manager_webhook_patch.yaml": webhook_files.manager_patch(),
            }
        )
    default = files[DEFAULT_KUSTOMIZATION]
    for item in ("../webhook", "../certmanager"):
        default = yamltext.add_list_item(default, "resources", item, source=DEFAULT_KUSTOMIZATION)
    update[DEFAULT_KUSTOMIZATION] = webhook_edits.add_patch(
        default, "manager_webhook_patch.yaml", DEFAULT_KUSTOMIZATION
    )
    update[DOCKERFILE] = webhook_edits.dockerfile(files[DOCKERFILE])
    if conversion:
        patch_file = f"patches/webhook_in_{resource.plural}.yaml"
        create[f"config/crd/{patch_file}"] = webhook_files.conversion_patch(resource, inject)
        crd = webhook_edits.add_patch(
            files[CRD_KUSTOMIZATION], patch_file, CRD_KUSTOMIZATION
        ).replace(
            f"  - path: {patch_file}\n    target:\n      kind: Deployment\n",
            f"  - path: {patch_file}\n",
        )
        crd = yamltext.add_list_item(
            crd, "configurations", "kustomizeconfig.yaml", source=CRD_KUSTOMIZATION
        )
        update[CRD_KUSTOMIZATION] = crd
        if CRD_KUSTOMIZECONFIG not in files:  # an earlier kind's conversion wrote it
            create[CRD_KUSTOMIZECONFIG] = webhook_files.CRD_KUSTOMIZECONFIG
    return Plan(create=create, update=update)


def _kustomize_value(text: str, key: str) -> str:
    data = yamltext.load(text, source=DEFAULT_KUSTOMIZATION)
    value = data.get(key) if isinstance(data, dict) else None
    return str(value) if isinstance(value, str) else ""
