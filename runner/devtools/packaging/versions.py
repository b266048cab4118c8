"""Semantic versions, OLM skip ranges and Kubernetes name formats (pure).

OLM parses versions with blang/semver (strict semver 2.0.0: no leading `v`, no leading
zeros) and `olm.skipRange` with blang's range grammar (`>=0.1.0 <0.2.0`, `||` between
alternatives). Bundle names must be DNS-1123 subdomains and, since OLM puts them in
labels, valid label values too (at most 63 characters).
"""

from __future__ import annotations

import re
from functools import total_ordering

_NUM = r"0|[1-9]\d*"
_PRE_ID = r"(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
SEMVER = re.compile(
    rf"^(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
    rf"(?:-(?P<pre>{_PRE_ID}(?:\.{_PRE_ID})*))?"
    r"(?:\+(?P<build>[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
# blang/semver range versions may omit minor/patch and use x wildcards.
_RANGE_VERSION = r"(?:\d+|x|X|\*)(?:\.(?:\d+|x|X|\*)){0,2}(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?"
_RANGE_PART = re.compile(rf"^(?:>=|<=|>|<|=|==|!=)?{_RANGE_VERSION}$")
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(?:\.{_DNS_LABEL})*$")
_LABEL_VALUE = re.compile(r"^(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@total_ordering
class Version:
    """A parsed semantic version; ordering follows semver precedence."""

    def __init__(self, text: str) -> None:
        match = SEMVER.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH)")
        self.text = text
        self.core = (int(match["major"]), int(match["minor"]), int(match["patch"]))
        self.pre: tuple[str, ...] = tuple(match["pre"].split(".")) if match["pre"] else ()

    def _key(self) -> tuple[tuple[int, int, int], int, tuple[tuple[int, int | str], ...]]:
        pre = tuple((0, int(p)) if p.isdigit() else (1, p) for p in self.pre)
        return self.core, 0 if self.pre else 1, pre

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._key() == other._key()

    def __lt__(self, other: Version) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Version({self.text!r})"


def is_semver(text: str) -> bool:
    return SEMVER.match(text) is not None


def range_error(text: str) -> str | None:
    """Why `text` is not a blang/semver range, or None when it is one."""
    if not text.strip():
        return "the range is empty"
    for alternative in text.split("||"):
        parts = alternative.split()
        if not parts:
            return "an alternative between `||` is empty"
        for part in parts:
            if not _RANGE_PART.match(part):
                return f"{part!r} is not a comparison like >=1.2.3"
    return None


def name_error(name: str) -> str | None:
    """Why `name` cannot be a CSV (bundle) name, or None."""
    if not name:
        return "the name is empty"
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return "must be a DNS-1123 subdomain (lower case alphanumerics, '-' and '.')"
    if len(name) > 63 or not _LABEL_VALUE.match(name):
        return "must be a valid label value (at most 63 characters)"
    return None


def split_csv_name(name: str) -> tuple[str, str] | None:
    """`memcached-operator.v0.1.0` -> ("memcached-operator", "0.1.0")."""
    match = re.match(r"^(?P<package>.+?)\.v(?P<version>\d+\.\d+\.\d+.*)$", name)
    return (match["package"], match["version"]) if match else None
