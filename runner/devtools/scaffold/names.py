"""Names a scaffolded project is built from, validated once at the edge.

`init` takes a domain and a project name; `create api` a group, version and kind. Every
file name, Kubernetes name and YAML key the renderers write is derived here, so the rules
(DNS-1123 names, Kubernetes API versions, UpperCamelCase kinds, the plural of a kind)
live in one place and are tested by tables. Errors name the flag and the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from runner.devtools.scaffold.plural import plural
from runner.errors import ConfigError

__all__ = [
    "Resource",
    "group_warning",
    "plural",
    "validate_domain",
    "validate_group",
    "validate_kind",
    "validate_project_name",
    "validate_version",
]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(rf"^{_LABEL}$")
_DNS_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def _subdomain(flag: str, value: str, *, what: str) -> str:
    if not value:
        raise ConfigError(f"{flag}: must not be empty")
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ConfigError(
            f"{flag} {value!r}: {what} must be a DNS-1123 subdomain: lower-case letters, "
            "digits, '-' and '.', starting and ending with a letter or digit"
        )
    if any(len(label) > 63 for label in value.split(".")):
        raise ConfigError(f"{flag} {value!r}: each dot-separated part must be at most 63 long")
    return value


def validate_domain(value: str) -> str:
    """The project's domain, e.g. `example.com` (the API groups end with it)."""
    return _subdomain("--domain", value, what="the domain")


def validate_group(value: str, *, domain: str) -> str:
    """The short API group, e.g. `cache`; the full group `cache.<domain>` must fit too."""
    _subdomain("--group", value, what="the group")
    full = f"{value}.{domain}" if domain else value
    if len(full) > 253:
        raise ConfigError(f"--group {value!r}: the full group {full!r} is longer than 253")
    return value


def group_warning(group: str, domain: str) -> str | None:
    """A note when the short group already ends with the domain: operator-sdk appends the
    domain anyway (`web.example.com` → `web.example.com.example.com`), and so do we, so
    that a project moves between the two tools unchanged; the user most likely meant the
    part before the domain."""
    if not domain or not (group == domain or group.endswith(f".{domain}")):
        return None
    short = group[: -len(domain)].rstrip(".")
    hint = f"--group {short}" if short else "a group that is not the domain itself"
    return (
        f"warning: --group {group!r} already ends with the domain {domain!r}; the API group "
        f"is {group}.{domain} (the domain is always appended, as operator-sdk does); "
        f"for {short + '.' if short else ''}{domain} use {hint}"
    )


def validate_version(value: str) -> str:
    """A Kubernetes API version: `v1`, `v2`, `v1alpha1`, `v1beta2`, ..."""
    if not _VERSION.match(value):
        raise ConfigError(
            f"--version {value!r}: must look like v1, v1alpha1 or v1beta2 "
            "('v', a number from 1, optionally alpha or beta and a number from 1)"
        )
    return value


def validate_kind(value: str) -> str:
    """A kind in UpperCamelCase: a capital letter, then letters and digits."""
    if not _KIND.match(value):
        raise ConfigError(
            f"--kind {value!r}: must be UpperCamelCase (a capital letter, then letters "
            "and digits), e.g. Memcached or WebSite"
        )
    if len(value) > 63:
        raise ConfigError(f"--kind {value!r}: must be at most 63 characters long")
    return value


def validate_project_name(value: str, *, flag: str = "--project-name") -> str:
    """The project name: a DNS-1123 label, since it prefixes names and the namespace."""
    if not value or len(value) > 63 or not _DNS_LABEL.match(value):
        raise ConfigError(
            f"{flag} {value!r}: the project name must be a DNS-1123 label (at most 63 "
            "lower-case letters, digits and '-', starting and ending with a letter or digit)"
        )
    return value


@dataclass(frozen=True)
class Resource:
    """One API (`create api`): its group within the project's domain, version and kind."""

    group: str
    domain: str
    version: str
    kind: str
    namespaced: bool = True

    @classmethod
    def validated(cls, *, group: str, domain: str, version: str, kind: str) -> Resource:
        return cls(
            group=validate_group(group, domain=domain),
            domain=domain,
            version=validate_version(version),
            kind=validate_kind(kind),
        )

    @property
    def full_group(self) -> str:
        return f"{self.group}.{self.domain}" if self.domain else self.group

    @property
    def api_version(self) -> str:
        return f"{self.full_group}/{self.version}"

    @property
    def plural(self) -> str:
        return plural(self.kind)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.full_group}"

    @property
    def crd_file(self) -> str:
        """Path of the CRD, relative to config/crd/."""
        return f"bases/{self.full_group}_{self.plural}.yaml"

    @property
    def sample_file(self) -> str:
        """Path of the sample CR, relative to config/samples/."""
        return f"{self.group}_{self.version}_{self.singular}.yaml"

    @property
    def role_name(self) -> str:
        """The role (directory under roles/) and playbook name: the kind in lower case."""
        return self.kind.lower()

    @property
    def playbook_file(self) -> str:
        return f"playbooks/{self.role_name}.yml"

    @property
    def sample_name(self) -> str:
        return f"{self.singular}-sample"

    def gvk_text(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"
