"""What a validation rule reports: a level, the file, the field and a message (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["error", "warning"]


@dataclass(frozen=True, order=True)
class Finding:
    level: Level
    file: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{self.level.upper()} {where}: {self.message}"


def error(file: str, field: str, message: str) -> Finding:
    return Finding("error", file, field, message)


def warning(file: str, field: str, message: str) -> Finding:
    return Finding("warning", file, field, message)


def has_errors(findings: list[Finding]) -> bool:
    return any(f.level == "error" for f in findings)
