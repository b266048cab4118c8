"""The repository's memcached sample is laid out exactly as `init` + `create api` would
lay it out, so the sample cannot drift from what new projects get."""

from __future__ import annotations

import pytest
import yaml
from support.sample_scaffold import REPO, expected_files

from runner.devtools.scaffold.projectfile import parse_project

EXPECTED = expected_files()
HINT = "regenerate with: .venv/bin/python tests/support/sample_scaffold.py"


def test_the_sample_covers_rbac_manager_and_manifests() -> None:
    for prefix in ("config/rbac/", "config/manager/", "config/default/", "config/scorecard/"):
        assert any(path.startswith(prefix) for path in EXPECTED), prefix
    assert "config/manifests/bases/memcached-operator.clusterserviceversion.yaml" in EXPECTED


@pytest.mark.parametrize("path", [pytest.param(path, id=path) for path in sorted(EXPECTED)])
def test_file_matches_the_renderer(path: str) -> None:
    target = REPO / path
    assert target.is_file(), f"{path} is missing; {HINT}"
    assert target.read_text(encoding="utf-8") == EXPECTED[path], f"{path} drifted; {HINT}"


def test_project_file_names_the_memcached_api() -> None:
    project = parse_project((REPO / "PROJECT").read_text())
    assert (project.domain, project.name) == ("example.com", "memcached-operator")
    [resource] = project.resources
    assert resource.api_version == "cache.example.com/v1alpha1"
    assert resource.kind == "Memcached"


def test_csv_base_is_filled_in() -> None:
    path = REPO / "config/manifests/bases/memcached-operator.clusterserviceversion.yaml"
    spec = yaml.safe_load(path.read_text())["spec"]
    assert spec["displayName"] == "Memcached Operator"
    assert "memcached" in spec["description"].lower() and "TODO" not in spec["description"]
    assert spec["keywords"] and spec["maintainers"] and spec["provider"]["name"]
    assert spec["links"]
    assert spec["icon"][0]["base64data"] and spec["icon"][0]["mediatype"] == "image/svg+xml"
    assert [c["kind"] for c in spec["customresourcedefinitions"]["owned"]] == ["Memcached"]


def test_the_samples_crd_is_the_one_the_tests_install() -> None:
    crd = yaml.safe_load((REPO / "config/crd/bases/cache.example.com_memcacheds.yaml").read_text())
    kustomization = yaml.safe_load((REPO / "config/crd/kustomization.yaml").read_text())
    assert kustomization["resources"] == ["bases/cache.example.com_memcacheds.yaml"]
    assert crd["metadata"]["name"] == "memcacheds.cache.example.com"
