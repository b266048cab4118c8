"""Names of scaffolded projects: validation messages, plurals, derived file names."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runner.devtools.scaffold.names import (
    Resource,
    group_warning,
    plural,
    validate_domain,
    validate_group,
    validate_kind,
    validate_project_name,
    validate_version,
)
from runner.errors import ConfigError


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        pytest.param("Memcached", "memcacheds", id="Memcached"),
        pytest.param("Site", "sites", id="Site"),
        pytest.param("Sites", "sites", id="Sites"),
        pytest.param("Bus", "buses", id="Bus"),
        pytest.param("Box", "boxes", id="Box"),
        pytest.param("Quiz", "quizzes", id="Quiz"),
        pytest.param("Match", "matches", id="Match"),
        pytest.param("Mesh", "meshes", id="Mesh"),
        pytest.param("Policy", "policies", id="Policy"),
        pytest.param("WebPolicy", "webpolicies", id="WebPolicy"),
        pytest.param("Gateway", "gateways", id="Gateway"),
        pytest.param("Key", "keys", id="Key"),
        pytest.param("Y", "ies", id="Y"),
        pytest.param("Status", "statuses", id="Status"),
        pytest.param("Month", "months", id="Month"),
        pytest.param("Db2", "db2s", id="Db2"),
        pytest.param("Index", "indices", id="Index"),
        pytest.param("Person", "people", id="Person"),
        pytest.param("WebPerson", "webpeople", id="WebPerson"),
        pytest.param("Data", "data", id="Data"),
        pytest.param("Cactus", "cacti", id="Cactus"),
        pytest.param("Radius", "radii", id="Radius"),
        pytest.param("Analysis", "analyses", id="Analysis"),
        pytest.param("Leaf", "leaves", id="Leaf"),
        pytest.param("Knife", "knives", id="Knife"),
        pytest.param("Photo", "photos", id="Photo"),
        pytest.param("Video", "videoes", id="Video"),
        pytest.param("Hero", "heroes", id="Hero"),
        pytest.param("Series", "series", id="Series"),
        pytest.param("Fish", "fish", id="Fish"),
        pytest.param("Sheep", "sheep", id="Sheep"),
        pytest.param("Money", "money", id="Money"),
        pytest.param("Alias", "aliases", id="Alias"),
        pytest.param("Ox", "oxen", id="Ox"),
        pytest.param("Foxes", "foxes", id="Foxes"),
    ],
)
def test_plural(kind: str, expected: str) -> None:
    # Each expected plural is what operator-sdk v1.42 wrote for the kind.
    assert plural(kind) == expected


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(lambda: validate_domain(""), "--domain: must not be empty", id="domain-empty"),
        pytest.param(
            lambda: validate_domain("Example.com"),
            "--domain 'Example.com': the domain must be a DNS-1123 subdomain",
            id="domain-upper",
        ),
        pytest.param(
            lambda: validate_domain("example..com"),
            "--domain 'example..com'",
            id="domain-empty-label",
        ),
        pytest.param(
            lambda: validate_domain("a" * 64 + ".com"),
            "each dot-separated part must be at most 63 long",
            id="domain-long-label",
        ),
        pytest.param(
            lambda: validate_group("web_site", domain="example.com"),
            "--group 'web_site': the group must be a DNS-1123 subdomain",
            id="group-underscore",
        ),
        pytest.param(
            lambda: validate_group("-web", domain="example.com"),
            "--group '-web'",
            id="group-leading-dash",
        ),
        pytest.param(
            lambda: validate_group("Web", domain="example.com"),
            "--group 'Web'",
            id="group-upper",
        ),
        pytest.param(
            lambda: validate_group("a" * 60, domain=".".join(["b" * 60] * 4)),
            "is longer than 253",
            id="group-full-too-long",
        ),
        pytest.param(
            lambda: validate_version("1"), "--version '1': must look like v1", id="version-no-v"
        ),
        pytest.param(lambda: validate_version("v0"), "--version 'v0'", id="version-zero"),
        pytest.param(lambda: validate_version("v1gamma1"), "--version 'v1gamma1'", id="gamma"),
        pytest.param(lambda: validate_version("v1alpha"), "--version 'v1alpha'", id="alpha-no-n"),
        pytest.param(lambda: validate_version("V1"), "--version 'V1'", id="version-upper"),
        pytest.param(
            lambda: validate_kind("memcached"),
            "--kind 'memcached': must be UpperCamelCase",
            id="kind-lower",
        ),
        pytest.param(lambda: validate_kind("Mem-cached"), "--kind 'Mem-cached'", id="kind-dash"),
        pytest.param(lambda: validate_kind("1Kind"), "--kind '1Kind'", id="kind-digit"),
        pytest.param(lambda: validate_kind(""), "--kind ''", id="kind-empty"),
        pytest.param(lambda: validate_kind("K" + "a" * 63), "at most 63", id="kind-long"),
        pytest.param(
            lambda: validate_project_name("My_Operator"),
            "--project-name 'My_Operator': the project name must be a DNS-1123 label",
            id="project-name",
        ),
        pytest.param(
            lambda: validate_project_name("a.b"), "--project-name 'a.b'", id="project-dot"
        ),
        pytest.param(
            lambda: validate_project_name("Web", flag="the directory name"),
            "the directory name 'Web'",
            id="project-dir-flag",
        ),
    ],
)
def test_validation_errors_name_flag_and_value(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        call()
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("call", "value"),
    [
        pytest.param(lambda: validate_domain("example.com"), "example.com", id="domain"),
        pytest.param(lambda: validate_domain("my-corp.io"), "my-corp.io", id="domain-dash"),
        pytest.param(lambda: validate_group("cache", domain="example.com"), "cache", id="group"),
        pytest.param(lambda: validate_group("a.b-c", domain="x.io"), "a.b-c", id="group-dots"),
        pytest.param(lambda: validate_version("v1"), "v1", id="v1"),
        pytest.param(lambda: validate_version("v12"), "v12", id="v12"),
        pytest.param(lambda: validate_version("v1alpha1"), "v1alpha1", id="alpha"),
        pytest.param(lambda: validate_version("v2beta10"), "v2beta10", id="beta"),
        pytest.param(lambda: validate_kind("Memcached"), "Memcached", id="kind"),
        pytest.param(lambda: validate_kind("WebSite2"), "WebSite2", id="kind-camel-digit"),
        pytest.param(lambda: validate_kind("HTTPRoute"), "HTTPRoute", id="kind-acronym"),
        pytest.param(lambda: validate_project_name("web-operator"), "web-operator", id="name"),
    ],
)
def test_valid_values_are_returned(call: Callable[[], object], value: str) -> None:
    assert call() == value


def test_resource_names() -> None:
    site = Resource.validated(group="web", domain="scaffold.example.com", version="v1", kind="Site")
    assert site.full_group == "web.scaffold.example.com"
    assert site.api_version == "web.scaffold.example.com/v1"
    assert site.crd_name == "sites.web.scaffold.example.com"
    assert site.crd_file == "bases/web.scaffold.example.com_sites.yaml"
    assert site.sample_file == "web_v1_site.yaml"
    assert site.role_name == "site"
    assert site.playbook_file == "playbooks/site.yml"
    assert site.sample_name == "site-sample"
    assert site.gvk_text() == "web.scaffold.example.com/v1, Kind=Site"


def test_resource_validated_checks_every_flag() -> None:
    with pytest.raises(ConfigError, match="--kind 'site'"):
        Resource.validated(group="web", domain="example.com", version="v1", kind="site")
    with pytest.raises(ConfigError, match="--version 'one'"):
        Resource.validated(group="web", domain="example.com", version="one", kind="Site")
    with pytest.raises(ConfigError, match="--group 'Web'"):
        Resource.validated(group="Web", domain="example.com", version="v1", kind="Site")


@pytest.mark.parametrize(
    ("group", "domain", "note"),
    [
        pytest.param("web", "example.com", None, id="short-group"),
        pytest.param("example", "example.com", None, id="prefix-of-domain"),
        pytest.param("webexample.com", "example.com", None, id="no-dot-before-domain"),
        pytest.param(
            "web.example.com",
            "example.com",
            "warning: --group 'web.example.com' already ends with the domain 'example.com'; "
            "the API group is web.example.com.example.com (the domain is always appended, "
            "as operator-sdk does); for web.example.com use --group web",
            id="group-ends-with-domain",
        ),
    ],
)
def test_group_warning(group: str, domain: str, note: str | None) -> None:
    assert group_warning(group, domain) == note
