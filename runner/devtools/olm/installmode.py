"""`--install-mode` as operator-sdk spells it, checked against the CSV (pure).

    AllNamespaces | OwnNamespace | SingleNamespace=ns | MultiNamespace=ns1,ns2

Without a flag: AllNamespaces when the CSV supports it, else OwnNamespace (operator-sdk's
`run bundle` default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runner.errors import ConfigError

TYPES = ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")


@dataclass(frozen=True)
class InstallMode:
    type: str
    namespaces: tuple[str, ...] = ()

    def targets(self, namespace: str) -> list[str] | None:
        """The OperatorGroup's targetNamespaces; None for all namespaces."""
        if self.type == "AllNamespaces":
            return None
        if self.type == "OwnNamespace":
            return [namespace]
        return list(self.namespaces)

    def __str__(self) -> str:
        if self.namespaces:
            return f"{self.type}={','.join(self.namespaces)}"
        return self.type


def parse(text: str) -> InstallMode:
    kind, _, rest = text.partition("=")
    kind = kind.strip()
    if kind not in TYPES:
        raise ConfigError(f"--install-mode {text!r}: the type must be one of {', '.join(TYPES)}")
    names = tuple(n.strip() for n in rest.split(",") if n.strip())
    if kind in ("AllNamespaces", "OwnNamespace") and names:
        raise ConfigError(f"--install-mode {text!r}: {kind} takes no namespaces")
    if kind == "SingleNamespace" and len(names) != 1:
        raise ConfigError(f"--install-mode {text!r}: SingleNamespace takes one namespace (=ns)")
    if kind == "MultiNamespace" and not names:
        raise ConfigError(f"--install-mode {text!r}: MultiNamespace needs =ns1,ns2")
    return InstallMode(kind, names)


def supported(csv: dict[str, Any]) -> list[str]:
    modes = (csv.get("spec") or {}).get("installModes") or []
    return [str(m.get("type")) for m in modes if m.get("supported") is True]


def choose(csv: dict[str, Any], requested: str | None) -> InstallMode:
    """The install mode to use: `requested` if the CSV supports it, else the default."""
    allowed = supported(csv)
    if requested:
        mode = parse(requested)
        if mode.type not in allowed:
            raise ConfigError(
                f"the CSV does not support install mode {mode.type} "
                f"(supported: {', '.join(allowed) or 'none'})"
            )
        return mode
    for kind in ("AllNamespaces", "OwnNamespace"):
        if kind in allowed:
            return InstallMode(kind)
    raise ConfigError(
        "the CSV supports neither AllNamespaces nor OwnNamespace; pass --install-mode "
        f"(supported: {', '.join(allowed) or 'none'})"
    )


def matches(group: dict[str, Any], targets: list[str] | None) -> bool:
    """Whether an existing OperatorGroup selects exactly `targets` (None: all)."""
    spec = group.get("spec") or {}
    if spec.get("selector"):
        return False
    existing = spec.get("targetNamespaces")
    if targets is None:
        return not existing
    return sorted(existing or []) == sorted(targets)
