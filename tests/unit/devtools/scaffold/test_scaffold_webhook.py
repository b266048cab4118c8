"""`ansible-operator create webhook`, and the bundle it leads to (webhookdefinitions)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.devtools.packaging import projectconfig as packaging_project
from runner.devtools.packaging.bundle import render_bundle
from runner.devtools.packaging.csv import BundleOptions
from runner.errors import ConfigError
from runner.webhooks import declarations


@pytest.fixture
def demo(tmp_path: Path, cli: Callable[[Sequence[str]], int]) -> Path:
    root = tmp_path / "demo"
    root.mkdir()
    cwd = Path.cwd()
    os.chdir(root)
    try:
        assert cli(["init", "--domain", "example.com"]) == 0
        assert (
            cli(
                [
                    "create",
                    "api",
                    "--group",
                    "cache",
                    "--version",
                    "v1alpha1",
                    "--kind",
                    "Memcached",
                ]
            )
            == 0
        )
        yield root
    finally:
        os.chdir(cwd)


def _create(*flags: str) -> list[str]:
    kind = ["--group", "cache", "--version", "v1alpha1", "--kind", "Memcached"]
    return ["create", "webhook", *kind, *flags]


def _load_all(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def test_every_webhook_gets_a_role_an_entry_and_its_wiring(
    demo: Path, cli: Callable[[Sequence[str]], int]
) -> None:
    code = cli(_create("--defaulting", "--programmatic-validation", "--conversion"))
    assert code == 0
    webhooks = declarations.load(Path("webhooks.yaml"), environ={}, cwd=demo)
    assert [(w.type, w.target.name) for w in webhooks] == [
        ("validating", "memcached_validation"),
        ("mutating", "memcached_defaulting"),
        ("conversion", "memcached_conversion"),
    ]
    for role in ("validation", "defaulting", "conversion"):
        tasks = yaml.safe_load((demo / f"roles/memcached_{role}/tasks/main.yml").read_text())
        assert isinstance(tasks, list) and tasks
    configurations = _load_all(demo / "config/webhook/manifests.yaml")
    assert [c["kind"] for c in configurations] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    validating = configurations[1]["webhooks"][0]
    assert validating["clientConfig"]["service"] == {
        "name": "webhook-service",
        "namespace": "system",
        "path": "/validate-cache-example-com-v1alpha1-memcached",
    }
    assert validating["rules"][0]["resources"] == ["memcacheds"]
    assert configurations[1]["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "demo-system/demo-serving-cert"
    }
    default = yaml.safe_load((demo / "config/default/kustomization.yaml").read_text())
    assert {"../webhook", "../certmanager"} <= set(default["resources"])
    assert {"path": "manager_webhook_patch.yaml", "target": {"kind": "Deployment"}} in default[
        "patches"
    ]
    crd = yaml.safe_load((demo / "config/crd/kustomization.yaml").read_text())
    assert crd["patches"] == [{"path": "patches/webhook_in_memcacheds.yaml"}]
    assert (
        "COPY --chown=1001:0 webhooks.yaml ${HOME}/webhooks.yaml"
        in (demo / "Dockerfile").read_text()
    )

    scenario = demo / "molecule/memcached-webhooks"
    assert sorted(p.name for p in scenario.iterdir()) == ["molecule.yml", "vars.yml", "verify.yml"]
    verify = yaml.safe_load((scenario / "verify.yml").read_text())
    names = [task["name"] for task in verify[0]["tasks"]]
    assert any("gets size 1" in name for name in names)
    assert any("negative size is refused" in name for name in names)

    # A second time for the same kind: refused, nothing written.
    assert cli(_create("--defaulting")) == 1


def test_the_bundle_carries_webhookdefinitions_not_the_objects_olm_provides(
    demo: Path, cli: Callable[[Sequence[str]], int]
) -> None:
    assert cli(_create("--programmatic-validation", "--conversion")) == 0
    inputs = packaging_project.load_project(demo)
    files = render_bundle(inputs, BundleOptions(version="0.1.0", package="demo"))
    csv = yaml.safe_load(files["bundle/manifests/demo.clusterserviceversion.yaml"])
    definitions = csv["spec"]["webhookdefinitions"]
    assert [(d["type"], d["generateName"], d["webhookPath"]) for d in definitions] == [
        ("ConversionWebhook", "cmemcached.cache.example.com", "/convert"),
        (
            "ValidatingAdmissionWebhook",
            "vmemcached.cache.example.com",
            "/validate-cache-example-com-v1alpha1-memcached",
        ),
    ]
    assert all(d["deploymentName"] == "demo-controller-manager" for d in definitions)
    assert all(d["targetPort"] == 9443 and d["containerPort"] == 443 for d in definitions)
    assert definitions[0]["conversionCRDs"] == ["memcacheds.cache.example.com"]
    names = sorted(files)
    assert not any("webhook-service" in name or "serving-cert" in name for name in names)
    crd = yaml.safe_load(files["bundle/manifests/cache.example.com_memcacheds.yaml"])
    assert "conversion" not in crd["spec"]


def test_create_webhook_needs_the_kind_and_a_webhook(demo: Path) -> None:
    from runner.devtools.scaffold.webhook.create import webhook_plan

    paths = ("PROJECT", "config/default/kustomization.yaml", "config/crd/kustomization.yaml")
    files = {p: (demo / p).read_text() for p in (*paths, "Dockerfile")}
    common: dict[str, Any] = {"group": "cache", "version": "v1alpha1", "root": demo}
    none = {"defaulting": False, "validation": False, "conversion": False}
    with pytest.raises(ConfigError, match="at least one of"):
        webhook_plan(files, kind="Memcached", **common, **none)
    with pytest.raises(ConfigError, match="create api"):
        webhook_plan(files, kind="Other", **common, **{**none, "defaulting": True})


def test_create_webhook_again_adds_the_new_webhooks_to_the_kinds_entry(
    demo: Path, cli: Callable[[Sequence[str]], int]
) -> None:
    """operator-sdk users run `create webhook` once per webhook type: each run adds its
    webhooks to the kind's entry, keeping what the file already says."""
    assert cli(_create("--programmatic-validation")) == 0
    webhooks_file = demo / "webhooks.yaml"
    webhooks_file.write_text(
        "# our webhooks\n"
        + webhooks_file.read_text().replace(
            "failurePolicy: Fail", "failurePolicy: Ignore  # while we try it"
        )
    )
    assert cli(_create("--defaulting")) == 0
    assert cli(_create("--conversion")) == 0

    text = webhooks_file.read_text()
    assert text.startswith("# our webhooks\n")
    assert "failurePolicy: Ignore  # while we try it" in text
    (entry,) = yaml.safe_load(text)
    assert list(entry) == ["group", "version", "kind", "validating", "mutating", "conversion"]
    assert entry["validating"]["failurePolicy"] == "Ignore"
    webhooks = declarations.load(Path("webhooks.yaml"), environ={}, cwd=demo)
    assert [(w.type, w.target.name) for w in webhooks] == [
        ("validating", "memcached_validation"),
        ("mutating", "memcached_defaulting"),
        ("conversion", "memcached_conversion"),
    ]
    for role in ("validation", "defaulting", "conversion"):
        assert (demo / f"roles/memcached_{role}/tasks/main.yml").is_file()
    configurations = _load_all(demo / "config/webhook/manifests.yaml")
    assert [c["kind"] for c in configurations] == [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    crd = yaml.safe_load((demo / "config/crd/kustomization.yaml").read_text())
    assert crd["patches"] == [{"path": "patches/webhook_in_memcacheds.yaml"}]
    default = yaml.safe_load((demo / "config/default/kustomization.yaml").read_text())
    assert default["resources"].count("../webhook") == 1
    assert (demo / "Dockerfile").read_text().count("${HOME}/webhooks.yaml") == 1
    verify = yaml.safe_load((demo / "molecule/memcached-webhooks/verify.yml").read_text())
    names = [task["name"] for task in verify[0]["tasks"]]
    assert sum("negative size is refused" in name for name in names) == 1
    assert sum("gets size 1" in name for name in names) == 1


@pytest.mark.parametrize(
    ("first", "again", "message"),
    [
        pytest.param(
            ["--defaulting"],
            ["--conversion", "--defaulting"],
            "Memcached.cache.example.com v1alpha1 already has a mutating webhook "
            "(--defaulting, role memcached_defaulting)",
            id="defaulting",
        ),
        pytest.param(
            ["--programmatic-validation", "--conversion"],
            ["--conversion"],
            "Memcached.cache.example.com already has a conversion webhook "
            "(--conversion, role memcached_conversion)",
            id="conversion",
        ),
    ],
)
def test_create_webhook_refuses_a_webhook_the_kind_has(
    demo: Path,
    cli: Callable[[Sequence[str]], int],
    capsys: pytest.CaptureFixture[str],
    first: list[str],
    again: list[str],
    message: str,
) -> None:
    assert cli(_create(*first)) == 0
    before = {p: p.read_bytes() for p in demo.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert cli(_create(*again)) == 1
    err = capsys.readouterr().err
    assert f"webhooks.yaml: {message}; nothing was written" in err
    assert {p: p.read_bytes() for p in demo.rglob("*") if p.is_file()} == before


def test_create_webhook_for_another_version_adds_an_entry(demo: Path) -> None:
    from runner.devtools.scaffold.webhook.create import webhook_plan

    paths = ("PROJECT", "config/default/kustomization.yaml", "config/crd/kustomization.yaml")
    files = {p: (demo / p).read_text() for p in (*paths, "Dockerfile")}
    files["webhooks.yaml"] = (
        "- group: cache.example.com\n  version: v1beta1\n  kind: Memcached\n"
        "  validating: {role: memcached_validation}\n"
    )
    plan = webhook_plan(
        files,
        group="cache",
        version="v1alpha1",
        kind="Memcached",
        defaulting=False,
        validation=True,
        conversion=False,
        root=demo,
    )
    entries = yaml.safe_load(plan.update["webhooks.yaml"])
    assert [(e["version"], list(e)[3:]) for e in entries] == [
        ("v1beta1", ["validating"]),
        ("v1alpha1", ["validating"]),
    ]


def test_create_webhook_does_not_rewrite_an_entry_it_cannot_extend(demo: Path) -> None:
    from runner.devtools.scaffold.webhook.create import webhook_plan

    paths = ("PROJECT", "config/default/kustomization.yaml", "config/crd/kustomization.yaml")
    files = {p: (demo / p).read_text() for p in (*paths, "Dockerfile")}
    files["webhooks.yaml"] = (
        "- {group: cache.example.com, version: v1alpha1, kind: Memcached,"
        " validating: {role: memcached_validation}}\n"
    )
    with pytest.raises(ConfigError, match=r"entry 1 \(Memcached.cache.example.com v1alpha1\) "):
        webhook_plan(
            files,
            group="cache",
            version="v1alpha1",
            kind="Memcached",
            defaulting=True,
            validation=False,
            conversion=False,
            root=demo,
        )


def test_conversion_webhooks_for_a_second_kind_share_the_crd_kustomizeconfig(
    demo: Path, cli: Callable[[Sequence[str]], int]
) -> None:
    assert cli(_create("--conversion")) == 0
    config = demo / "config/crd/kustomizeconfig.yaml"
    config.write_text(config.read_text() + "# edited by hand\n")
    assert (
        cli(["create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Pool"]) == 0
    )
    kind = ["--group", "cache", "--version", "v1alpha1", "--kind", "Pool"]
    assert cli(["create", "webhook", *kind, "--conversion"]) == 0
    assert config.read_text().endswith("# edited by hand\n")  # kept, not rewritten
    crd = yaml.safe_load((demo / "config/crd/kustomization.yaml").read_text())
    assert crd["configurations"] == ["kustomizeconfig.yaml"]
    patches = [p["path"] for p in crd["patches"]]
    assert {"patches/webhook_in_memcacheds.yaml", "patches/webhook_in_pools.yaml"} <= set(patches)
