"""One check's verdict: :class:`Finding` (what was seen, how it stands, what to change)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = ("Finding", "Status")


class Status(StrEnum):
    """How one check stands for Gear."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's result."""

    check: str
    status: Status
    found: str
    """What the doctor saw, in words."""
    change: str = ""
    """What to change (empty when nothing)."""
    data: dict[str, Any] = field(default_factory=dict)
    """The same in numbers and names, for ``--json``."""
